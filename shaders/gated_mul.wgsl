// Gated MLP activation: y[r, i] = act(gate_up[r, i]) * gate_up[r, inter + i], the gate and up
// projections being one fused matrix whose outputs sit side by side in a row. act is SiLU
// (Llama, Qwen, Mistral) or, with the define GELU = true, GELU's tanh approximation (Gemma):
// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 gate_up (read, f32 [rows, 2 * inter]),
//           3 y (read_write, f32 [rows, inter]).
// Dispatch: (ceil(inter / 256), step.rows, 1) workgroups of 256 threads.
struct Params { inter: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> gate_up: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

const SQRT_2_OVER_PI: f32 = 0.7978845608028654;

fn silu(g: f32) -> f32 {
    return g / (1.0 + safe_exp(-g));
}

fn gelu_tanh(g: f32) -> f32 {
    // The tanh argument is clamped: Metal's fast-math tanh computes (e^2x - 1) / (e^2x + 1), which is
    // inf / inf = NaN once |x| is large (|g| = 100 gives x ≈ 3.6e4). tanh(±10) is ±1 to f32
    // precision, so the clamp changes nothing else: gelu(100) = 100, gelu(-100) = 0.
    let inner = clamp(SQRT_2_OVER_PI * (g + 0.044715 * g * g * g), -10.0, 10.0);
    return 0.5 * g * (1.0 + tanh(inner));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let i = gid.x;
    if (row >= step.rows || i >= p.inter) { return; }
    let g = gate_up[row * 2u * p.inter + i];
    let u = gate_up[row * 2u * p.inter + p.inter + i];
    var act = silu(g);
    if (GELU) { act = gelu_tanh(g); }  // a constant: the compiler keeps one branch
    y[row * p.inter + i] = act * u;
}
