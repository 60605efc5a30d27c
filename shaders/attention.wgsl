// Causal multi-head attention of a few query rows (a decode token, or the drafts a forward
// verifies; py_engine/models/attention_grid.py FEW_ROWS) over the KV cache, flash-decoding style:
// the key positions are cut into splits of split_len keys, each workgroup runs an online softmax
// over its split (tiles of 64 keys) and writes a partial (max, sum, weighted V) per q head;
// attention_combine.wgsl (or the O projection's GEMV, COMBINE) merges the splits. A prompt's
// forward runs attention_tiled.wgsl instead, which writes the same partials; a device whose
// subgroups are at least 32 wide, attention_subgroups.wgsl (the same work without barriers between
// keys). The q heads' prologue (norm, RoPE, the new key) is attention_heads.wgsl's, shared by both.
// GQA: a workgroup takes GROUP_HEADS q heads that share one KV head and reads each key and value
// once for all of them: their q vectors sit in workgroup memory as one vec4 of 4 heads per
// dimension, so a key element costs one vec4 FMA for 4 heads. (One workgroup per q head read the
// cache once per q head: an 8B's decode attention at 4,500 keys took 118 us a layer on an H200.)
// Query head h reads KV head h / (n_heads / n_kv_heads). Query row r sits at absolute position
// q = step.pos + r and attends to keys k <= q and, when window > 0, q - k < window.
// RING (a sliding layer, py_engine/runtime/kv_cache.py): the caches are a ring of `capacity` rows, key
// position k at row k % capacity, holding positions [step.kv_len - capacity, step.kv_len) once
// this forward's keys are in; the splits cut that range of positions, not the rows, so the keys
// are visited in the order of a cache with a row for every position. Without it (a define, so a
// full layer's kernel is as before) position k is row k.
// ROPE_KV (a one-row forward: decode): rope_kv.wgsl's work is done here instead, saving its
// dispatch: the q heads are normalised (has_qk_norm) and rotated in workgroup memory, and the new
// key and value (position q) come from qkv, the key normalised and rotated, the value
// RMS-normalised without a weight where has_v_norm (Gemma 4): the split holding q reads them from
// workgroup memory in place of the cache's row q, and the KV head's first group writes them to the
// caches (nothing in this dispatch reads them there). A layer with owns_kv 0 (Gemma 4's shared-KV
// layers: qkv holds only q heads, the caches are an earlier layer's, which cached position q
// earlier in this forward) appends nothing: only its q heads are normalised and rotated, and
// row q is read from the cache like any other. Without it, rope_kv ran first: q rotated in qkv,
// k/v cached.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 qkv (read, f32 [rows, q_stride]; the
//           q heads come first, then k and v), 3 k_cache (read_write, K words: [n_kv_heads,
//           capacity, head_dim] elements; capacity: the context's positions, or RING's rows),
//           4 v_cache (read_write, V words, same shape); formats
//           from K_CACHE / V_CACHE, through k_pair / v_at / *_store_pair (shaders/kv/),
//           5 partials (read_write, f32 [rows, n_heads, splits, head_dim + 2]: weighted V, max, sum;
//           from element partials_at),
//           6 cos_sin (read, f32 [rows, rotary_dim / 2, 2]), 7 q_norm, 8 k_norm (read, f32
//           [head_dim]): read only with ROPE_KV (rope_kv.wgsl's, as there; k_norm only where
//           owns_kv).
// Defines: GROUP_HEADS (attention_grid.group_heads: q heads per workgroup, <= 8, and <= 4 when
//           head_dim > 128). SUBGROUPS (kernels.py, from the device): a key's two halves and the
//           tile's max by subgroup operations. ROPE_KV. RING. WIDE_HEADS (attention_grid.wide_heads:
//           head_dim > 256; below).
// Dispatch: attention_grid.attention_grid: (n_heads / GROUP_HEADS, step.rows, splits) workgroups of
//           256 threads, splits = ceil(capacity / split_len); head_dim <= 256 (WIDE_HEADS: <= 512), even.
// A tile's scores: four threads per key, each every fourth pair of it for every head of the group;
// its values: `parts` groups of threads each take a share of the tile's keys, a thread one output
// dimension, merged once at the end of the split (not per tile), adding up the tile's weights as
// they go (each part its own sums): a tile costs 3 barriers with subgroups. The kernel waits on
// memory, not arithmetic (an 8B's decode token reads 4,500 keys from few workgroups), so each
// thread issues 8 pairs' or 8 keys' loads before it uses them, and loops over few of them.
// Its speed and the variants measured against it: docs/attention-kernels.md.
// WIDE_HEADS (Gemma 4's full layers, 512 dimensions): q (one vec4 of at most 4 heads), the new key
// and value take 512 dimensions each, so the score quarters and the max have a quarter of the
// room: without subgroups a key's quarters are added in two steps through 128 vec4s and the max
// is a tree over the tile's 64 keys (not its 256 threads); and each thread owns two output
// dimensions, dim and dim + THREADS (parts is 1). Otherwise the same steps.
// Workgroup storage: exactly 16 KiB (WIDE_HEADS too: 8 KiB of q, 2 of part, 2 of weights, 4 of new k, v).
struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, q_stride: u32,
    capacity: u32, window: u32, scale: f32, softcap: f32,
    split_len: u32, splits: u32, rotary_dim: u32, has_qk_norm: u32,
    interleaved: u32, eps: f32, norm_offset: f32, partials_at: u32,
    q_head_stride: u32, tiled_split_len: u32, tiled_splits: u32, has_v_norm: u32,  // tiled_*: attention_tiled.wgsl's
    owns_kv: u32, pad0: u32, pad1: u32, pad2: u32,  // has_v_norm, owns_kv: ROPE_KV's (attention_heads.wgsl)
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

