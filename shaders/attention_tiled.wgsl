// Causal multi-head attention of a prompt's many query rows over the KV cache, flash-attention
// style: a workgroup takes a block of (q head, row) slots that share one KV head, stages a tile of
// that head's keys and values in workgroup memory once for all of them, and runs an online
// softmax per slot over its split of the keys. attention.wgsl's splits, partials and semantics
// (attention_combine.wgsl merges them unchanged), but there every row read its keys from memory
// once per q head: a 4,000-token prompt's prefill was dominated by it.
// Slots (attention_grid.tiled_block): `heads` = min(group, SLOTS) q heads of one KV head (group =
// n_heads / n_kv_heads) x SLOTS / heads consecutive rows: 4 x 8 for a group of 4, 3 x 10 for 3
// (slots past the rows or the group idle). Slot s: head s % heads, row s / heads. A slot is LANES
// consecutive threads; lane l owns the head's vec4 chunks l, l + LANES, ... of q (in registers,
// scaled by p.scale) and of its output accumulator, and reads those chunks of each staged key and
// value. LANES is 8 (4 for head_dim <= 32: fewer chunks than lanes): 8 lanes of 128 dims
// hold 16 floats of q and 16 of output each.
// A tile is KEYS keys: K then V in `tile`, each key head_dim f32 padded to STRIDE vec4s (16 KiB:
// with SUBGROUPS 16 keys of head_dim 128, 8 of 256, 32 of 64 or less; without, 8, 4, 8 and 20 or
// more, the rest holding the lanes' partial dots). Per tile:
//   1. each thread loads its share of the tile's K and V (all loads, then the stores); barrier;
//   2. each lane's partial dots with the KEYS keys, 4 keys a vec4, summed over the slot's lanes:
//      a subgroupShuffleXor butterfly (same bits in every lane), or (no SUBGROUPS) through the
//      tile's third region after a barrier; with 8 lanes on 4-wide subgroups (WebGPU allows
//      them) the last step goes through the K tile's room (2 barriers more);
//   3. per slot, every lane alike: softcap, the slot's mask (key <= q, q - key < window, in the
//      split; skipped for a tile wholly inside it, most of them), the tile's max, exp weights
//      (masked keys weigh exactly 0), running max and sum, and the rescaled accumulator plus the
//      weighted value chunks; barrier (the next tile overwrites this one).
// So 2 barriers a tile with subgroups, 3 without. A block's tiles run from its first row's window
// start to its last row's causal limit within the split; rows' own limits are masked per slot.
// H200, Vulkan, 512 rows after 4,000 keys (12 splits), a layer's attention, vs attention.wgsl of
// one workgroup per (q head, row): 8B shape (32 / 8 heads of 128, K f32, V f16) 41.0 -> 4.4 ms
// (no subgroups 5.0; packed f16 K and V 25.3 -> 4.3; at depth 0 3.1 -> 0.5); SmolLM2 (9 / 3 of
// 64) 6.6 -> 1.0; head_dim 256 (8 / 4) 20.3 -> 2.6. Tried there on the 8B shape: 4 lanes a slot
// (5.1 ms; 6.2 without the unmasked path below), two slots a thread sharing each staged vector
// (7.7), loading the next tile into registers during this one (no change); on SmolLM2 (head_dim
// 64), 4 lanes a slot: its pp512 at depth 4,000 10,472 tok/s against 10,581 with 8; a thread
// taking all its KV head's q heads (up to 4) for one row, so each staged vector is read once for
// them, with the online softmax every 4 keys (16 lanes of 2 chunks on the 8B shape): slower, 7.0
// ms a layer on the 8B (pp512 at depth 4,000 1,322 tok/s against 1,674), SmolLM2 9,535 (2026-11-29).
// benchmarks/probes/attention_rate.py (this kernel alone, 512 rows after 4,000 keys): 4.32 ms on
// the 8B shape, 0.91 on SmolLM2. A variant with 2 or 4 rows a slot (each staged vector read once
// for them) was slower: 5.8 and 8.5 ms (its 1-row form, the same arithmetic in arrays indexed by
// row, 5.3: the driver's code for it is worse). Its ablations on the 8B: without the PV products
// 3.3 ms, without the tile loads 4.7, without exp() 5.4 of 5.3-5.5: QK^T and PV bound, not the
// loads or the softmax (2026-11-29).
// Query row r sits at position q = step.pos + r and attends to keys k <= q and, when window > 0,
// q - k < window; GQA: q head h reads KV head h / group. RING (a sliding layer,
// py_engine/runtime/kv_cache.py): the caches are a ring of `capacity` rows, position k at row
// k % capacity, holding positions [step.kv_len - capacity, step.kv_len); the splits cut that
// range of positions (attention.wgsl's kv_base / oldest / cache_row). rope_kv.wgsl ran first: q is
// rotated in qkv and this forward's keys and values are in the caches.
// Bindings (attention.wgsl's; one bind group and Params block serve both): 0 step (uniform Step),
//           1 p (uniform Params), 2 qkv (read, f32 [rows, q_stride]; q head h of row r from
//           r * q_stride + h * q_head_stride), 3 k_cache, 4 v_cache (read_write, K / V words:
//           [n_kv_heads, capacity, head_dim] elements, read through k_pair / v_pair of
//           shaders/kv/; never written here), 5 partials (read_write, f32 [rows, n_heads, splits,
//           head_dim + 2] from element partials_at: unnormalised Σ exp(s - m) v, then m, then
//           Σ exp(s - m); a split without keys for the row: zeros, -3e38, 0), 6 cos_sin,
//           7 q_norm, 8 k_norm (unused: attention.wgsl's ROPE_KV inputs).
// Defines: HEAD_VEC4S (attention_grid.tiled_defines: ceil(head_dim / 4), sizing the registers, the
//           lanes and the tile; head_dim <= 256, even). K_CACHE / V_CACHE. RING. SUBGROUPS
//           (kernels.py, from the device). ROPE_KV (false: ignored).
// Dispatch: attention_grid.tiled_grid: (n_kv_heads * head blocks, ceil(step.rows / block rows),
//           splits) workgroups of SLOTS * LANES threads (256; 128 for head_dim <= 32).
//           Workgroup storage: 16 KiB (`tile`).
// f32 arithmetic throughout. No select(): test_kernel_metal_safety keeps it out of attention.
struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, q_stride: u32,
    capacity: u32, window: u32, scale: f32, softcap: f32,
    split_len: u32, splits: u32, rotary_dim: u32, has_qk_norm: u32,
    interleaved: u32, eps: f32, norm_offset: f32, partials_at: u32,
    q_head_stride: u32, tiled_split_len: u32, tiled_splits: u32, pad2: u32,
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

