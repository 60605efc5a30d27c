// Merge attention.wgsl's per-split partials into the attention output:
//   M = max_s m_s;  y[d] = Σ_s acc_s[d] · exp(m_s − M) / Σ_s sum_s · exp(m_s − M).
// Empty splits carry m = -3e38 and sum = 0, so they weigh nothing. gemv.wgsl's COMBINE does the
// same for a decode token inside the O projection (and must stay bitwise equal to this).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 attn (read_write, f32: the output
//           [rows, n_heads * head_dim] from element 0, the partials [rows, n_heads, splits,
//           head_dim + 2] from element partials_at; one tensor, models/builder.py says why),
//           3 gate (read, f32: with gate_stride > 0, Qwen3.5's output gate: y[row, h, d] is
//           multiplied by sigmoid(gate[row * gate_stride + h * gate_head_stride + gate_offset + d])).
// Dispatch: (n_heads, step.rows, 1) workgroups of 64 threads.
struct Params {
    n_heads: u32, head_dim: u32, splits: u32, partials_at: u32,
    gate_stride: u32, gate_head_stride: u32, gate_offset: u32, pad0: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> attn: array<f32>;
@group(0) @binding(3) var<storage, read> gate: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let row = wid.y;
    let hd = p.head_dim;
    let base = p.partials_at + (row * p.n_heads + h) * p.splits * (hd + 2u);
    var peak = -3.0e38;
    for (var s = 0u; s < p.splits; s++) { peak = max(peak, attn[base + s * (hd + 2u) + hd]); }
    var total = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        let part = base + s * (hd + 2u);
        total += attn[part + hd + 1u] * safe_exp(attn[part + hd] - peak);
    }
    for (var d = lid; d < hd; d += 64u) {
        var value = 0.0;
        for (var s = 0u; s < p.splits; s++) {
            let part = base + s * (hd + 2u);
            value += attn[part + d] * safe_exp(attn[part + hd] - peak);
        }
        var y = value / total;
        if (p.gate_stride > 0u) {
            y *= 1.0 / (1.0 + safe_exp(-gate[row * p.gate_stride + h * p.gate_head_stride + p.gate_offset + d]));
        }
        attn[row * p.n_heads * hd + h * hd + d] = y;
    }
}