const THREADS: u32 = 256u;
const TILE: u32 = 64u;  // keys per tile
const LANES: u32 = THREADS / TILE;  // threads per key's score
const QV: u32 = (GROUP_HEADS + 3u) / 4u;  // vec4s of heads per dimension (1 or 2)
const HEAD_MAX: u32 = 256u << u32(WIDE_HEADS);  // the widest head (attention_grid.HEAD_DIM_MAX)
const_assert !WIDE_HEADS || QV == 1u;
// The group's q heads: qg[v * head_dim + d][c] is dimension d of head 4v + c (zeros past the
// group), scaled by p.scale. QV * head_dim <= HEAD_MAX (attention_grid.group_heads).
var<workgroup> qg: array<vec4<f32>, HEAD_MAX>;
// A tile's scores' quarters [v * THREADS + thread] (then the max's, by subgroup or tree; after the
// last tile, the parts' outputs); ROPE_KV: a head's sum of squares per thread (128 of them).
// WIDE_HEADS: 128 vec4s, no b half (QV is 1): part_b.
const PART_VEC4S: u32 = (2u * THREADS) >> (2u * u32(WIDE_HEADS));
var<workgroup> part: array<vec4<f32>, PART_VEC4S>;
var<workgroup> weights: array<vec4<f32>, 2 * TILE>;  // [v * TILE + key]: exp(score - max)
var<workgroup> new_k: array<f32, HEAD_MAX>;  // ROPE_KV: the new key, normalised and rotated
var<workgroup> new_v: array<f32, HEAD_MAX>;  // ROPE_KV: the new value

