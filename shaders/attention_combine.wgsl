// Merge attention.wgsl's per-split partials into the attention output:
//   M = max_s m_s;  y[d] = Σ_s acc_s[d] · exp(m_s − M) / Σ_s sum_s · exp(m_s − M).
// Empty splits carry m = -3e38 and sum = 0, so they weigh nothing. gemv.wgsl's COMBINE does the
// same for a decode token inside the O projection (and must stay bitwise equal to this).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 attn (read_write, f32: the output
//           [rows, n_heads * head_dim] from element 0, the partials [rows, n_heads, splits,
//           head_dim + 2] from element partials_at; one tensor, models/builder.py says why),
//           3 gate (read, f32: with gate_stride > 0, Qwen3.5's output gate: y[row, h, d] is
//           multiplied by sigmoid(gate[row * gate_stride + h * gate_head_stride + gate_offset + d])).
//           splits / split_len: attention.wgsl's (a forward of at most FEW_ROWS rows, a define:
//           attention_grid.FEW_ROWS), else tiled_splits / tiled_split_len, attention_tiled.wgsl's.
// Dispatch: (n_heads, step.rows, 1) workgroups of 128 threads; splits <= SPLITS_MAX (256).
struct Params {
    n_heads: u32, head_dim: u32, splits: u32, partials_at: u32,
    gate_stride: u32, gate_head_stride: u32, gate_offset: u32, split_len: u32,
    tiled_splits: u32, tiled_split_len: u32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> attn: array<f32>;
@group(0) @binding(3) var<storage, read> gate: array<f32>;

// Each split's max, weight exp(m_s - M) and sum, read and computed once by one thread each, not
// by every thread in a loop of dependent loads (at 25 splits such loops cost 24 us a layer, an
// 8B's decode token 0.76 ms). SPLITS_MAX: at least attention_ops.attention_splits' most splits.
const SPLITS_MAX: u32 = 256u;
const THREADS: u32 = 128u;  // a thread per output dimension up to head_dim 128
var<workgroup> split_max: array<f32, SPLITS_MAX>;
var<workgroup> split_weight: array<f32, SPLITS_MAX>;
var<workgroup> split_sum: array<f32, SPLITS_MAX>;

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let row = wid.y;
    let hd = p.head_dim;
    // A forward of more than FEW_ROWS rows ran attention_tiled.wgsl, with splits of its own.
    var stored = p.splits;
    var split_len = p.split_len;
    if (step.rows > FEW_ROWS) {
        stored = p.tiled_splits;
        split_len = p.tiled_split_len;
    }
    let base = p.partials_at + (row * p.n_heads + h) * stored * (hd + 2u);
    // Splits past the forward's keys are empty (max -3e38, sum 0: weight exactly 0) and skipped,
    // as gemv.wgsl's COMBINE skips them. A ring's keys fill all of its splits once it is full.
    let splits = min(stored, (step.kv_len + split_len - 1u) / split_len);
    for (var s = lid; s < splits; s += THREADS) {
        split_max[s] = attn[base + s * (hd + 2u) + hd];
        split_sum[s] = attn[base + s * (hd + 2u) + hd + 1u];
    }
    workgroupBarrier();
    var peak = -3.0e38;
    for (var s = 0u; s < splits; s++) { peak = max(peak, split_max[s]); }
    for (var s = lid; s < splits; s += THREADS) { split_weight[s] = safe_exp(split_max[s] - peak); }
    workgroupBarrier();
    var total = 0.0;
    for (var s = 0u; s < splits; s++) { total += split_sum[s] * split_weight[s]; }
    for (var d = lid; d < hd; d += THREADS) {
        // Four splits' loads before their adds, which stay in split order.
        var value = 0.0;
        for (var s = 0u; s < splits; s += 4u) {
            let last = splits - 1u;
            let x = vec4<f32>(attn[base + s * (hd + 2u) + d], attn[base + min(s + 1u, last) * (hd + 2u) + d],
                              attn[base + min(s + 2u, last) * (hd + 2u) + d], attn[base + min(s + 3u, last) * (hd + 2u) + d]);
            value += x.x * split_weight[s];
            if (s + 1u < splits) { value += x.y * split_weight[s + 1u]; }
            if (s + 2u < splits) { value += x.z * split_weight[s + 2u]; }
            if (s + 3u < splits) { value += x.w * split_weight[s + 3u]; }
        }
        var y = value / total;
        if (p.gate_stride > 0u) {
            y *= 1.0 / (1.0 + safe_exp(-gate[row * p.gate_stride + h * p.gate_head_stride + p.gate_offset + d]));
        }
        attn[row * p.n_heads * hd + h * hd + d] = y;
    }
}
