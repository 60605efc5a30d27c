// One Gated DeltaNet layer's conv and delta rule for a decode token or a verifying forward's few
// rows (a prefill's many rows take short_conv.wgsl and delta_chunk_*.wgsl, whose results this
// matches; each row here is computed as a decode token computes it).
// Per value head h (key head kh: key_head below), row t in order:
//   qkv channels: u = SiLU(causal conv over the channel's last kernel inputs: short_conv.wgsl's)
//   q = l2norm(q_kh) * dk^-0.5, k = l2norm(k_kh)     (l2norm(x) = x * inverseSqrt(sum(x^2) + 1e-6))
//   beta = sigmoid(b_h), g = A_h * softplus(a_h + dt_bias_h), A_h = -exp(a_log_h) (a_is_log = 1;
//   llama.cpp's files store A itself: a_is_log = 0)
//   S = exp(g) S;  delta_j = (v_j - sum_i S[i][j] k_i) * beta;  S[i][j] += k_i delta_j
//   y[t, h * dv + j] = o_j = sum_i S[i][j] q_i   (raw: delta_norm.wgsl applies the gated RMSNorm)
// Columns of S evolve independently: a workgroup owns TILE columns of one value head's state S
// [dk, dv] (S[i][j] at (h * dk + i) * dv + j) and keeps them in registers across the rows,
// thread (r, c) holding column c's rows r, r + GROUPS, …; delta_norm.wgsl then applies the
// gated RMSNorm over the head's dv outputs. It convolves the channels it reads itself (the head's
// q and k, its tile's v). The conv state is short_conv.wgsl's ring of inputs by position: the
// workgroups of a key head all read its q and k channels, one of them writes this forward's, and
// the ring keeps those rows apart from the ones read. A forward from position 0 starts from
// zeros (neither state is read); the engine snapshots both where it may go back
// (py_engine/runtime/recurrent_state.py).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 proj (read, f32 [rows, proj_stride]:
//           q|k|v (conv_dim) from 0, z (nv x dv) at z_at, b (nv) at b_at, a (nv) at a_at),
//           3 conv_w (read, f32 [conv_dim, conv_kernel]), 4 a_log (read, f32 [nv]),
//           5 dt_bias (read, f32 [nv]), 6 conv_state (read_write, f32 [conv_ring, conv_dim]),
//           7 state (read_write, f32 [nv, dk, dv]), 8 y (read_write, f32 [rows, nv * dv]).
// Dispatch: (nv, ceil(dv / TILE), 1) workgroups of 256 threads. dk <= 128, conv_kernel <= 4,
//           conv_ring >= conv_kernel - 1 + step.rows. H100, Qwen3.5-0.8B's shape (16 heads of
//           128 x 128), a decode token: a workgroup per head walking its columns in storage took
//           71 µs a layer; with its whole state in registers, 60 (16 workgroups, spilling);
//           tiled, 18, and the conv on its own 8 more.
struct Params {
    nk: u32, nv: u32, dk: u32, dv: u32,
    conv_dim: u32, proj_stride: u32, z_at: u32, b_at: u32,
    a_at: u32, a_is_log: u32, eps: f32, heads_tiled: u32,
    conv_kernel: u32, conv_ring: u32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> proj: array<f32>;
@group(0) @binding(3) var<storage, read> conv_w: array<f32>;
@group(0) @binding(4) var<storage, read> a_log: array<f32>;
@group(0) @binding(5) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(6) var<storage, read_write> conv_state: array<f32>;
@group(0) @binding(7) var<storage, read_write> state: array<f32>;
@group(0) @binding(8) var<storage, read_write> y: array<f32>;

const THREADS: u32 = 256u;
const TILE: u32 = 16u;  // columns a workgroup owns
const GROUPS: u32 = THREADS / TILE;  // threads sharing a column
const HELD: u32 = 8u;  // state rows a thread holds: dk <= GROUPS * HELD
const SLOTS: u32 = 2u;  // conv channels a thread convolves: 2 dk + TILE <= THREADS * SLOTS
var<workgroup> mixed: array<f32, 512>;  // this row's q_kh, k_kh and the tile's v after the conv
var<workgroup> sums: array<vec2<f32>, 256>;

// (sum over the workgroup of a.x, of a.y); every thread gets both.
fn workgroup_sums(lid: u32, a: vec2<f32>) -> vec2<f32> {
    sums[lid] = a;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { sums[lid] += sums[lid + stride]; }
        workgroupBarrier();
    }
    let total = sums[0];
    workgroupBarrier();
    return total;
}

// Column c's sum of its GROUPS threads' parts (every thread gets its column's), in a fixed order.
fn column_sum(lid: u32, c: u32, part: f32) -> f32 {
    sums[lid] = vec2<f32>(part, 0.0);
    workgroupBarrier();
    var total = 0.0;
    for (var g = 0u; g < GROUPS; g++) { total += sums[g * TILE + c].x; }
    workgroupBarrier();
    return total;
}


