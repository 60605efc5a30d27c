// GELU in place, over a linear layer's outputs: x = 0.5 x (1 + erf(x / sqrt(2))) (BERT's "gelu",
// exact), or with the define TANH its tanh approximation (gate_act of shaders/activations.wgsl,
// with GELU = true: "gelu_new", "gelu_pytorch_tanh").
// WGSL has no erf: erfc_pos below is Numerical Recipes' erfc Chebyshev fit (fractional error
// below 1.2e-7 for z >= 0), and GELU is 0.5 x erfc(-x / sqrt(2)), which keeps its relative
// precision where x is very negative and 1 + erf(x / sqrt(2)) would cancel.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read_write, f32 [rows, width]).
// Dispatch: (ceil(width / 256), step.rows, 1) workgroups of 256 threads, one element each.
struct Params { width: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;

const SQRT_HALF: f32 = 0.7071067811865476;

// erfc(z) for z >= 0.
fn erfc_pos(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return t * safe_exp(-z * z + poly);
}

fn gelu_erf(v: f32) -> f32 {
    let u = -v * SQRT_HALF;  // GELU = 0.5 v erfc(u)
    var erfc_u = erfc_pos(abs(u));
    if (u < 0.0) { erfc_u = 2.0 - erfc_u; }
    return 0.5 * v * erfc_u;
}

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
