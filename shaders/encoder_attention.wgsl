// Bidirectional (non-causal) multi-head attention of an encoder, straight from the fused q|k|v
// projection: no KV cache (RoPE, where the model has it, turned q and k in place before: rope_kv.wgsl
// IN_PLACE). Several sequences may be packed into one forward's rows: row r
// attends to the rows [spans[2r], spans[2r + 1]) of its own sequence, every one of them (before it
// and after it), and to nothing else.
//   y[r, h, :] = softmax_k(scale * q[r, h] . k[k, h]) . v[k, h]   over k in row r's span
// One workgroup per (head, row). The keys go in chunks of up to CHUNK: every score of a chunk is
// kept in workgroup memory, so its softmax takes one maximum and one sum (a constant number of
// barriers, which lavapipe and SwiftShader pay dearly for), and chunks merge as an online softmax
// (one chunk holds a BERT's whole 512-token text). The threads own output dimensions lid, lid + 64,
// ... (head_dim <= 256, a multiple of 4: q and k are read as vec4s).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 qkv (read, f32 [rows, q_stride] as vec4s:
//           head h's q at h * head_dim, its k at k_offset + g * head_dim, its v at v_offset + g *
//           head_dim where g = h / kv_group, the q heads per k/v head (1 without grouped-query
//           attention); every offset and q_stride a multiple of 4),
//           3 spans (read, u32 [rows, 2]: each row's sequence, first row and end row),
//           4 y (read_write, f32 [rows, n_heads * head_dim]).
// Defines: SUBGROUPS (kernels.py, from the device): the chunk's maximum and sum by subgroups.
// Dispatch: (n_heads, step.rows, 1) workgroups of 64 threads. Workgroup storage 3.5 KiB.
struct Params {
    n_heads: u32, head_dim: u32, q_stride: u32, k_offset: u32,
    v_offset: u32, scale: f32, kv_group: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> spans: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const THREADS: u32 = 64u;
const CHUNK: u32 = 512u;  // keys whose scores are held at once
const SLOTS: u32 = 4u;  // output dimensions per thread: lid + THREADS * slot < head_dim <= 256
var<workgroup> q: array<vec4<f32>, 64>;  // the scaled query, 4 dimensions a word
var<workgroup> scores: array<f32, 512>;  // the chunk's scores, then its weights
var<workgroup> partial: array<f32, 64>;

// The maximum (is_max) or the sum of `mine` over the workgroup, in every thread.
fn reduce(lid: u32, mine: f32, is_max: bool, subgroup_size: u32, subgroup_lane: u32) -> f32 {
//#if SUBGROUPS
    // Per subgroup, then across the subgroups' results: two barriers instead of seven. Subgroups
    // hold consecutive invocations (as gemv.wgsl assumes).
    var part = subgroupAdd(mine);
    if (is_max) { part = subgroupMax(mine); }
    if (subgroup_lane == 0u) { partial[lid / subgroup_size] = part; }
    workgroupBarrier();
    var total = partial[0];
    for (var k = 1u; k < THREADS / subgroup_size; k++) {
        if (is_max) { total = max(total, partial[k]); } else { total += partial[k]; }
    }
//#else
    partial[lid] = mine;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            if (is_max) { partial[lid] = max(partial[lid], partial[lid + stride]); }
            else { partial[lid] += partial[lid + stride]; }
        }
        workgroupBarrier();
    }
    let total = partial[0];
//#endif
    workgroupBarrier();  // every thread has read partial before it is reused
    return total;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32, @builtin(subgroup_invocation_id) subgroup_lane: u32,
//#endif
) {
//#if SUBGROUPS
//#else
    let subgroup_size = 1u;
    let subgroup_lane = 0u;
//#endif
    let h = wid.x;
    let row = wid.y;
    let hd = p.head_dim;
    let kv_at = h / p.kv_group * hd;  // this head's k and v within their parts of a row
    let first = spans[2u * row];
    let end = spans[2u * row + 1u];
    for (var d = lid; d < hd / 4u; d += THREADS) { q[d] = qkv[(row * p.q_stride + h * hd) / 4u + d] * p.scale; }
    workgroupBarrier();

    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    var running_max = -3.0e38;
    var running_sum = 0.0;
    for (var start = first; start < end; start += CHUNK) {
        let count = min(CHUNK, end - start);
        var mine = -3.0e38;
        for (var j = lid; j < count; j += THREADS) {
            let k_at = ((start + j) * p.q_stride + p.k_offset + kv_at) / 4u;
            var score = 0.0;
            for (var d = 0u; d < hd / 4u; d++) { score += dot(q[d], qkv[k_at + d]); }
            scores[j] = score;
            mine = max(mine, score);
        }
        let new_max = max(running_max, reduce(lid, mine, true, subgroup_size, subgroup_lane));
        var sum = 0.0;
        for (var j = lid; j < count; j += THREADS) {
            let w = safe_exp(scores[j] - new_max);
            scores[j] = w;
            sum += w;
        }
        let correction = safe_exp(running_max - new_max);  // first chunk: -3e38 - max -> 0
        running_sum = running_sum * correction + reduce(lid, sum, false, subgroup_size, subgroup_lane);
        running_max = new_max;
        // reduce's barriers also put every weight in place before they are read here.
        for (var slot = 0u; slot < SLOTS; slot++) {
            let d = lid + slot * THREADS;
            if (d < hd) {
                let v_at = (start * p.q_stride + p.v_offset + kv_at + d) / 4u;
                var v_acc = 0.0;
                for (var j = 0u; j < count; j++) { v_acc += scores[j] * qkv[v_at + j * p.q_stride / 4u][d % 4u]; }
                acc[slot] = acc[slot] * correction + v_acc;
            }
        }
        workgroupBarrier();  // the chunk's weights are read before the next chunk's scores
    }
    let out = (row * p.n_heads + h) * hd;
    for (var slot = 0u; slot < SLOTS; slot++) {
        let d = lid + slot * THREADS;
        if (d < hd) { y[out + d] = acc[slot] / running_sum; }
    }
}