// The conv_dim channel of this workgroup's channel e: q_kh (dk), k_kh (dk), then v_h's columns
// from j0 (TILE).
fn channel(e: u32, h: u32, kh: u32, j0: u32) -> u32 {
    if (e < p.dk) { return kh * p.dk + e; }
    if (e < 2u * p.dk) { return p.nk * p.dk + kh * p.dk + e - p.dk; }
    return 2u * p.nk * p.dk + h * p.dv + j0 + e - 2u * p.dk;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let kh = key_head(h);
    let dk = p.dk;
    let dv = p.dv;
    let j0 = wid.y * TILE;
    let c = lid % TILE;
    let r = lid / TILE;
    let column = j0 + c < dv;
    let writes_qk = key_head_first(h) && wid.y == 0u;  // the one workgroup that stores q_kh's, k_kh's inputs
    let channels = 2u * dk + min(TILE, dv - j0);
    let taps = p.conv_kernel;
    let held_inputs = taps - 1u;

    // Each thread's conv channels: their taps and the window of earlier inputs (oldest first).
    var window: array<array<f32, 3>, SLOTS>;
    var w: array<array<f32, 4>, SLOTS>;
    for (var s = 0u; s < SLOTS; s++) {
        let e = lid + s * THREADS;
        if (e < channels) {
            let ch = channel(e, h, kh, j0);
            for (var j = 0u; j < taps; j++) { w[s][j] = conv_w[ch * taps + j]; }
            for (var j = 0u; j < held_inputs; j++) {  // positions pos - held_inputs + j, from 0 on
                if (step.pos + j >= held_inputs) {
                    window[s][j] = conv_state[((step.pos + j - held_inputs) % p.conv_ring) * p.conv_dim + ch];
                }
            }
        }
    }
    var held = array<f32, HELD>();  // S[r + GROUPS m][j0 + c]; zero from position 0
    if (step.pos > 0u && column) {
        for (var m = 0u; m < HELD; m++) {
            let i = r + GROUPS * m;
            if (i < dk) { held[m] = state[(h * dk + i) * dv + j0 + c]; }
        }
    }
    var decay_rate = a_log[h];
    if (p.a_is_log == 1u) { decay_rate = -safe_exp(decay_rate); }

    for (var t = 0u; t < step.rows; t++) {
        let row = t * p.proj_stride;
        // The conv (+ SiLU) of this row's channels; sums of squares of q and k.
        var squares = vec2<f32>(0.0);
        for (var s = 0u; s < SLOTS; s++) {
            let e = lid + s * THREADS;
            if (e < channels) {
                let u = proj[row + channel(e, h, kh, j0)];
                var out = w[s][held_inputs] * u;
                for (var j = 0u; j < held_inputs; j++) { out += w[s][j] * window[s][j]; }
                for (var j = 0u; j + 1u < held_inputs; j++) { window[s][j] = window[s][j + 1u]; }
                if (held_inputs > 0u) { window[s][held_inputs - 1u] = u; }
                if (e >= 2u * dk || writes_qk) {
                    conv_state[((step.pos + t) % p.conv_ring) * p.conv_dim + channel(e, h, kh, j0)] = u;
                }
                out = out / (1.0 + safe_exp(-out));
                mixed[e] = out;
                if (e < dk) { squares.x += out * out; } else if (e < 2u * dk) { squares.y += out * out; }
            }
        }
        let total = workgroup_sums(lid, squares);  // its barriers also publish mixed
        let q_scale = inverseSqrt(total.x + 1e-6) * inverseSqrt(f32(dk));
        let k_scale = inverseSqrt(total.y + 1e-6);
        let beta = 1.0 / (1.0 + safe_exp(-proj[row + p.b_at + h]));
        let decay = safe_exp(decay_rate * softplus(proj[row + p.a_at + h] + dt_bias[h]));
        var part = 0.0;
        for (var m = 0u; m < HELD; m++) {
            let i = r + GROUPS * m;
            if (i < dk) { part += held[m] * mixed[dk + i]; }
        }
        let kv = column_sum(lid, c, part) * decay * k_scale;
        let delta = (mixed[2u * dk + c] - kv) * beta * k_scale;  // past dv: unused
        var out = 0.0;
        for (var m = 0u; m < HELD; m++) {
            let i = r + GROUPS * m;
            if (i < dk) {
                held[m] = decay * held[m] + mixed[dk + i] * delta;
                out += held[m] * mixed[i];
            }
        }
        let o = column_sum(lid, c, out) * q_scale;
        if (r == 0u && column) { y[t * p.nv * dv + h * dv + j0 + c] = o; }
    }

    if (column) {
        for (var m = 0u; m < HELD; m++) {
            let i = r + GROUPS * m;
            if (i < dk) { state[(h * dk + i) * dv + j0 + c] = held[m]; }
        }
    }
}
