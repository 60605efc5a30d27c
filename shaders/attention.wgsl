// Causal multi-head attention over the KV cache, flash-decoding style: the key positions are cut
// into splits of split_len keys, each workgroup runs an online softmax over its split (tiles of
// 64 keys) and writes a partial (max, sum, weighted V); attention_combine.wgsl merges the splits.
// Splitting gives a decode token heads × splits workgroups instead of just one per head.
// GQA: query head h reads kv head h / (n_heads / n_kv_heads). Query row r sits at absolute
// position q = step.pos + r and attends to keys k <= q and, when window > 0, q - k < window.
// RING (a sliding layer, py_engine/kv_cache.py): the caches are a ring of `capacity` rows, key
// position k at row k % capacity, holding positions [step.kv_len - capacity, step.kv_len) once
// this forward's keys are in; the splits cut that range of positions, not the rows, so the keys
// are visited in the order of a cache with a row for every position. Without it (a define, so a
// full layer's kernel is as before) position k is row k.
// ROPE_KV (a one-row forward: decode): rope_kv.wgsl's work is done here instead, saving its
// dispatch: the q head is normalised (has_qk_norm) and rotated in workgroup memory, and the new
// key and value (position q) come from qkv: the split holding q reads them from workgroup memory
// in place of the cache's row q, and the group's first q head writes them to the caches (nothing
// in this dispatch reads them there). Without it, rope_kv ran first: q rotated in qkv, k/v cached.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 qkv (read, f32 [rows, q_stride]; the
//           q heads come first, then k and v), 3 k_cache (read_write, K words: [n_kv_heads,
//           capacity, head_dim] elements; capacity: the context's positions, or RING's rows),
//           4 v_cache (read_write, V words, same shape); formats
//           from K_CACHE / V_CACHE, through k_pair / v_at / *_store_pair (shaders/kv/),
//           5 partials (read_write, f32 [rows, n_heads, splits, head_dim + 2]: weighted V, max, sum;
//           from element partials_at),
//           6 cos_sin (read, f32 [rows, rotary_dim / 2, 2]), 7 q_norm, 8 k_norm (read, f32
//           [head_dim]): read only with ROPE_KV (rope_kv.wgsl's, as there).
// Defines: SUBGROUPS (kernels.py, from the device): a tile's max score by subgroups. ROPE_KV. RING.
// Dispatch: (n_heads, step.rows, splits) workgroups of 128 threads, splits = ceil(capacity /
//           split_len); head_dim ≤ 256, even. Workgroup storage is 5.5 KiB (16 KiB are granted).
// A tile's memory reads are spread over twice as many threads as it has keys: LANES_PER_KEY
// threads share a key's score (half of its pairs each), then each thread sums half of the tile's
// keys for a value dimension, so each issues half as many batches of loads, one memory latency
// each. H100, decode, 2 runs of 256 tokens each: 64 threads (one per key) 241.5 tok/s on the
// 8B-shaped Q4_0 and 737-741 on SmolLM2; 128 threads 246.1 and 751-761; 256 threads 244.8 and
// 701-757.
struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, q_stride: u32,
    capacity: u32, window: u32, scale: f32, softcap: f32,
    split_len: u32, splits: u32, rotary_dim: u32, has_qk_norm: u32,
    interleaved: u32, eps: f32, norm_offset: f32, partials_at: u32,
    q_head_stride: u32, pad0: u32, pad1: u32, pad2: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<K>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<V>;
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;
@group(0) @binding(6) var<storage, read> cos_sin: array<f32>;
@group(0) @binding(7) var<storage, read> q_norm: array<f32>;
@group(0) @binding(8) var<storage, read> k_norm: array<f32>;

const THREADS: u32 = 128u;
const TILE: u32 = 64u;  // keys per tile
const LANES_PER_KEY: u32 = THREADS / TILE;  // threads per key's score, and parts of a tile's keys per value sum
const KEYS_PER_PART: u32 = TILE / LANES_PER_KEY;
const SLOTS: u32 = 4u;  // output dimensions per thread of the first TILE: lid + TILE * slot < head_dim
var<workgroup> q: array<f32, 256>;
var<workgroup> weights: array<f32, 64>;
var<workgroup> tile_max: array<f32, 64>;
var<workgroup> new_k: array<f32, 256>;  // ROPE_KV: the new key, normalised and rotated
var<workgroup> new_v: array<f32, 256>;  // ROPE_KV: the new value
// Per tile: the score parts [key][lane], then the value sums [slot][key part][dimension];
// ROPE_KV: a head's sum of squares per thread.
var<workgroup> part_sums: array<f32, SLOTS * THREADS>;

