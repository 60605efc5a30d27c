// Causal multi-head attention over the KV cache, flash-decoding style: the key positions are cut
// into splits of split_len keys, each workgroup runs an online softmax over its split (tiles of
// 64 keys) and writes a partial (max, sum, weighted V); attention_combine.wgsl merges the splits.
// Splitting gives a decode token heads × splits workgroups instead of just one per head.
// GQA: query head h reads kv head h / (n_heads / n_kv_heads). Query row r sits at absolute
// position q = step.pos + r and attends to keys k <= q and, when window > 0, q - k < window.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 qkv (read, f32 [rows, q_stride]; the
//           rotated q heads come first), 3 k_cache (read, K words: [n_kv_heads, capacity,
//           head_dim] elements), 4 v_cache (read, V words, same shape); formats from K_CACHE /
//           V_CACHE, read through k_pair / v_at (shaders/kv/),
//           5 partials (read_write, f32 [rows, n_heads, splits, head_dim + 2]: weighted V, max, sum).
// Defines: SUBGROUPS (kernels.py, from the device): a tile's max score by subgroups.
// Dispatch: (n_heads, step.rows, splits) workgroups of 64 threads, splits = ceil(capacity /
//           split_len); head_dim ≤ 256. Workgroup storage is 1.5 KiB (16 KiB are granted).
struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, q_stride: u32,
    capacity: u32, window: u32, scale: f32, softcap: f32,
    split_len: u32, splits: u32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> k_cache: array<K>;
@group(0) @binding(4) var<storage, read> v_cache: array<V>;
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;

const TILE: u32 = 64u;
var<workgroup> q: array<f32, 256>;
var<workgroup> weights: array<f32, 64>;
var<workgroup> tile_max: array<f32, 64>;

// acc + q[i] * v.x + q[i + 1] * v.y + ..., added one by one in that order.
fn add_q_products(acc: f32, i: u32, v: vec4<f32>) -> f32 {
    return (((acc + q[i] * v.x) + q[i + 1u] * v.y) + q[i + 2u] * v.z) + q[i + 3u] * v.w;
}

// acc + weights[j] * v.x + weights[j + 1] * v.y + ..., in that order.
fn add_weighted(acc: f32, j: u32, v: vec4<f32>) -> f32 {
    return (((acc + weights[j] * v.x) + weights[j + 1u] * v.y) + weights[j + 2u] * v.z) + weights[j + 3u] * v.w;
}

