// Merge attention.wgsl's per-split partials into the attention output:
//   M = max_s m_s;  y[d] = Σ_s acc_s[d] · exp(m_s − M) / Σ_s sum_s · exp(m_s − M).
// Empty splits carry m = -3e38 and sum = 0, so they weigh nothing.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 partials (read, f32 [rows, n_heads,
//           splits, head_dim + 2]), 3 y (read_write, f32 [rows, n_heads * head_dim]).
// Dispatch: (n_heads, step.rows, 1) workgroups of 64 threads.
struct Params { n_heads: u32, head_dim: u32, splits: u32, pad0: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> partials: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let row = wid.y;
    let hd = p.head_dim;
    let base = (row * p.n_heads + h) * p.splits * (hd + 2u);
    var peak = -3.0e38;
    for (var s = 0u; s < p.splits; s++) { peak = max(peak, partials[base + s * (hd + 2u) + hd]); }
    var total = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        let part = base + s * (hd + 2u);
        total += partials[part + hd + 1u] * safe_exp(partials[part + hd] - peak);
    }
    for (var d = lid; d < hd; d += 64u) {
        var value = 0.0;
        for (var s = 0u; s < p.splits; s++) {
            let part = base + s * (hd + 2u);
            value += partials[part + d] * safe_exp(partials[part + hd] - peak);
        }
        y[row * p.n_heads * hd + h * hd + d] = value / total;
    }
}
