// Merge cross_attention.wgsl's per-split partials into the attention output (as
// attention_combine.wgsl merges the decoder attention's, but over a fixed set of frames rather
// than the forward's keys):
//   M = max_s m_s;  y[r, h, d] = Σ_s acc_s[d] exp(m_s − M) / Σ_s sum_s exp(m_s − M).
// Empty splits carry m = -3e38 and sum = 0, so they weigh nothing.
// Bindings: 0 p (uniform Params), 1 partials (read, f32 [rows, n_heads, splits, head_dim + 2]),
//           2 y (read_write, f32 [rows, n_heads * head_dim]).
// Dispatch: (n_heads, rows, 1) workgroups of 64 threads; splits <= SPLITS_MAX.
struct Params { n_heads: u32, head_dim: u32, splits: u32, pad0: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

const THREADS: u32 = 64u;
const SPLITS_MAX: u32 = 256u;  // py_engine/models/audio_ops.py CROSS_SPLITS_MAX
var<workgroup> split_weight: array<f32, 256>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let row = wid.y;
    let hd = p.head_dim;
    let base = (row * p.n_heads + h) * p.splits * (hd + 2u);
    var peak = -3.0e38;
    for (var s = 0u; s < p.splits; s++) { peak = max(peak, partials[base + s * (hd + 2u) + hd]); }
    for (var s = lid; s < p.splits; s += THREADS) {
        split_weight[s] = safe_exp(partials[base + s * (hd + 2u) + hd] - peak);
    }
    workgroupBarrier();
    var total = 0.0;
    for (var s = 0u; s < p.splits; s++) { total += partials[base + s * (hd + 2u) + hd + 1u] * split_weight[s]; }
    for (var d = lid; d < hd; d += THREADS) {
        var value = 0.0;
        for (var s = 0u; s < p.splits; s++) { value += partials[base + s * (hd + 2u) + d] * split_weight[s]; }
        y[(row * p.n_heads + h) * hd + d] = value / total;
    }
}
