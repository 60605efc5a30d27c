// Gated MLP activation: y[r, i] = act(gate_up[r, i]) * gate_up[r, inter + i], the gate and up
// projections being one fused matrix whose outputs sit side by side in a row. act is SiLU
// (Llama, Qwen, Mistral) or, with the define GELU = true, GELU's tanh approximation (Gemma):
// shaders/activations.wgsl. The linear layer does this itself (GATED) wherever gate | up fits one
// weight binding; this kernel serves the rest.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 gate_up (read, f32 [rows, 2 * inter]),
//           3 y (read_write, f32 [rows, inter]).
// Dispatch: (ceil(inter / 256), step.rows, 1) workgroups of 256 threads.
struct Params { inter: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> gate_up: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let i = gid.x;
    if (row >= step.rows || i >= p.inter) { return; }
    let g = gate_up[row * 2u * p.inter + i];
    let u = gate_up[row * 2u * p.inter + p.inter + i];
    y[row * p.inter + i] = gate_act(g) * u;
}
