// Gated MLP activation: y[r, i] = act(gate_up[r, i]) * gate_up[r, inter + i], the gate and up
// projections being one fused matrix whose outputs sit side by side in a row. act is SiLU
// (Llama, Qwen, Mistral) or, with the define GELU = true, GELU's tanh approximation (Gemma):
// shaders/activations.wgsl. The linear layer does this itself (GATED) wherever gate | up fits one
// weight binding; this kernel serves the rest.
// PER_LAYER (define; Gemma 4's per-layer input): y[r, i] = act(gate_up[r, i]) * up[r * up_stride +
// up_offset + i] * scale, gate_up holding only the gate [rows, inter] and up the layer's slice of
// the per-layer embeddings (scale 2^-0.5: transformers' per_layer_input_scale, applied where the
// sum it scales is read).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 gate_up (read, f32 [rows, 2 * inter];
//           PER_LAYER [rows, inter]), 3 y (read_write, f32 [rows, inter]),
//           4 up (PER_LAYER: read, f32 [rows, up_stride]).
// Dispatch: (ceil(inter / 256), step.rows, 1) workgroups of 256 threads.
//#optional PER_LAYER
//#if PER_LAYER
struct Params { inter: u32, up_stride: u32, up_offset: u32, scale: f32 }
//#else
struct Params { inter: u32, pad0: u32, pad1: u32, pad2: u32 }
//#endif

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> gate_up: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
//#if PER_LAYER
@group(0) @binding(4) var<storage, read> up: array<f32>;
//#endif

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let i = gid.x;
    if (row >= step.rows || i >= p.inter) { return; }
//#if PER_LAYER
    y[row * p.inter + i] = gate_act(gate_up[row * p.inter + i]) * up[row * p.up_stride + p.up_offset + i] * p.scale;
//#else
    let g = gate_up[row * 2u * p.inter + i];
    let u = gate_up[row * 2u * p.inter + p.inter + i];
    y[row * p.inter + i] = gate_act(g) * u;
//#endif
}
