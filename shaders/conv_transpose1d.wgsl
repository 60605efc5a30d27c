// PyTorch's ConvTranspose1d over time-major activations, causal: NeMo's CausalConvTranspose1dNorm
// (NanoCodec's upsampling: kernel 2 stride, groups = out_channels, i.e. each output channel reads
// in_channels / out_channels inputs), its kernel - stride extra outputs trimmed on the right:
//   y[t, o] = bias[o] + Σ_{c < cin_g} Σ_{k < kernel, k ≡ t (mod stride)} x[(t - k) / stride, g cin_g + c] w[g cin_g + c, o % cout_g, k]
// over t - k >= 0, with g = o / cout_g (cin_g = in_channels / groups, cout_g = out_channels / groups).
// An output at t reads inputs up to t / stride only: streaming a window's new frames needs no right
// context. Output length: step.rows (frames) x per_row (output samples a frame has here); the input
// has per_row / stride a frame.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read, f32 [length / stride,
//           in_channels]), 3 w (read, f32 [in_channels, cout_g, kernel]: PyTorch's layout),
//           4 bias (read, f32 [out_channels]; with has_bias), 5 y (read_write, f32 [length, out_channels]).
// Dispatch: (ceil(length out_channels / 256), 1, 1) workgroups of 256 threads, one output each.
struct Params {
    in_channels: u32, out_channels: u32, groups: u32, kernel: u32,
    stride: u32, per_row: u32, has_bias: u32, pad0: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= step.rows * p.per_row * p.out_channels) { return; }
    let t = i / p.out_channels;
    let o = i % p.out_channels;
    let cin_g = p.in_channels / p.groups;
    let cout_g = p.out_channels / p.groups;
    let first_in = (o / cout_g) * cin_g;
    var acc = 0.0;
    for (var c = 0u; c < cin_g; c++) {
        let ci = first_in + c;
        let taps = (ci * cout_g + o % cout_g) * p.kernel;
        // Taps k = t % stride + j stride read input t / stride - j.
        for (var k = t % p.stride; k < p.kernel && k <= t; k += p.stride) {
            acc = fma(x[((t - k) / p.stride) * p.in_channels + ci], w[taps + k], acc);
        }
    }
    if (p.has_bias == 1u) { acc += bias[o]; }
    y[i] = acc;
}
