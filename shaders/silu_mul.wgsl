// Gated MLP activation: y[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i]
// (gate and up projections are one fused matrix, so their outputs sit side by side in a row).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 gate_up (read, f32 [rows, 2 * inter]),
//           3 y (read_write, f32 [rows, inter]).
// Dispatch: (ceil(inter / 256), step.rows, 1) workgroups of 256 threads.
struct Params { inter: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> gate_up: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

// Metal compiles WGSL with fast math: there exp() of a very negative (or -inf) argument can come
// back NaN instead of 0, and a large one overflows to inf (inf * 0 = NaN further on). So every
// exp() in this kernel goes through safe_exp, whose argument is kept in [-80, 80]: below -80 the
// result is exactly 0 (exp(-80) ≈ 2e-35 is nothing next to the max term's 1), above 80 it is capped
// (exp(80) ≈ 5.5e34 stays finite).
fn safe_exp(x: f32) -> f32 {
    if (x < -80.0) { return 0.0; }
    return exp(min(x, 80.0));
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let i = gid.x;
    if (row >= step.rows || i >= p.inter) { return; }
    let g = gate_up[row * 2u * p.inter + i];
    let u = gate_up[row * 2u * p.inter + p.inter + i];
    y[row * p.inter + i] = g / (1.0 + safe_exp(-g)) * u;
}