// ROPE_KV: the head vector staged (q or new_k, after a barrier) normalised by its norm weight when
// the model has q/k norms, then rotated (shaders/rope.wgsl), for forward row `row`: rope_kv.wgsl's
// operations in its order (128 threads there too), so a decode token's q and k equal a prefill's.
fn norm_and_rotate(lid: u32, row: u32, is_q: bool) {
    let hd = p.head_dim;
    if (p.has_qk_norm == 1u) {  // uniform: the barriers inside are reached by every thread or none
        var sum = 0.0;
        for (var d = lid; d < hd; d += THREADS) {
            var v = new_k[d];
            if (is_q) { v = q[d]; }
            sum += v * v;
        }
        part_sums[lid] = sum;
        workgroupBarrier();
        for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
            if (lid < stride) { part_sums[lid] += part_sums[lid + stride]; }
            workgroupBarrier();
        }
        let scale = inverseSqrt(part_sums[0] / f32(hd) + p.eps);
        workgroupBarrier();  // part_sums[0] read by all before the tiles reuse it
        for (var d = lid; d < hd; d += THREADS) {
            if (is_q) { q[d] = q[d] * scale * (q_norm[d] + p.norm_offset); }
            else { new_k[d] = new_k[d] * scale * (k_norm[d] + p.norm_offset); }
        }
        workgroupBarrier();
    }
    let half = p.rotary_dim / 2u;
    for (var i = lid; i < half; i += THREADS) {
        let ab = rope_pair(i, p.rotary_dim, p.interleaved == 1u);
        let cs = vec2<f32>(cos_sin[(row * half + i) * 2u], cos_sin[(row * half + i) * 2u + 1u]);
        if (is_q) {
            let turned = rope_turn(vec2<f32>(q[ab.x], q[ab.y]), cs);
            q[ab.x] = turned.x;
            q[ab.y] = turned.y;
        } else {
            let turned = rope_turn(vec2<f32>(new_k[ab.x], new_k[ab.y]), cs);
            new_k[ab.x] = turned.x;
            new_k[ab.y] = turned.y;
        }
    }
    workgroupBarrier();
}

// acc + q[i] * v.x + q[i + 1] * v.y + ..., added one by one in that order.
fn add_q_products(acc: f32, i: u32, v: vec4<f32>) -> f32 {
    return (((acc + q[i] * v.x) + q[i + 1u] * v.y) + q[i + 2u] * v.z) + q[i + 3u] * v.w;
}

// acc + weights[j] * v.x + weights[j + 1] * v.y + ..., in that order.
fn add_weighted(acc: f32, j: u32, v: vec4<f32>) -> f32 {
    return (((acc + weights[j] * v.x) + weights[j + 1u] * v.y) + weights[j + 2u] * v.z) + weights[j + 3u] * v.w;
}

// ROPE_KV: the cache row (kv_head * capacity + position, RING: cache_row's) of the new key, which
// is read from new_k / new_v instead (this dispatch writes it to the caches; nothing here reads it there).
var<private> new_row: u32;
// RING: where the kv head's rows end. A key's row counted on past it (kv_base + position, in main)
// wraps to the head's first rows.
var<private> ring_end: u32;

// The cache row of kv_base + a key position: itself, or (RING) less capacity past the wrap.
fn cache_row(at: u32) -> u32 {
    if (RING && at >= ring_end) { return at - p.capacity; }
    return at;
}

// Pair e of cache row `row`'s key. The cache is read for every row, before the branch that takes
// the new key instead (a stale row is read and dropped): with the load inside the branch, an f16
// cache's loads were not batched (H100, SmolLM2 decode: attention 0.83 ms a token with f16 V, 0.45
// this way; 629 -> 836 tok/s). No select(): test_kernel_metal_safety keeps it out of attention.
fn key_pair(row: u32, e: u32) -> vec2<f32> {
    let cached = k_pair(row * p.head_dim / 2u + e);
    if (ROPE_KV && row == new_row) { return vec2<f32>(new_k[2u * e], new_k[2u * e + 1u]); }
    return cached;
}

// Element d of cache row `row`'s value (read as key_pair reads).
fn value_at(row: u32, d: u32) -> f32 {
    let cached = v_at(row * p.head_dim + d);
    if (ROPE_KV && row == new_row) { return new_v[d]; }
    return cached;
}

// Element d of keys at .. at + 3 (kv_base + positions), each at most last_key.
fn v_column4(at: u32, last_key: u32, d: u32) -> vec4<f32> {
    return vec4<f32>(value_at(cache_row(at), d), value_at(cache_row(min(at + 1u, last_key)), d),
                     value_at(cache_row(min(at + 2u, last_key)), d), value_at(cache_row(min(at + 3u, last_key)), d));
}