// part[THREADS + i], the b heads' half; WIDE_HEADS has none (QV is 1: b is never used).
fn part_b(i: u32) -> vec4<f32> {
    if (WIDE_HEADS) { return vec4<f32>(0.0); }
    return part[THREADS + i];
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

// Dimension d of the values of keys at .. at + 3 (kv_base + position, in main), a key past
// last_key (the tile's last) reading the last one's: it weighs exactly 0.
fn value_quad(at: u32, last_key: u32, d: u32) -> vec4<f32> {
    return vec4<f32>(value_at(cache_row(min(at, last_key)), d), value_at(cache_row(min(at + 1u, last_key)), d),
                     value_at(cache_row(min(at + 2u, last_key)), d), value_at(cache_row(min(at + 3u, last_key)), d));
}

// A key's pair e (k2) times every group head's q, added to s.
fn pair_dot(e: u32, k2: vec2<f32>, s: Heads) -> Heads {
    return heads_fma(q_heads(2u * e + 1u), k2.y, heads_fma(q_heads(2u * e), k2.x, s));
}

// Key shares of the value sums: `parts` groups of threads (the largest power of two, at most 8,
// with parts * head_dim <= THREADS) each take TILE / parts of a tile's keys; within a part,
// thread `dim` owns dimension dim (and WIDE_HEADS, where parts is 1, dim + THREADS).
fn value_parts(hd: u32) -> u32 {
    var parts = 1u;
    while (parts < 8u && 2u * parts * hd <= THREADS) { parts *= 2u; }
    return parts;
}

// WIDE_HEADS without subgroups: key lid / LANES's score from its lanes' quarters s (heads 0-3),
// added as (lane 0 + lane 2) + (lane 1 + lane 3) through 128 vec4s of part: on lane 0 only (the
// other lanes' return is not the score). Its last read of part[key] is lane 0's, which wide_max's
// first write there is too: no barrier at the end.
fn wide_score(s: vec4<f32>, lid: u32, lane: u32) -> vec4<f32> {
    let key = lid / LANES;
    if (lane >= 2u) { part[2u * key + lane - 2u] = s; }
    workgroupBarrier();
    var half = s;
    if (lane < 2u) { half = s + part[2u * key + lane]; }
    workgroupBarrier();
    if (lane == 1u) { part[key] = half; }
    workgroupBarrier();
    var total = half;
    if (lane == 0u) { total = half + part[key]; }
    return total;
}

// WIDE_HEADS without subgroups: the tile's max of lane 0's scores (one a key), by a tree over
// TILE keys in part (written next after the weights' barrier: none at the end).
fn wide_max(score: vec4<f32>, lid: u32, lane: u32) -> vec4<f32> {
    if (lane == 0u) { part[lid / LANES] = score; }
    workgroupBarrier();
    for (var stride = TILE / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { part[lid] = max(part[lid], part[lid + stride]); }
        workgroupBarrier();
    }
    return part[0];
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32,
//#endif
) {
    let first_head = wid.x * GROUP_HEADS;
    let row = wid.y;
    let hd = p.head_dim;
    let group = p.n_heads / p.n_kv_heads;
    let kvh = first_head / group;
    let q_pos = step.pos + row;
    if (!split_in_use(wid.z)) { return; }  // uniform: the workgroup's split
    let span = split_keys(kvh, q_pos, wid.z);
    let kv_base = span.kv_base;
    let first = span.first;
    let end = span.end;
    let holds_new = span.holds_new;
    load_heads(row, first_head, kvh, holds_new, lid);
    if (ROPE_KV) {
        if (holds_new) {  // uniform across the workgroup
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
            if (first_head % group == 0u) {  // the KV head's first group stores them
                let first_pair = new_row * hd / 2u;
                for (var e = lid; e < hd / 2u; e += THREADS) {
                    k_store_pair(first_pair + e, vec2<f32>(new_k[2u * e], new_k[2u * e + 1u]));
                    v_store_pair(first_pair + e, vec2<f32>(new_v[2u * e], new_v[2u * e + 1u]));
                }
            }
        }
    }
    for (var i = lid; i < QV * hd; i += THREADS) { qg[i] = qg[i] * p.scale; }
    workgroupBarrier();

    // Scores: this thread's share of key lid / LANES: its pairs lane, lane + LANES, ... (the key's
    // LANES threads read 32 contiguous bytes of an f32 cache at a time, not 32 bytes apart).
    let pairs = hd / 2u;
    let lane = lid % LANES;
    let my_pairs = (pairs + LANES - 1u - lane) / LANES;
    // Values: this thread's part (a share of the tile's keys) and dimension.
    let parts = value_parts(hd);
    let part_threads = THREADS / parts;
    let my_part = lid / part_threads;
    let dim = lid % part_threads;
    let keys_per_part = TILE / parts;
    let dim_active = dim < hd;
    let far_active = WIDE_HEADS && dim + THREADS < hd;  // WIDE_HEADS: this thread's second dimension
    // Per head: the running max (every thread alike), this part's running sum and its output
    // accumulator for dimension dim (far_acc: dim + THREADS).
    var running_max = heads_splat(-3.0e38);
    var running_sum = heads_splat(0.0);
    var acc = heads_splat(0.0);
    var far_acc = heads_splat(0.0);
    for (var start = first; start < end; start += TILE) {
        // This thread's first 8 values of the tile (its part's first keys, dimension dim), loaded
        // before the scores: their wait overlaps the keys' and the softmax's, not after them.
        let count = min(TILE, end - start);
        let last_key = kv_base + start + count - 1u;
        let j0 = my_part * keys_per_part;
        var lo = vec4<f32>(0.0);
        var hi = vec4<f32>(0.0);
        if (dim_active) {
            lo = value_quad(kv_base + start + j0, last_key, dim);
            hi = value_quad(kv_base + start + j0 + 4u, last_key, dim);
        }
        var far_lo = vec4<f32>(0.0);  // WIDE_HEADS: the same keys' dimension dim + THREADS
        var far_hi = vec4<f32>(0.0);
        if (far_active) {
            far_lo = value_quad(kv_base + start + j0, last_key, dim + THREADS);
            far_hi = value_quad(kv_base + start + j0 + 4u, last_key, dim + THREADS);
        }
        let key = start + lid / LANES;
        var s = heads_splat(0.0);
        if (key < end) {
            let key_row = cache_row(kv_base + key);
            // Eight pairs' loads issued before their FMAs: drivers do not unroll a loop of one
            // load then its use, which waits a memory latency per pair.
            var i = 0u;
            for (; i + 8u <= my_pairs; i += 8u) {
                let e = lane + LANES * i;
                let k0 = key_pair(key_row, e);
                let k1 = key_pair(key_row, e + LANES);
                let k2 = key_pair(key_row, e + 2u * LANES);
                let k3 = key_pair(key_row, e + 3u * LANES);
                let k4 = key_pair(key_row, e + 4u * LANES);
                let k5 = key_pair(key_row, e + 5u * LANES);
                let k6 = key_pair(key_row, e + 6u * LANES);
                let k7 = key_pair(key_row, e + 7u * LANES);
                s = pair_dot(e + 3u * LANES, k3, pair_dot(e + 2u * LANES, k2, pair_dot(e + LANES, k1, pair_dot(e, k0, s))));
                s = pair_dot(e + 7u * LANES, k7, pair_dot(e + 6u * LANES, k6, pair_dot(e + 5u * LANES, k5, pair_dot(e + 4u * LANES, k4, s))));
            }
            for (; i < my_pairs; i++) {  // a share not a multiple of 8 pairs
                let e = lane + LANES * i;
                s = pair_dot(e, key_pair(key_row, e), s);
            }
        }
        // The key's score: its quarters added as (lane 0 + lane 1) + (lane 2 + lane 3) on every lane.
//#if SUBGROUPS
        var other = Heads(subgroupShuffleXor(s.a, 1u), vec4<f32>(0.0));
        if (QV > 1u) { other.b = subgroupShuffleXor(s.b, 1u); }
        var halves = heads_add(s, other);
        if (lane % 2u == 1u) { halves = heads_add(other, s); }
        other = Heads(subgroupShuffleXor(halves.a, 2u), vec4<f32>(0.0));
        if (QV > 1u) { other.b = subgroupShuffleXor(halves.b, 2u); }
        var total = heads_add(halves, other);
        if (lane >= 2u) { total = heads_add(other, halves); }
//#else
        var total: Heads;
        if (WIDE_HEADS) {  // a const: uniform
            total = Heads(wide_score(s.a, lid, lane), vec4<f32>(0.0));
        } else {
            part[lid] = s.a;
            part[THREADS + lid] = s.b;
            workgroupBarrier();
            let at = lid - lane;
            total = heads_add(heads_add(Heads(part[at], part[THREADS + at]), Heads(part[at + 1u], part[THREADS + at + 1u])),
                              heads_add(Heads(part[at + 2u], part[THREADS + at + 2u]), Heads(part[at + 3u], part[THREADS + at + 3u])));
            workgroupBarrier();  // part is the max's tree next
        }
//#endif
        var score = heads_splat(-3.0e38);
        if (key < end) {
            score = total;
            // tanh argument clamped: fast-math tanh of a large |x| can be NaN on Metal (e^2x / e^2x);
            // tanh(±10) is ±1 to f32 precision, so the clamp changes nothing else.
            if (p.softcap > 0.0) {
                score.a = tanh(clamp(score.a / p.softcap, vec4<f32>(-10.0), vec4<f32>(10.0))) * p.softcap;
                score.b = tanh(clamp(score.b / p.softcap, vec4<f32>(-10.0), vec4<f32>(10.0))) * p.softcap;
            }
        }
//#if SUBGROUPS
        // The tile's max by subgroups, then across their maxima (subgroups hold consecutive
        // invocations, as gemv.wgsl assumes).
        let top = Heads(subgroupMax(score.a), subgroupMax(score.b));
        if (lid % subgroup_size == 0u) {
            part[lid / subgroup_size] = top.a;
            if (!WIDE_HEADS) { part[THREADS + lid / subgroup_size] = top.b; }
        }
        workgroupBarrier();
        var new_max = running_max;
        for (var k = 0u; k < THREADS / subgroup_size; k++) { new_max = heads_max(new_max, Heads(part[k], part_b(k))); }
//#else
        var new_max: Heads;
        if (WIDE_HEADS) {
            new_max = heads_max(running_max, Heads(wide_max(score.a, lid, lane), vec4<f32>(0.0)));
        } else {
            part[lid] = score.a;
            part[THREADS + lid] = score.b;
            workgroupBarrier();
            for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
                if (lid < stride) {
                    part[lid] = max(part[lid], part[lid + stride]);
                    part[THREADS + lid] = max(part[THREADS + lid], part[THREADS + lid + stride]);
                }
                workgroupBarrier();
            }
            new_max = heads_max(running_max, Heads(part[0], part_b(0u)));
        }
//#endif
        if (lane == 0u) {
            var w = heads_splat(0.0);  // masked keys weigh exactly 0
            if (key < end) { w = heads_exp(heads_add(score, Heads(-new_max.a, -new_max.b))); }
            weights[lid / LANES] = w.a;
            weights[TILE + lid / LANES] = w.b;
        }
        workgroupBarrier();

        // Values: this part's keys of the tile for dimension dim, in key order, eight keys at a
        // time, the next eight's loads issued before this eight's FMAs. Keys past the tile's last
        // read the last key (written, finite) and weigh exactly 0.
        var tile_sum = heads_splat(0.0);
        var tile = heads_splat(0.0);
        var far_tile = heads_splat(0.0);
        for (var j = j0; j < j0 + keys_per_part; j += 8u) {
            var next_lo = vec4<f32>(0.0);
            var next_hi = vec4<f32>(0.0);
            if (dim_active && j + 8u < j0 + keys_per_part) {
                next_lo = value_quad(kv_base + start + j + 8u, last_key, dim);
                next_hi = value_quad(kv_base + start + j + 12u, last_key, dim);
            }
            var next_far_lo = vec4<f32>(0.0);
            var next_far_hi = vec4<f32>(0.0);
            if (far_active && j + 8u < j0 + keys_per_part) {
                next_far_lo = value_quad(kv_base + start + j + 8u, last_key, dim + THREADS);
                next_far_hi = value_quad(kv_base + start + j + 12u, last_key, dim + THREADS);
            }
            for (var i = 0u; i < 4u; i++) {
                let w = Heads(weights[j + i], weights[TILE + j + i]);
                tile_sum = heads_add(tile_sum, w);
                tile = heads_fma(w, lo[i], tile);
                if (WIDE_HEADS) { far_tile = heads_fma(w, far_lo[i], far_tile); }
            }
            for (var i = 0u; i < 4u; i++) {
                let w = Heads(weights[j + 4u + i], weights[TILE + j + 4u + i]);
                tile_sum = heads_add(tile_sum, w);
                tile = heads_fma(w, hi[i], tile);
                if (WIDE_HEADS) { far_tile = heads_fma(w, far_hi[i], far_tile); }
            }
            lo = next_lo;
            hi = next_hi;
            far_lo = next_far_lo;
            far_hi = next_far_hi;
        }
        let correction = heads_exp(heads_add(running_max, Heads(-new_max.a, -new_max.b)));  // first tile: -3e38 - max → 0
        running_sum = heads_rescale(running_sum, correction, tile_sum);
        acc = heads_rescale(acc, correction, tile);
        if (WIDE_HEADS) { far_acc = heads_rescale(far_acc, correction, far_tile); }
        running_max = new_max;
        workgroupBarrier();  // weights and part are rewritten by the next tile
    }

    // The parts' sums and outputs added in part order, by part 0's threads (never WIDE_HEADS).
    if (!WIDE_HEADS && parts > 1u) {
        part[lid] = acc.a;
        part[THREADS + lid] = acc.b;
        if (dim == 0u) {
            weights[my_part] = running_sum.a;
            weights[TILE + my_part] = running_sum.b;
        }
        workgroupBarrier();
        if (my_part == 0u) {
            running_sum = Heads(weights[0], weights[TILE]);
            acc = Heads(part[dim], part[THREADS + dim]);
            for (var k = 1u; k < parts; k++) {
                running_sum = heads_add(running_sum, Heads(weights[k], weights[TILE + k]));
                acc = heads_add(acc, Heads(part[k * part_threads + dim], part[THREADS + k * part_threads + dim]));
            }
        }
    }
    if (my_part == 0u) {
        for (var c = 0u; c < GROUP_HEADS; c++) {
            let out = p.partials_at + ((row * p.n_heads + first_head + c) * p.splits + wid.z) * (hd + 2u);
            if (dim_active) { partials[out + dim] = heads_at(acc, c); }
            if (far_active) { partials[out + dim + THREADS] = heads_at(far_acc, c); }
            if (dim == 0u) {
                partials[out + hd] = heads_at(running_max, c);
                partials[out + hd + 1u] = heads_at(running_sum, c);
            }
        }
    }
}
