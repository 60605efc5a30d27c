// NeMo's HalfSnake (NanoCodec's activation) over time-major activations [length, channels]: the
// first snake_channels channels (channels / 2) take snake, the rest leaky ReLU (slope 0.01):
//   snake(x) = x + 1 / (alpha[c] + 1e-9) sin(alpha[c] x)^2
// With MEAN3 the input is first the mean of three tensors, (x + x2 + x3) / 3: HiFi-GAN's residual
// layer averages its three kernels' blocks, and here the activation that reads that mean computes it
// (nothing else reads it: CausalHiFiGANDecoder's next step is this activation).
// sin^2 has period pi: the argument is first brought within [-pi/2, pi/2] (pi in two parts, so the
// reduction is exact for |alpha x| < 2^15), as a GPU's sin() is only accurate near 0.
// Length: step.rows (frames) x per_row (samples a frame has at this stage of the decoder).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read, f32 [length, channels]),
//           3 x2, 4 x3 (read, the same shape; with MEAN3, else any buffer), 5 alpha (read, f32
//           [snake_channels]), 6 y (read_write, f32 [length, channels]).
// Defines: MEAN3 (bool).
// Dispatch: (ceil(length channels / 256), 1, 1) workgroups of 256 threads, one value each.
struct Params { channels: u32, snake_channels: u32, per_row: u32, pad0: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> x2: array<f32>;
@group(0) @binding(4) var<storage, read> x3: array<f32>;
@group(0) @binding(5) var<storage, read> alpha: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

const PI_HI: f32 = 3.140625;  // 8 significant bits: k PI_HI is exact for |k| < 2^16
const PI_LO: f32 = 9.67653589793e-4;  // pi - PI_HI
const INV_PI: f32 = 0.318309886183791;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= step.rows * p.per_row * p.channels) { return; }
    var v = x[i];
    if (MEAN3) { v = (v + x2[i] + x3[i]) / 3.0; }
    let c = i % p.channels;
    if (c < p.snake_channels) {
        let a = alpha[c];
        let turn = a * v;
        let k = round(turn * INV_PI);
        let s = sin((turn - k * PI_HI) - k * PI_LO);
        y[i] = v + (1.0 / (a + 1e-9)) * (s * s);
    } else {
        y[i] = select(v * 0.01, v, v >= 0.0);
    }
}