@compute @workgroup_size(THREADS)
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
    // kv_base + a key position: its row (RING: before the wrap, cache_row). RING: the positions
    // the cache holds start at oldest; the rows of the lap before oldest's are kv_base's offset.
    var kv_base = kvh * p.capacity;
    var oldest = 0u;
    if (RING && step.kv_len > p.capacity) {
        oldest = step.kv_len - p.capacity;
        kv_base -= oldest - oldest % p.capacity;
    }
    ring_end = kvh * p.capacity + p.capacity;
    var first = oldest + wid.z * p.split_len;
    if (p.window > 0u && q_pos + 1u > p.window) { first = max(first, q_pos + 1u - p.window); }
    let split_end = oldest + (wid.z + 1u) * p.split_len;
    // ROPE_KV: the new key (q_pos) is not in the cache yet: the split holding it reads it from
    // workgroup memory where the cache would hold it (key_pair, value_at), with the same
    // arithmetic as the other keys, so a decode token's attention equals that of a forward of
    // many rows, where rope_kv cached it first. end is exclusive; first >= end: no key here.
    let holds_new = ROPE_KV && first <= q_pos && q_pos < split_end;
    let end = min(q_pos + 1u, split_end);
    new_row = cache_row(kv_base + q_pos);

    for (var d = lid; d < hd; d += THREADS) { q[d] = qkv[row * p.q_stride + h * p.q_head_stride + d]; }
    if (ROPE_KV && holds_new) {
        let k_at = row * p.q_stride + p.n_heads * p.q_head_stride + kvh * hd;
        let v_at = k_at + p.n_kv_heads * hd;
        for (var d = lid; d < hd; d += THREADS) { new_k[d] = qkv[k_at + d]; new_v[d] = qkv[v_at + d]; }
    }
    workgroupBarrier();
    if (ROPE_KV) {
        norm_and_rotate(lid, row, true);
        if (holds_new) {  // uniform across the workgroup
            norm_and_rotate(lid, row, false);
            // As the caches will hold them (f16 rounding), so the score and the output equal a
            // later forward's, which reads them from there.
            for (var e = lid; e < hd / 2u; e += THREADS) {
                let k2 = k_stored_pair(vec2<f32>(new_k[2u * e], new_k[2u * e + 1u]));
                let v2 = v_stored_pair(vec2<f32>(new_v[2u * e], new_v[2u * e + 1u]));
                new_k[2u * e] = k2.x;
                new_k[2u * e + 1u] = k2.y;
                new_v[2u * e] = v2.x;
                new_v[2u * e + 1u] = v2.y;
            }
            workgroupBarrier();
            if (h % (p.n_heads / p.n_kv_heads) == 0u) {  // the group's first q head stores them
                let first_pair = new_row * hd / 2u;
                for (var e = lid; e < hd / 2u; e += THREADS) {
                    k_store_pair(first_pair + e, vec2<f32>(new_k[2u * e], new_k[2u * e + 1u]));
                    v_store_pair(first_pair + e, vec2<f32>(new_v[2u * e], new_v[2u * e + 1u]));
                }
            }
        }
    }
    for (var d = lid; d < hd; d += THREADS) { q[d] = q[d] * p.scale; }
    workgroupBarrier();

    // Threads lid < TILE own output dims lid + TILE * slot; every thread keeps the running max and sum.
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    var running_max = -3.0e38;
    var running_sum = 0.0;
    // This thread's share of a key's score: pairs [pair_lo, pair_hi) of the key it works on.
    let pairs = hd / 2u;
    let lane = lid % LANES_PER_KEY;
    let per_lane = (pairs + LANES_PER_KEY - 1u) / LANES_PER_KEY;
    let pair_lo = min(pairs, lane * per_lane);
    let pair_hi = min(pairs, pair_lo + per_lane);
    let part = lid / TILE;  // the tile's keys KEYS_PER_PART * part .. that it sums values over
    for (var start = first; start < end; start += TILE) {
        let key = start + lid / LANES_PER_KEY;
        var dot = 0.0;
        if (key < end) {
            let row = cache_row(kv_base + key);
            // Eight pairs' loads issued before their adds: drivers do not unroll a loop of one load
            // then its use, which waits a memory latency per pair.
            var e = pair_lo;
            for (; e + 8u <= pair_hi; e += 8u) {
                let a = vec4<f32>(key_pair(row, e), key_pair(row, e + 1u));
                let b = vec4<f32>(key_pair(row, e + 2u), key_pair(row, e + 3u));
                let c = vec4<f32>(key_pair(row, e + 4u), key_pair(row, e + 5u));
                let g = vec4<f32>(key_pair(row, e + 6u), key_pair(row, e + 7u));
                dot = add_q_products(add_q_products(add_q_products(add_q_products(dot, 2u * e, a), 2u * e + 4u, b), 2u * e + 8u, c), 2u * e + 12u, g);
            }
            for (; e < pair_hi; e++) {  // a share not a multiple of 8 pairs
                let k2 = key_pair(row, e);
                dot += q[2u * e] * k2.x;
                dot += q[2u * e + 1u] * k2.y;
            }
        }
        part_sums[lid] = dot;
        workgroupBarrier();
        var score = -3.0e38;
        if (lid < TILE && start + lid < end) {
            let at = LANES_PER_KEY * lid;
            var total = part_sums[at];
            for (var i = 1u; i < LANES_PER_KEY; i++) { total += part_sums[at + i]; }
            // tanh argument clamped: fast-math tanh of a large |x| can be NaN on Metal (e^2x / e^2x);
            // tanh(±10) is ±1 to f32 precision, so the clamp changes nothing else.
            if (p.softcap > 0.0) { total = tanh(clamp(total / p.softcap, -10.0, 10.0)) * p.softcap; }
            score = total;
        }
//#if SUBGROUPS
        // The tile's max by subgroups, then across their maxima: one barrier instead of seven.
        // Subgroups hold consecutive invocations (as gemv.wgsl assumes); threads past the tile
        // carry -3e38.
        let subgroup_max = subgroupMax(score);
        if (subgroup_lane == 0u && lid < TILE) { tile_max[lid / subgroup_size] = subgroup_max; }
        workgroupBarrier();
        var top = tile_max[0];
        for (var k = 1u; k < (TILE + subgroup_size - 1u) / subgroup_size; k++) { top = max(top, tile_max[k]); }
        let new_max = max(running_max, top);
//#else
        if (lid < TILE) { tile_max[lid] = score; }
        workgroupBarrier();
        for (var stride = TILE / 2u; stride > 0u; stride >>= 1u) {
            if (lid < stride) { tile_max[lid] = max(tile_max[lid], tile_max[lid + stride]); }
            workgroupBarrier();
        }
        let new_max = max(running_max, tile_max[0]);
//#endif
        if (lid < TILE) {
            var w = 0.0;
            if (start + lid < end) { w = safe_exp(score - new_max); }  // masked keys weigh exactly 0
            weights[lid] = w;
        }
        workgroupBarrier();

        let correction = safe_exp(running_max - new_max);  // first tile: -3e38 - max → 0
        running_max = new_max;
        let count = min(TILE, end - start);
        var tile_sum = 0.0;
        for (var j = 0u; j < count; j++) { tile_sum += weights[j]; }
        running_sum = running_sum * correction + tile_sum;
        // Values: this thread's part of the tile's keys for dims lid % TILE + TILE * slot. Keys
        // past `count` read the last key (written, finite) and weigh exactly 0, adding +0.
        let last_key = kv_base + start + count - 1u;
        for (var slot = 0u; slot < SLOTS; slot++) {
            let d = lid % TILE + slot * TILE;
            if (d < hd) {
                var v_acc = 0.0;
                // Sixteen keys' loads before their adds (as the scores above).
                for (var j = KEYS_PER_PART * part; j < KEYS_PER_PART * (part + 1u); j += 16u) {
                    let at = kv_base + start + j;
                    let a = v_column4(min(at, last_key), last_key, d);
                    let b = v_column4(min(at + 4u, last_key), last_key, d);
                    let c = v_column4(min(at + 8u, last_key), last_key, d);
                    let g = v_column4(min(at + 12u, last_key), last_key, d);
                    v_acc = add_weighted(add_weighted(add_weighted(add_weighted(v_acc, j, a), j + 4u, b), j + 8u, c), j + 12u, g);
                }
                part_sums[slot * THREADS + lid] = v_acc;
            }
        }
        workgroupBarrier();
        if (lid < TILE) {
            for (var slot = 0u; slot < SLOTS; slot++) {
                let d = lid + slot * TILE;
                if (d < hd) {
                    let at = slot * THREADS + lid;
                    var v_sum = part_sums[at];
                    for (var i = 1u; i < LANES_PER_KEY; i++) { v_sum += part_sums[at + i * TILE]; }
                    acc[slot] = acc[slot] * correction + v_sum;
                }
            }
        }
        workgroupBarrier();
    }
    let out = p.partials_at + ((row * p.n_heads + h) * p.splits + wid.z) * (hd + 2u);
    for (var slot = 0u; slot < SLOTS; slot++) {
        let d = lid + slot * TILE;
        if (lid < TILE && d < hd) { partials[out + d] = acc[slot]; }
    }
    if (lid == 0u) {
        partials[out + hd] = running_max;
        partials[out + hd + 1u] = running_sum;
    }
}
