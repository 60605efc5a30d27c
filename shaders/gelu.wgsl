// GELU in place, over a linear layer's outputs: x = 0.5 x (1 + erf(x / sqrt(2))) (BERT's "gelu",
// exact), or with the define TANH its tanh approximation (gate_act of shaders/activations.wgsl,
// with GELU = true: "gelu_new", "gelu_pytorch_tanh").
// The exact form is gelu_erf of shaders/activations.wgsl (kernels.py appends it: this kernel calls
// gate_act).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read_write, f32 [rows, width]).
// Dispatch: (ceil(width / 256), step.rows, 1) workgroups of 256 threads, one element each.
struct Params { width: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.y >= step.rows || gid.x >= p.width) { return; }
    let i = gid.y * p.width + gid.x;
    if (TANH) {  // a constant: the compiler keeps one branch
        x[i] = gate_act(x[i]);
    } else {
        x[i] = gelu_erf(x[i]);
    }
}