const SLOTS: u32 = 32u;  // attention_grid.TILED_SLOTS
// Threads per slot: 8 (4 for head_dim <= 32, whose 8 or fewer chunks would leave lanes idle).
const LANES: u32 = 4u << u32(HEAD_VEC4S > 8u);
const THREADS: u32 = SLOTS * LANES;
const VEC4S: u32 = (HEAD_VEC4S + LANES - 1u) / LANES;  // a lane's chunks of a head vector
const STRIDE: u32 = VEC4S * LANES;  // a key's vec4s in the tile (zeros past the head's)
const TILE_VEC4S: u32 = 1024u;  // 16 KiB
//#if SUBGROUPS
// K and V, half the tile each (8 KiB: 16 keys of head_dim 128, 8 of 256), at most 32 keys.
const KEYS: u32 = min(32u, TILE_VEC4S / 2u / STRIDE) / 4u * 4u;
//#else
// K, V, and the lanes' partial dots (a vec4 of 4 keys per thread): 8 keys of head_dim 128.
const KEYS: u32 = min(32u, TILE_VEC4S / (2u * STRIDE + THREADS / 4u)) / 4u * 4u;
//#endif
const V_AT: u32 = KEYS * STRIDE;  // the tile's values: tile[V_AT + key * STRIDE + chunk]
const PARTS_AT: u32 = 2u * KEYS * STRIDE;  // no SUBGROUPS: tile[PARTS_AT + (key / 4) * THREADS + lid]
const LOADS: u32 = (KEYS * STRIDE + THREADS - 1u) / THREADS;  // K (and V) vec4s a thread stages per tile
var<workgroup> tile: array<vec4<f32>, TILE_VEC4S>;

