// A 1-D convolution over time of time-major activations (rows are frames, as the engine's rows are
// tokens), PyTorch's Conv1d with zero padding that may differ left and right (causal: all left):
//   y[t, o] = act(bias[o] + Σ_{c < cin_g, k < kernel} w[o, c, k] x[t stride + k dilation - pad_left, g cin_g + c])
//             (+ residual[t, o])
// where g = o / cout_g is o's group (cin_g = in_channels / groups, cout_g = out_channels / groups)
// and x is zero outside [0, in_len). act (the define ACTIVATION): 0 none, 1 GELU (erf, gelu_erf),
// 2 GELU's tanh form (gelu_tanh), 3 tanh, all of shaders/activations.wgsl; the residual is added
// after it (Whisper's positions after conv2's GELU).
// The lengths: in_len and out_len from Params, or, where length_at is not NO_LENGTH, from the
// `lengths` input (lengths[length_at], lengths[length_at + 1]: a forward's audio of any length,
// written by the runner before it); the grid covers Params' out_len, the most.
// As an implicit matrix product: a workgroup computes a tile of 64 frames x 64 output channels (a
// thread 4 x 4) over the reduction index j = k cin_g + c (a kernel tap's channels consecutive, as x
// holds them), 16 of j at a time staged in workgroup memory: the tile's x column of each j (its
// frames' taps) and w row of each j (its channels' weights). A tile lies in one group unless
// DIRECT: for grouped convolutions whose groups are narrower than a tile (depthwise), each thread
// reads its own outputs' taps and weights, nothing shared.
// Bindings: 0 p (uniform Params), 1 x (read, f32 [in_len, x_stride]: channel c of frame t at
//           t x_stride + x_offset + c), 2 w (read, f32 [out_channels, cin_g, kernel]: PyTorch's
//           layout), 3 bias (read, f32 [out_channels]; with has_bias), 4 residual (read, f32
//           [out_len, out_channels]; with has_residual), 5 lengths (read, u32; with length_at),
//           6 y (read_write, f32 [out_len, out_channels]).
// Defines: ACTIVATION (u32, above), DIRECT (bool), GELU (true: activations.wgsl's gate_act is
//           GELU's tanh form).
// Dispatch: (ceil(out_channels / 64), ceil(out_len / 64), 1) workgroups of 256 threads.
// Workgroup storage: 8 KiB.
struct Params {
    in_len: u32, out_len: u32, in_channels: u32, out_channels: u32,
    kernel: u32, stride: u32, dilation: u32, groups: u32,
    pad_left: u32, has_bias: u32, has_residual: u32, length_at: u32,
    x_stride: u32, x_offset: u32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> residual: array<f32>;
@group(0) @binding(5) var<storage, read> lengths: array<u32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

const TILE: u32 = 64u;  // frames and output channels of a workgroup's tile
const CHUNK: u32 = 16u;  // reduction indexes staged at a time
const NO_LENGTH: u32 = 0xffffffffu;
// Staged chunk: xs[j * 16 + i] holds frames 4i .. 4i + 3 of the tile for index j, ws[j * 16 + i]
// output channels 4i .. 4i + 3.
var<workgroup> xs: array<vec4<f32>, 256>;
var<workgroup> ws: array<vec4<f32>, 256>;

// x at frame `at` (signed: before 0 or from in_len on, the zero padding), channel `c`.
fn x_at(at: i32, c: u32, in_len: u32) -> f32 {
    if (at < 0 || u32(at) >= in_len) { return 0.0; }
    return x[u32(at) * p.x_stride + p.x_offset + c];
}

// Reduction index j (of a group's cin_g * kernel) as (tap k, channel c within the group).
fn tap_of(j: u32, cin_g: u32) -> vec2<u32> {
    return vec2<u32>(j / cin_g, j % cin_g);
}

fn activate(v: f32) -> f32 {
    if (ACTIVATION == 1u) { return gelu_erf(v); }
    if (ACTIVATION == 2u) { return gate_act(v); }
    if (ACTIVATION == 3u) { return tanh(clamp(v, -10.0, 10.0)); }  // tanh(±10) is ±1 in f32
    return v;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var in_len = p.in_len;
    var out_len = p.out_len;
    if (p.length_at != NO_LENGTH) {
        in_len = lengths[p.length_at];
        out_len = min(lengths[p.length_at + 1u], p.out_len);
    }
    let o0 = wid.x * TILE;
    let t0 = wid.y * TILE;
    if (t0 >= out_len) { return; }  // uniform: the workgroup's tile
    let cin_g = p.in_channels / p.groups;
    let cout_g = p.out_channels / p.groups;
    let taps = cin_g * p.kernel;  // the reduction's length
    let tx = lid % 16u;  // this thread's output channels o0 + 4 tx ..
    let ty = lid / 16u;  // and frames t0 + 4 ty ..
    var acc: array<vec4<f32>, 4>;  // acc[i][c]: frame t0 + 4 ty + i, channel o0 + 4 tx + c
    for (var i = 0u; i < 4u; i++) { acc[i] = vec4<f32>(0.0); }

    if (DIRECT) {
        for (var c = 0u; c < 4u; c++) {
            let o = o0 + 4u * tx + c;
            if (o >= p.out_channels) { break; }
            let first_in = (o / cout_g) * cin_g;
            for (var j = 0u; j < taps; j++) {
                let kc = tap_of(j, cin_g);
                let weight = w[(o * cin_g + kc.y) * p.kernel + kc.x];
                for (var i = 0u; i < 4u; i++) {
                    let at = i32((t0 + 4u * ty + i) * p.stride + kc.x * p.dilation) - i32(p.pad_left);
                    acc[i][c] += weight * x_at(at, first_in + kc.y, in_len);
                }
            }
        }
    } else {
        let first_in = (o0 / cout_g) * cin_g;  // the tile's group's first input channel
        for (var j0 = 0u; j0 < taps; j0 += CHUNK) {
            // Stage 16 indexes x 64 frames of x and 16 x 64 channels of w, 4 of each a thread:
            // consecutive threads take consecutive j (x's channels, contiguous in memory).
            for (var e = 0u; e < 4u; e++) {
                let item = lid + 256u * e;
                let jj = item % CHUNK;
                let lane = item / CHUNK;  // a frame (x) or an output channel (w) of the tile
                let j = j0 + jj;
                var xv = 0.0;
                var wv = 0.0;
                if (j < taps) {
                    let kc = tap_of(j, cin_g);
                    let at = i32((t0 + lane) * p.stride + kc.x * p.dilation) - i32(p.pad_left);
                    xv = x_at(at, first_in + kc.y, in_len);
                    let o = o0 + lane;
                    if (o < p.out_channels) { wv = w[(o * cin_g + kc.y) * p.kernel + kc.x]; }
                }
                xs[jj * 16u + lane / 4u][lane % 4u] = xv;
                ws[jj * 16u + lane / 4u][lane % 4u] = wv;
            }
            workgroupBarrier();
            for (var jj = 0u; jj < CHUNK; jj++) {
                let xv = xs[jj * 16u + ty];
                let wv = ws[jj * 16u + tx];
                acc[0] = fma(vec4<f32>(xv.x), wv, acc[0]);
                acc[1] = fma(vec4<f32>(xv.y), wv, acc[1]);
                acc[2] = fma(vec4<f32>(xv.z), wv, acc[2]);
                acc[3] = fma(vec4<f32>(xv.w), wv, acc[3]);
            }
            workgroupBarrier();  // the next chunk overwrites xs and ws
        }
    }

    for (var i = 0u; i < 4u; i++) {
        let t = t0 + 4u * ty + i;
        if (t >= out_len) { break; }
        for (var c = 0u; c < 4u; c++) {
            let o = o0 + 4u * tx + c;
            if (o >= p.out_channels) { break; }
            var v = acc[i][c];
            if (p.has_bias == 1u) { v += bias[o]; }
            v = activate(v);
            if (p.has_residual == 1u) { v += residual[t * p.out_channels + o]; }
            y[t * p.out_channels + o] = v;
        }
    }
}