// Element d of keys at .. at + 3 (cache rows), each at most last_key.
fn v_column4(at: u32, last_key: u32, d: u32) -> vec4<f32> {
    let hd = p.head_dim;
    return vec4<f32>(v_at(at * hd + d), v_at(min(at + 1u, last_key) * hd + d),
                     v_at(min(at + 2u, last_key) * hd + d), v_at(min(at + 3u, last_key) * hd + d));
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32, @builtin(subgroup_invocation_id) subgroup_lane: u32,
//#endif
) {
    let h = wid.x;
    let row = wid.y;
    let hd = p.head_dim;
    let kvh = h / (p.n_heads / p.n_kv_heads);
    let q_pos = step.pos + row;
    var first = wid.z * p.split_len;
    if (p.window > 0u && q_pos + 1u > p.window) { first = max(first, q_pos + 1u - p.window); }
    let last = min(q_pos, (wid.z + 1u) * p.split_len - 1u);  // inclusive; first > last: empty split

    for (var d = lid; d < hd; d += TILE) { q[d] = qkv[row * p.q_stride + h * hd + d] * p.scale; }
    workgroupBarrier();

    // Each thread owns output dims lid, lid + 64, lid + 128, lid + 192.
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    var running_max = -3.0e38;
    var running_sum = 0.0;
    let kv_base = kvh * p.capacity;
    for (var start = first; start <= last; start += TILE) {
        let key = start + lid;
        var score = -3.0e38;
        if (key <= last) {
            let first_pair = (kv_base + key) * hd / 2u;
            var dot = 0.0;
            // Eight pairs' loads issued before their adds: a loop of one load then its use waits
            // a memory latency per pair (drivers do not unroll it), and that wait was the kernel
            // (H100, 8B decode shape: 41 us a dispatch before, 19 with the batched loads here and below).
            let pairs = hd / 2u;
            var e = 0u;
            for (; e + 8u <= pairs; e += 8u) {
                let a = vec4<f32>(k_pair(first_pair + e), k_pair(first_pair + e + 1u));
                let b = vec4<f32>(k_pair(first_pair + e + 2u), k_pair(first_pair + e + 3u));
                let c = vec4<f32>(k_pair(first_pair + e + 4u), k_pair(first_pair + e + 5u));
                let g = vec4<f32>(k_pair(first_pair + e + 6u), k_pair(first_pair + e + 7u));
                dot = add_q_products(add_q_products(add_q_products(add_q_products(dot, 2u * e, a), 2u * e + 4u, b), 2u * e + 8u, c), 2u * e + 12u, g);
            }
            for (; e < pairs; e++) {  // head_dim not a multiple of 8
                let k2 = k_pair(first_pair + e);
                dot += q[2u * e] * k2.x;
                dot += q[2u * e + 1u] * k2.y;
            }
            // tanh argument clamped: fast-math tanh of a large |x| can be NaN on Metal (e^2x / e^2x);
            // tanh(±10) is ±1 to f32 precision, so the clamp changes nothing else.
            if (p.softcap > 0.0) { dot = tanh(clamp(dot / p.softcap, -10.0, 10.0)) * p.softcap; }
            score = dot;
        }
//#if SUBGROUPS
        // The tile's max by subgroups, then across their maxima: one barrier instead of seven.
        // Subgroups hold consecutive invocations (as gemv.wgsl assumes).
        let subgroup_max = subgroupMax(score);
        if (subgroup_lane == 0u) { tile_max[lid / subgroup_size] = subgroup_max; }
        workgroupBarrier();
        var top = tile_max[0];
        for (var k = 1u; k < (TILE + subgroup_size - 1u) / subgroup_size; k++) { top = max(top, tile_max[k]); }
        let new_max = max(running_max, top);
//#else
        tile_max[lid] = score;
        workgroupBarrier();
        for (var stride = 32u; stride > 0u; stride >>= 1u) {
            if (lid < stride) { tile_max[lid] = max(tile_max[lid], tile_max[lid + stride]); }
            workgroupBarrier();
        }
        let new_max = max(running_max, tile_max[0]);
//#endif
        var w = 0.0;
        if (key <= last) { w = safe_exp(score - new_max); }  // masked lanes weigh exactly 0
        weights[lid] = w;
        workgroupBarrier();

        let correction = safe_exp(running_max - new_max);  // first tile: -3e38 - max → 0
        running_max = new_max;
        let count = min(TILE, last + 1u - start);
        var tile_sum = 0.0;
        for (var j = 0u; j < count; j++) { tile_sum += weights[j]; }
        running_sum = running_sum * correction + tile_sum;
        for (var slot = 0u; slot < 4u; slot++) {
            let d = lid + slot * TILE;
            if (d < hd) {
                var v_acc = 0.0;
                // Sixteen keys' loads before their adds (as the scores above); keys past `count`
                // read the last key (written, finite) and weigh exactly 0, adding +0 to the sum.
                let last_key = kv_base + start + count - 1u;
                for (var j = 0u; j < count; j += 16u) {
                    let at = kv_base + start + j;
                    let a = v_column4(at, last_key, d);
                    let b = v_column4(at + 4u, last_key, d);
                    let c = v_column4(at + 8u, last_key, d);
                    let g = v_column4(at + 12u, last_key, d);
                    v_acc = add_weighted(add_weighted(add_weighted(add_weighted(v_acc, j, a), j + 4u, b), j + 8u, c), j + 12u, g);
                }
                acc[slot] = acc[slot] * correction + v_acc;
            }
        }
        workgroupBarrier();
    }
    let out = ((row * p.n_heads + h) * p.splits + wid.z) * (hd + 2u);
    for (var slot = 0u; slot < 4u; slot++) {
        let d = lid + slot * TILE;
        if (d < hd) { partials[out + d] = acc[slot]; }
    }
    if (lid == 0u) {
        partials[out + hd] = running_max;
        partials[out + hd + 1u] = running_sum;
    }
}