// RING: where the kv head's rows end. A key's row counted on past it (kv_base + position, in main)
// wraps to the head's first rows.
var<private> ring_end: u32;

// The cache row of kv_base + a key position: itself, or (RING) less capacity past the wrap.
fn cache_row(at: u32) -> u32 {
    if (RING && at >= ring_end) { return at - p.capacity; }
    return at;
}

// Dimensions 4c .. 4c + 3 of the key (is_v false) or value at cache row `row` (zeros past
// head_dim, which is even: a chunk holds 2 or 4 dimensions).
fn kv_chunk(row: u32, c: u32, is_v: bool) -> vec4<f32> {
    let pair = row * p.head_dim / 2u + 2u * c;
    var lo: vec2<f32>;
    var hi = vec2<f32>(0.0);
    if (is_v) { lo = v_pair(pair); } else { lo = k_pair(pair); }
    if (4u * c + 2u < p.head_dim) {
        if (is_v) { hi = v_pair(pair + 1u); } else { hi = k_pair(pair + 1u); }
    }
    return vec4<f32>(lo, hi);
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32,
//#endif
) {
    let hd = p.head_dim;
    let group = p.n_heads / p.n_kv_heads;
    let heads = min(group, SLOTS);
    let block_rows = SLOTS / heads;
    let head_blocks = (group + heads - 1u) / heads;
    let kvh = wid.x / head_blocks;
    let slot = lid / LANES;
    let lane = lid % LANES;
    let in_group = (wid.x % head_blocks) * heads + slot % heads;
    let h = kvh * group + in_group;
    let row0 = wid.y * block_rows;
    let row = row0 + slot / heads;
    let live = slot < heads * block_rows && in_group < group && row < step.rows;

    // kv_base + a key position: its row (RING: before the wrap, cache_row). RING: the positions
    // the cache holds start at oldest; the rows of the lap before oldest's are kv_base's offset.
    var kv_base = kvh * p.capacity;
    var oldest = 0u;
    if (RING && step.kv_len > p.capacity) {
        oldest = step.kv_len - p.capacity;
        kv_base -= oldest - oldest % p.capacity;
    }
    ring_end = kvh * p.capacity + p.capacity;
    let split_first = oldest + wid.z * p.tiled_split_len;
    let split_end = split_first + p.tiled_split_len;
    // This slot's keys: [lo, hi) (none for an idle slot).
    let q_pos = step.pos + row;
    var lo = split_first;
    if (p.window > 0u && q_pos + 1u > p.window) { lo = max(lo, q_pos + 1u - p.window); }
    var hi = 0u;
    if (live) { hi = min(q_pos + 1u, split_end); }
    // The block's keys, [first, end): from its first row's window start to its last row's causal
    // limit. Uniform across the workgroup (its barriers sit in this loop).
    var first = split_first;
    let first_pos = step.pos + row0;
    if (p.window > 0u && first_pos + 1u > p.window) { first = max(first, first_pos + 1u - p.window); }
    let end = min(split_end, step.pos + min(row0 + block_rows, step.rows));

    // This lane's q chunks, scaled (zeros past head_dim and for an idle slot).
    var qv: array<vec4<f32>, VEC4S>;
    let q_at = row * p.q_stride + h * p.q_head_stride;
    for (var i = 0u; i < VEC4S; i++) {
        let d = 4u * (lane + LANES * i);
        var v = vec4<f32>(0.0);
        if (live && d < hd) {
            v.x = qkv[q_at + d];
            v.y = qkv[q_at + d + 1u];
            if (d + 2u < hd) {
                v.z = qkv[q_at + d + 2u];
                v.w = qkv[q_at + d + 3u];
            }
        }
        qv[i] = v * p.scale;
    }
    var acc: array<vec4<f32>, VEC4S>;
    for (var i = 0u; i < VEC4S; i++) { acc[i] = vec4<f32>(0.0); }
    var running_max = -3.0e38;
    var running_sum = 0.0;

    for (var start = first; start < end; start += KEYS) {
        // This thread's share of the tile's K and V: vec4 lid + THREADS * i of each (key idx /
        // STRIDE, chunk idx % STRIDE), all loads issued before the stores; zeros for chunks past
        // the head and keys at or past `end`, so every staged number is finite (a masked key's
        // value weighs 0, and 0 * finite is 0). Loading the next tile into registers during this
        // one's arithmetic gained nothing on an H200 (more registers a thread).
        var k_in: array<vec4<f32>, LOADS>;
        var v_in: array<vec4<f32>, LOADS>;
        for (var i = 0u; i < LOADS; i++) {
            let idx = lid + THREADS * i;
            let key = start + idx / STRIDE;
            let c = idx % STRIDE;
            k_in[i] = vec4<f32>(0.0);
            v_in[i] = vec4<f32>(0.0);
            if (idx < KEYS * STRIDE && key < end && 4u * c < hd) {
                let cache = cache_row(kv_base + key);
                k_in[i] = kv_chunk(cache, c, false);
                v_in[i] = kv_chunk(cache, c, true);
            }
        }
        for (var i = 0u; i < LOADS; i++) {
            let idx = lid + THREADS * i;
            if (idx < KEYS * STRIDE) {
                tile[idx] = k_in[i];
                tile[V_AT + idx] = v_in[i];
            }
        }
        workgroupBarrier();

        // Scores of keys start + 4g .. start + 4g + 3: s[g].
        var s: array<vec4<f32>, KEYS / 4u>;
        for (var g = 0u; g < KEYS / 4u; g++) {
            var dots = vec4<f32>(0.0);
            for (var i = 0u; i < VEC4S; i++) {
                let at = 4u * g * STRIDE + lane + LANES * i;
                dots += vec4<f32>(dot(qv[i], tile[at]), dot(qv[i], tile[at + STRIDE]),
                                  dot(qv[i], tile[at + 2u * STRIDE]), dot(qv[i], tile[at + 3u * STRIDE]));
            }
//#if SUBGROUPS
            // The slot's lanes are consecutive invocations of one subgroup (subgroups hold
            // consecutive invocations, as gemv.wgsl assumes) when subgroups have LANES or more;
            // WebGPU's have at least 4, so with 8 lanes and 4-wide subgroups the last step goes
            // through workgroup memory below. The butterfly adds the same two values in each pair
            // of lanes (f32 + commutes): every lane gets the same bits.
            for (var o = 1u; o < LANES; o <<= 1u) {
                if (o < subgroup_size) { dots += subgroupShuffleXor(dots, o); }  // uniform
            }
//#else
            tile[PARTS_AT + g * THREADS + lid] = dots;
//#endif
            s[g] = dots;
        }
//#if SUBGROUPS
        if (subgroup_size < LANES) {  // uniform: 8 lanes, 4-wide subgroups (never on an H200)
            // The two half-slots' sums, in the K tile's room once every lane is done with it
            // ((KEYS / 4) * SLOTS * 2 <= KEYS * STRIDE: STRIDE >= 16 with 8 lanes).
            workgroupBarrier();
            if (lane % subgroup_size == 0u) {
                for (var g = 0u; g < KEYS / 4u; g++) { tile[(g * SLOTS + slot) * 2u + lane / subgroup_size] = s[g]; }
            }
            workgroupBarrier();
            for (var g = 0u; g < KEYS / 4u; g++) {
                let at = (g * SLOTS + slot) * 2u;
                s[g] = tile[at] + tile[at + 1u];
            }
        }
//#else
        workgroupBarrier();
        for (var g = 0u; g < KEYS / 4u; g++) {
            let at = PARTS_AT + g * THREADS + slot * LANES;
            var total = tile[at];
            for (var l = 1u; l < LANES; l++) { total += tile[at + l]; }  // one order for every lane
            s[g] = total;
        }
//#endif

        // The online softmax over this tile's keys in [lo, hi): `whole` when every key is (all
        // tiles but a slot's first and last few), which skips the per-key mask.
        let whole = start >= lo && start + KEYS <= hi;
        var top = vec4<f32>(-3.0e38);
        for (var g = 0u; g < KEYS / 4u; g++) {
            if (p.softcap > 0.0) {
                // tanh argument clamped: fast-math tanh of a large |x| can be NaN on Metal;
                // tanh(±10) is ±1 to f32 precision, so the clamp changes nothing else.
                s[g] = tanh(clamp(s[g] / p.softcap, vec4<f32>(-10.0), vec4<f32>(10.0))) * p.softcap;
            }
            if (whole) {
                top = max(top, s[g]);
            } else {
                for (var k = 0u; k < 4u; k++) {
                    let key = start + 4u * g + k;
                    if (key >= lo && key < hi) { top[k] = max(top[k], s[g][k]); }
                }
            }
        }
        let new_max = max(running_max, max(max(top.x, top.y), max(top.z, top.w)));
        let correction = safe_exp(running_max - new_max);  // first keys: -3e38 - max → 0
        running_max = new_max;
        var tile_sum = 0.0;
        for (var g = 0u; g < KEYS / 4u; g++) {
            var w = vec4<f32>(0.0);
            if (whole) {
                w = vec4<f32>(safe_exp(s[g].x - new_max), safe_exp(s[g].y - new_max), safe_exp(s[g].z - new_max),
                              safe_exp(s[g].w - new_max));
            } else {
                for (var k = 0u; k < 4u; k++) {
                    let key = start + 4u * g + k;
                    if (key >= lo && key < hi) { w[k] = safe_exp(s[g][k] - new_max); }  // masked: exactly 0
                }
            }
            tile_sum += (w.x + w.y) + (w.z + w.w);
            s[g] = w;
        }
        running_sum = running_sum * correction + tile_sum;
        for (var i = 0u; i < VEC4S; i++) {
            var a = acc[i] * correction;
            for (var g = 0u; g < KEYS / 4u; g++) {
                let at = V_AT + 4u * g * STRIDE + lane + LANES * i;
                a += s[g].x * tile[at];
                a += s[g].y * tile[at + STRIDE];
                a += s[g].z * tile[at + 2u * STRIDE];
                a += s[g].w * tile[at + 3u * STRIDE];
            }
            acc[i] = a;
        }
        workgroupBarrier();  // the tile is read by all before the next one is stored
    }

    if (live) {
        let out = p.partials_at + ((row * p.n_heads + h) * p.tiled_splits + wid.z) * (hd + 2u);
        for (var i = 0u; i < VEC4S; i++) {
            let d = 4u * (lane + LANES * i);
            if (d < hd) {
                partials[out + d] = acc[i].x;
                partials[out + d + 1u] = acc[i].y;
                if (d + 2u < hd) {
                    partials[out + d + 2u] = acc[i].z;
                    partials[out + d + 3u] = acc[i].w;
                }
            }
        }
        if (lane == 0u) {
            partials[out + hd] = running_max;
            partials[out + hd + 1u] = running_sum;
        }
    }
}
