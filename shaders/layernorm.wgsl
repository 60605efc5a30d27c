// LayerNorm with bias (BERT): y[r, :] = (v - mean(v)) * inverseSqrt(var(v) + eps) * w + b, where
//          v = x[r, :] (+ residual[r, :] when add_residual = 1) (+ shift[:] when add_shift = 1):
//          the encoder's embeddings add the word, position and token type rows here, then normalise.
// Mean and variance in two passes over the row (the variance of v - mean, as torch computes it: a
// single pass of sums and sums of squares loses digits where the mean is large next to the spread).
// NO_BIAS (optional define): no "+ b" (Moonshine's LayerNorms have none; b is not read).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read, f32 [rows, dim]),
//           3 residual (read, f32 [rows, dim]; read only with add_residual), 4 shift (read, f32
//           [dim]; read only with add_shift), 5 w (read, f32 [dim]), 6 b (read, f32 [dim]),
//           7 y (read_write, f32 [rows, dim]).
// Dispatch: (step.rows, 1, 1) workgroups of 256 threads, one row each.
//#optional NO_BIAS
struct Params { dim: u32, eps: f32, add_residual: u32, add_shift: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> residual: array<f32>;
@group(0) @binding(4) var<storage, read> shift: array<f32>;
@group(0) @binding(5) var<storage, read> w: array<f32>;
@group(0) @binding(6) var<storage, read> b: array<f32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;

var<workgroup> partial: array<f32, 256>;

// Element j of row `at`'s sum (x, then the residual, then the shift: torch's order of adds).
fn value(at: u32, j: u32) -> f32 {
    var v = x[at + j];
    if (p.add_shift == 1u) { v += shift[j]; }
    if (p.add_residual == 1u) { v += residual[at + j]; }
    return v;
}

// The sum of `mine` over the workgroup's 256 threads (every thread gets it).
fn workgroup_sum(lid: u32, mine: f32) -> f32 {
    partial[lid] = mine;
    workgroupBarrier();
    for (var stride = 128u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { partial[lid] += partial[lid + stride]; }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();  // everyone has read partial[0] before it is reused
    return total;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let at = wid.x * p.dim;
    var sum = 0.0;
    for (var j = lid; j < p.dim; j += 256u) { sum += value(at, j); }
    let mean = workgroup_sum(lid, sum) / f32(p.dim);
    var squares = 0.0;
    for (var j = lid; j < p.dim; j += 256u) {
        let d = value(at, j) - mean;
        squares += d * d;
    }
    let scale = inverseSqrt(workgroup_sum(lid, squares) / f32(p.dim) + p.eps);
    for (var j = lid; j < p.dim; j += 256u) {
//#if NO_BIAS
        y[at + j] = (value(at, j) - mean) * scale * w[j];
//#else
        y[at + j] = (value(at, j) - mean) * scale * w[j] + b[j];
//#endif
    }
}
