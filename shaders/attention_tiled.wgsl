// Causal multi-head attention of a prompt's many query rows over the KV cache, flash-attention
// style: a workgroup takes a block of (q head, two rows) slots that share one KV head, stages a
// tile of that head's keys and values in workgroup memory once for all of them, and runs an
// online softmax per (slot, row) over its split of the keys. attention.wgsl's splits, partials
// and semantics (attention_combine.wgsl merges them unchanged), but there every row read its keys
// from memory once per q head: a 4,000-token prompt's prefill was dominated by it.
// Slots (attention_grid.tiled_block): `heads` = min(group, SLOTS) q heads of one KV head (group =
// n_heads / n_kv_heads) x SLOTS / heads row pairs: 4 x 16 pairs for a group of 4, 3 x 21 for 3
// (slots past the rows or the group idle). Slot s: head s % heads, rows 2 (s / heads) and the next
// (a and b below) of the block. A slot is LANES consecutive threads; lane l owns the head's vec4
// chunks l, l + LANES, ... of both rows' q (in registers, scaled by p.scale) and of their output
// accumulators, and reads those chunks of each staged key and value once for both rows. LANES is
// 4 (8 for head_dim > 128, 16 for > 256): 4 lanes of 128 dims hold 2 x 32 floats of q and 2 x 32
// of output each.
// A tile is KEYS keys: K then V in `tile`, each key head_dim f32 padded to STRIDE vec4s (16 KiB:
// with SUBGROUPS 16 keys of head_dim 128, 8 of 256, 4 of 512, 32 of 64 or less; without, 4 keys,
// the rest holding the lanes' partial dots of both rows; past head_dim 256 those go over the K
// tile once every lane has read it, PARTS_OVER_K). Per tile:
//   1. each thread loads its share of the tile's K and V (all loads, then the stores); barrier;
//   2. each lane's partial dots of both rows with the KEYS keys, 4 keys a vec4, summed over the
//      slot's lanes: a subgroupShuffleXor butterfly (same bits in every lane), or (no SUBGROUPS)
//      through the tile's third region after a barrier; with more lanes than a subgroup has (8 or 16
//      on 4-wide subgroups, which WebGPU allows; 16 on 8-wide) the last step goes through the K
//      tile's room (2 barriers more);
//   3. per row, every lane alike: softcap, the row's mask (key <= q, q - key < window, in the
//      split; skipped for a tile wholly inside it, most of them), the tile's max, exp weights
//      (masked keys weigh exactly 0), running max and sum, and the rescaled accumulator plus the
//      weighted value chunks; barrier (the next tile overwrites this one).
// So 2 barriers a tile with subgroups, 3 without. A block's tiles run from its first row's window
// start to its last row's causal limit within the split; rows' own limits are masked per row.
// The two rows are written out as named pairs (qa / qb, acc_a / acc_b, ...), never as arrays
// indexed by row: NVIDIA's compile of those put them in local memory. The layouts, tile sizes and
// arithmetic measured against this one: docs/attention-kernels.md.
// Query row r sits at position q = step.pos + r and attends to keys k <= q and, when window > 0,
// q - k < window; GQA: q head h reads KV head h / group. PICTURE_SPANS (a Gemma 3 picture's tokens
// see each other both ways, as transformers' token_type_ids mask: causal OR the same picture, AND the
// window on a sliding layer): keys k < max(q + 1, picture_ends[q]) instead; a picture lies within one
// forward (engine.py), so its later keys are in the caches already. RING (a sliding layer,
// py_engine/runtime/kv_cache.py): the caches are a ring of `capacity` rows, position k at row
// k % capacity, holding positions [step.kv_len - capacity, step.kv_len); the splits cut that
// range of positions (shaders/kv_ring.wgsl's kv_base / oldest / cache_row). rope_kv.wgsl ran first: q is
// rotated in qkv and this forward's keys and values are in the caches.
// Bindings (attention.wgsl's; one bind group and Params block serve both): 0 step (uniform Step),
//           1 p (uniform Params), 2 qkv (read, f32 [rows, q_stride]; q head h of row r from
//           r * q_stride + h * q_head_stride), 3 k_cache, 4 v_cache (read_write, K / V words:
//           [n_kv_heads, capacity, head_dim] elements, read through k_pair / v_pair of
//           shaders/kv/; never written here), 5 partials (read_write, f32 [rows, n_heads, splits,
//           head_dim + 2] from element partials_at: unnormalised Σ exp(s - m) v, then m, then
//           Σ exp(s - m); a split without keys for the row: zeros, -3e38, 0), 6 cos_sin,
//           7 q_norm, 8 k_norm (unused: attention.wgsl's ROPE_KV inputs); with PICTURE_SPANS, 9
//           picture_ends (read, u32 [context]: a picture token's position -> its picture's end
//           position, exclusive; 0 for text), which attention.wgsl does not bind (its own bind group):
//           8 storage bindings with it, WebGPU's default maxStorageBuffersPerShaderStage.
// Defines: HEAD_VEC4S (attention_grid.tiled_defines: ceil(head_dim / 4), sizing the registers, the
//           lanes and the tile; head_dim <= 512, even). K_CACHE / V_CACHE. RING. SUBGROUPS
//           (kernels.py, from the device). ROPE_KV (false: ignored). F16_MATH and ATT_MATH (f16
//           with it, else f32; attention_grid.tiled_defines: precision "fast" with an f16 V cache).
//           PICTURE_SPANS (optional: GraphOptions.picture_spans).
// Dispatch: attention_grid.tiled_grid: (n_kv_heads * head blocks, ceil(step.rows / block rows),
//           splits) workgroups of THREADS = SLOTS * LANES = 256 threads (attention_grid.tiled_block:
//           the same LANES and SLOTS). Workgroup storage: 16 KiB (`tile`).
// f32 arithmetic, but with F16_MATH: K and V staged in f16 (twice the keys a tile: 32 of
// head_dim 128; 16 of 64, where 32 ran slower), q held in f16, each lane's dot products summed in
// f16 over its 32 (64) dimensions before the f32 sum of the lanes, and a tile's weighted values
// summed in f16 before the f32 rescale and add; the softmax stays f32. What llama.cpp's CUDA
// flash attention does at its default precision (f16 sums of QK^T and of PV). H200, 512 rows after
// 4,000 keys: the 8B shape 3.28 -> 2.55 ms a layer, SmolLM2 0.69 -> 0.56, head_dim 256 1.27 ->
// 0.87; its outputs within ~3e-3 of f32 on N(0, 1) inputs; the KL divergence it adds on the
// catalog models is in benchmarks/README.md (fidelity.py --prefill-rows). No select():
// test_kernel_metal_safety keeps it out of attention.
struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, q_stride: u32,
    capacity: u32, window: u32, scale: f32, softcap: f32,
    split_len: u32, splits: u32, rotary_dim: u32, has_qk_norm: u32,
    interleaved: u32, eps: f32, norm_offset: f32, partials_at: u32,
    q_head_stride: u32, tiled_split_len: u32, tiled_splits: u32, has_v_norm: u32,
    owns_kv: u32, pad0: u32, pad1: u32, pad2: u32,  // has_v_norm, owns_kv: attention.wgsl's ROPE_KV's (unused)
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
//#optional PICTURE_SPANS
//#if PICTURE_SPANS
@group(0) @binding(9) var<storage, read> picture_ends: array<u32>;
//#endif

const THREADS: u32 = 256u;  // attention_grid.TILED_THREADS
// Threads per slot (attention_grid.tiled_lanes): 4, 8 for head_dim > 128 (whose 64 floats of q and
// of output a lane at 4 lanes ran slower), 16 for > 256 (the same 32 floats a lane as 8 at 256).
const LANES: u32 = 4u << (u32(HEAD_VEC4S > 32u) + u32(HEAD_VEC4S > 64u));
const SLOTS: u32 = THREADS / LANES;
const VEC4S: u32 = (HEAD_VEC4S + LANES - 1u) / LANES;  // a lane's chunks of a head vector
const STRIDE: u32 = VEC4S * LANES;  // a key's vec4s in the tile (zeros past the head's)
const TILE_VEC4S: u32 = 1024u << u32(F16_MATH);  // 16 KiB
//#if SUBGROUPS
// K and V, half the tile each (8 KiB: 16 keys of head_dim 128 or 256, 32 of 64), at most 32 keys;
// F16_MATH: 32 of head_dim 128, 16 of 256 or of 64 (faster than 32 there).
const KEYS_MOST: u32 = 32u >> u32(F16_MATH && HEAD_VEC4S < 32u);
const KEYS: u32 = min(KEYS_MOST, TILE_VEC4S / 2u / STRIDE) / 4u * 4u;
const K_ROOM: u32 = KEYS * STRIDE;
//#else
// K, V, and the lanes' partial dots (a vec4 of 4 keys per thread and row): 4 keys of head_dim 128.
const KEYS_APART: u32 = min(32u, TILE_VEC4S / (2u * STRIDE + THREADS / 2u)) / 4u * 4u;
// Where not even 4 keys fit so (f32 past head_dim 256), the dots go over the K tile once every
// lane has read it (a barrier more a tile), V past them: K_ROOM, 4 keys of 512 in the whole tile.
const PARTS_OVER_K: bool = KEYS_APART == 0u;
const KEYS_OVER_K: u32 = min(32u, TILE_VEC4S / (STRIDE + max(STRIDE, THREADS / 2u))) / 4u * 4u;
const KEYS: u32 = max(KEYS_APART, u32(PARTS_OVER_K) * KEYS_OVER_K);
const K_ROOM: u32 = max(KEYS * STRIDE, u32(PARTS_OVER_K) * (KEYS / 2u) * THREADS);
// tile[PARTS_AT + ((key / 4) * 2 + row) * THREADS + lid], row 0 for a, 1 for b.
const PARTS_AT: u32 = 2u * KEYS * STRIDE * u32(!PARTS_OVER_K);
const_assert KEYS >= 4u && K_ROOM + KEYS * STRIDE <= TILE_VEC4S && PARTS_AT + (KEYS / 2u) * THREADS <= TILE_VEC4S;
//#endif
// The tile's values: tile[V_AT + key * STRIDE + chunk], past the keys' (K_ROOM: KEYS * STRIDE but
// with PARTS_OVER_K).
const V_AT: u32 = K_ROOM;
const LOADS: u32 = (KEYS * STRIDE + THREADS - 1u) / THREADS;  // K (and V) vec4s a thread stages per tile
// More lanes than a subgroup has (at most LANES / 4 pieces of a slot: subgroups are 4 or more
// wide): the pieces' sums of both rows in the K tile's room.
const_assert LANES < 8u || (KEYS / 4u) * SLOTS * 2u * (LANES / 4u) <= KEYS * STRIDE;
var<workgroup> tile: array<vec4<ATT_MATH>, TILE_VEC4S>;

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

// The end (exclusive) of the keys of the query at position q: q + 1, or (PICTURE_SPANS) its
// picture's end. Never less as q grows (pictures are runs of positions), so a block's last row's
// is the block's.
fn key_end(q: u32) -> u32 {
//#if PICTURE_SPANS
    return max(q + 1u, picture_ends[q]);
//#else
    return q + 1u;
//#endif
}

// The per-row steps below are functions of values (vectors and scalars, never a row's arrays or a
// pointer to them), which the drivers inline, so both rows' state stays in registers.

// Dimensions d .. d + 3 of the q row at `at` (zeros past head_dim, or for an idle row), scaled.
fn q_chunk(at: u32, d: u32, live: bool) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    if (live && d < p.head_dim) {
        v.x = qkv[at + d];
        v.y = qkv[at + d + 1u];
        if (d + 2u < p.head_dim) {
            v.z = qkv[at + d + 2u];
            v.w = qkv[at + d + 3u];
        }
    }
    return v * p.scale;
}

// Softcap: tanh's argument clamped (fast-math tanh of a large |x| can be NaN on Metal; tanh(±10)
// is ±1 to f32 precision, so the clamp changes nothing else).
fn capped(s: vec4<f32>) -> vec4<f32> {
    if (p.softcap > 0.0) { return tanh(clamp(s / p.softcap, vec4<f32>(-10.0), vec4<f32>(10.0))) * p.softcap; }
    return s;
}

// Dimensions d .. d + 3 of a partial's weighted values (from element `out`; past head_dim: none).
fn write_chunk(out: u32, d: u32, v: vec4<f32>) {
    if (d < p.head_dim) {
        partials[out + d] = v.x;
        partials[out + d + 1u] = v.y;
        if (d + 2u < p.head_dim) {
            partials[out + d + 2u] = v.z;
            partials[out + d + 3u] = v.w;
        }
    }
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
    let pairs = SLOTS / heads;  // row pairs a block
    let head_blocks = (group + heads - 1u) / heads;
    let kvh = wid.x / head_blocks;
    let slot = lid / LANES;
    let lane = lid % LANES;
    let in_group = (wid.x % head_blocks) * heads + slot % heads;
    let h = kvh * group + in_group;
    let row0 = wid.y * 2u * pairs;
    let row_a = row0 + 2u * (slot / heads);
    let row_b = row_a + 1u;
    let slot_live = slot < heads * pairs && in_group < group;
    let live_a = slot_live && row_a < step.rows;
    let live_b = slot_live && row_b < step.rows;

    // kv_base + a key position: its row; the positions the cache holds start at oldest
    // (shaders/kv_ring.wgsl).
    let ring = ring_start(kvh);
    let kv_base = ring.x;
    let oldest = ring.y;
    let split_first = oldest + wid.z * p.tiled_split_len;
    let split_end = split_first + p.tiled_split_len;
    // Each row's keys: [lo, hi) (none for an idle one).
    let qa_pos = step.pos + row_a;
    let qb_pos = qa_pos + 1u;
    var lo_a = split_first;
    var lo_b = split_first;
    if (p.window > 0u && qa_pos + 1u > p.window) { lo_a = max(lo_a, qa_pos + 1u - p.window); }
    if (p.window > 0u && qb_pos + 1u > p.window) { lo_b = max(lo_b, qb_pos + 1u - p.window); }
    var hi_a = 0u;
    var hi_b = 0u;
    if (live_a) { hi_a = min(key_end(qa_pos), split_end); }
    if (live_b) { hi_b = min(key_end(qb_pos), split_end); }
    // The block's keys, [first, end): from its first row's window start to its last row's key
    // end. Uniform across the workgroup (its barriers sit in this loop).
    var first = split_first;
    let first_pos = step.pos + row0;
    if (p.window > 0u && first_pos + 1u > p.window) { first = max(first, first_pos + 1u - p.window); }
    let end = min(split_end, key_end(step.pos + min(row0 + 2u * pairs, step.rows) - 1u));

    // This lane's q chunks of both rows, scaled (zeros past head_dim and for an idle row).
    var qa: array<vec4<ATT_MATH>, VEC4S>;
    var qb: array<vec4<ATT_MATH>, VEC4S>;
    let qa_at = row_a * p.q_stride + h * p.q_head_stride;
    let qb_at = qa_at + p.q_stride;
    for (var i = 0u; i < VEC4S; i++) {
        let d = 4u * (lane + LANES * i);
        qa[i] = vec4<ATT_MATH>(q_chunk(qa_at, d, live_a));
        qb[i] = vec4<ATT_MATH>(q_chunk(qb_at, d, live_b));
    }
    var acc_a: array<vec4<f32>, VEC4S>;
    var acc_b: array<vec4<f32>, VEC4S>;
    for (var i = 0u; i < VEC4S; i++) {
        acc_a[i] = vec4<f32>(0.0);
        acc_b[i] = vec4<f32>(0.0);
    }
    var max_a = -3.0e38;
    var max_b = -3.0e38;
    var sum_a = 0.0;
    var sum_b = 0.0;

    for (var start = first; start < end; start += KEYS) {
        // This thread's share of the tile's K and V: vec4 lid + THREADS * i of each (key idx /
        // STRIDE, chunk idx % STRIDE), all loads issued before the stores; zeros for chunks past
        // the head and keys at or past `end`, so every staged number is finite (a masked key's
        // value weighs 0, and 0 * finite is 0).
        var k_in: array<vec4<ATT_MATH>, LOADS>;
        var v_in: array<vec4<ATT_MATH>, LOADS>;
        for (var i = 0u; i < LOADS; i++) {
            let idx = lid + THREADS * i;
            let key = start + idx / STRIDE;
            let c = idx % STRIDE;
            k_in[i] = vec4<ATT_MATH>(0.0);
            v_in[i] = vec4<ATT_MATH>(0.0);
            if (idx < KEYS * STRIDE && key < end && 4u * c < hd) {
                let cache = cache_row(kv_base + key);
                k_in[i] = vec4<ATT_MATH>(kv_chunk(cache, c, false));
                v_in[i] = vec4<ATT_MATH>(kv_chunk(cache, c, true));
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

        // Scores of keys start + 4g .. start + 4g + 3: sa[g] (row a), sb[g] (row b); each staged
        // key chunk is read once for both.
        var sa: array<vec4<f32>, KEYS / 4u>;
        var sb: array<vec4<f32>, KEYS / 4u>;
        for (var g = 0u; g < KEYS / 4u; g++) {
            // A lane's dots in ATT_MATH (F16_MATH: its 32 or 64 dimensions' sums in f16), then f32.
            var ha = vec4<ATT_MATH>(0.0);
            var hb = vec4<ATT_MATH>(0.0);
            for (var i = 0u; i < VEC4S; i++) {
                let at = 4u * g * STRIDE + lane + LANES * i;
                let k0 = tile[at];
                let k1 = tile[at + STRIDE];
                let k2 = tile[at + 2u * STRIDE];
                let k3 = tile[at + 3u * STRIDE];
                ha += vec4<ATT_MATH>(dot(qa[i], k0), dot(qa[i], k1), dot(qa[i], k2), dot(qa[i], k3));
                hb += vec4<ATT_MATH>(dot(qb[i], k0), dot(qb[i], k1), dot(qb[i], k2), dot(qb[i], k3));
            }
            var da = vec4<f32>(ha);
            var db = vec4<f32>(hb);
//#if SUBGROUPS
            // The slot's lanes are consecutive invocations of one subgroup (subgroups hold
            // consecutive invocations, as gemv.wgsl assumes) when subgroups have LANES or more;
            // WebGPU's have at least 4, so with 8 lanes and 4-wide subgroups the last step goes
            // through workgroup memory below. The butterfly adds the same two values in each pair
            // of lanes (f32 + commutes): every lane gets the same bits.
            for (var o = 1u; o < LANES; o <<= 1u) {
                if (o < subgroup_size) {  // uniform
                    da += subgroupShuffleXor(da, o);
                    db += subgroupShuffleXor(db, o);
                }
            }
//#else
            if (!PARTS_OVER_K) {
                tile[PARTS_AT + 2u * g * THREADS + lid] = ha;
                tile[PARTS_AT + (2u * g + 1u) * THREADS + lid] = hb;
            }
//#endif
            sa[g] = da;
            sb[g] = db;
        }
//#if SUBGROUPS
        if (subgroup_size < LANES) {  // uniform: 8 or 16 lanes on narrower subgroups (never on an H200)
            // The slot's pieces' sums (a subgroup's lanes each), in the K tile's room once every
            // lane is done with it, added in piece order.
            let pieces = LANES / subgroup_size;
            workgroupBarrier();
            if (lane % subgroup_size == 0u) {
                for (var g = 0u; g < KEYS / 4u; g++) {
                    let at = ((g * SLOTS + slot) * pieces + lane / subgroup_size) * 2u;
                    tile[at] = vec4<ATT_MATH>(sa[g]);  // F16_MATH: rounded to f16 (never on an H200)
                    tile[at + 1u] = vec4<ATT_MATH>(sb[g]);
                }
            }
            workgroupBarrier();
            for (var g = 0u; g < KEYS / 4u; g++) {
                let at = (g * SLOTS + slot) * pieces * 2u;
                sa[g] = vec4<f32>(tile[at]) + vec4<f32>(tile[at + 2u]);
                sb[g] = vec4<f32>(tile[at + 1u]) + vec4<f32>(tile[at + 3u]);
                for (var k = 2u; k < pieces; k++) {
                    sa[g] += vec4<f32>(tile[at + 2u * k]);
                    sb[g] += vec4<f32>(tile[at + 2u * k + 1u]);
                }
            }
        }
//#else
        if (PARTS_OVER_K) {  // a const: uniform
            workgroupBarrier();  // every lane done with the K tile
            for (var g = 0u; g < KEYS / 4u; g++) {
                tile[2u * g * THREADS + lid] = vec4<ATT_MATH>(sa[g]);  // exactly ha, hb
                tile[(2u * g + 1u) * THREADS + lid] = vec4<ATT_MATH>(sb[g]);
            }
        }
        workgroupBarrier();
        for (var g = 0u; g < KEYS / 4u; g++) {
            let at = PARTS_AT + 2u * g * THREADS + slot * LANES;
            var total_a = vec4<f32>(tile[at]);
            var total_b = vec4<f32>(tile[at + THREADS]);
            for (var l = 1u; l < LANES; l++) {  // one order for every lane
                total_a += vec4<f32>(tile[at + l]);
                total_b += vec4<f32>(tile[at + THREADS + l]);
            }
            sa[g] = total_a;
            sb[g] = total_b;
        }
//#endif

        // The online softmax of each row over this tile's keys in its [lo, hi): `whole` when every
        // key is (all tiles but a row's first and last few), which skips the per-key mask.
        let whole_a = start >= lo_a && start + KEYS <= hi_a;
        let whole_b = start >= lo_b && start + KEYS <= hi_b;
        var top_a = vec4<f32>(-3.0e38);
        var top_b = vec4<f32>(-3.0e38);
        for (var g = 0u; g < KEYS / 4u; g++) {
            sa[g] = capped(sa[g]);
            sb[g] = capped(sb[g]);
            if (whole_a) {
                top_a = max(top_a, sa[g]);
            } else {
                top_a = masked_top(top_a, sa[g], start + 4u * g, lo_a, hi_a);
            }
            if (whole_b) {
                top_b = max(top_b, sb[g]);
            } else {
                top_b = masked_top(top_b, sb[g], start + 4u * g, lo_b, hi_b);
            }
        }
        let new_a = max(max_a, max(max(top_a.x, top_a.y), max(top_a.z, top_a.w)));
        let new_b = max(max_b, max(max(top_b.x, top_b.y), max(top_b.z, top_b.w)));
        let corr_a = safe_exp(max_a - new_a);  // first keys: -3e38 - max → 0
        let corr_b = safe_exp(max_b - new_b);
        max_a = new_a;
        max_b = new_b;
        var tile_sum_a = 0.0;
        var tile_sum_b = 0.0;
        for (var g = 0u; g < KEYS / 4u; g++) {
            let wa = tile_weights(sa[g], new_a, start + 4u * g, lo_a, hi_a, whole_a);
            let wb = tile_weights(sb[g], new_b, start + 4u * g, lo_b, hi_b, whole_b);
            tile_sum_a += (wa.x + wa.y) + (wa.z + wa.w);
            tile_sum_b += (wb.x + wb.y) + (wb.z + wb.w);
            sa[g] = wa;
            sb[g] = wb;
        }
        sum_a = sum_a * corr_a + tile_sum_a;
        sum_b = sum_b * corr_b + tile_sum_b;
        // Each staged value chunk read once for both rows. F16_MATH: the tile's weighted values
        // summed in f16, then added to the f32 accumulators; otherwise in f32 onto them.
        for (var i = 0u; i < VEC4S; i++) {
            var a = vec4<ATT_MATH>(0.0);
            var b = vec4<ATT_MATH>(0.0);
            if (!F16_MATH) {
                a = vec4<ATT_MATH>(acc_a[i] * corr_a);
                b = vec4<ATT_MATH>(acc_b[i] * corr_b);
            }
            for (var g = 0u; g < KEYS / 4u; g++) {
                let at = V_AT + 4u * g * STRIDE + lane + LANES * i;
                let v0 = tile[at];
                let v1 = tile[at + STRIDE];
                let v2 = tile[at + 2u * STRIDE];
                let v3 = tile[at + 3u * STRIDE];
                let wa = vec4<ATT_MATH>(sa[g]);
                let wb = vec4<ATT_MATH>(sb[g]);
                a += wa.x * v0;
                a += wa.y * v1;
                a += wa.z * v2;
                a += wa.w * v3;
                b += wb.x * v0;
                b += wb.y * v1;
                b += wb.z * v2;
                b += wb.w * v3;
            }
            if (F16_MATH) {
                acc_a[i] = acc_a[i] * corr_a + vec4<f32>(a);
                acc_b[i] = acc_b[i] * corr_b + vec4<f32>(b);
            } else {
                acc_a[i] = vec4<f32>(a);
                acc_b[i] = vec4<f32>(b);
            }
        }
        workgroupBarrier();  // the tile is read by all before the next one is stored
    }

    let out_a = p.partials_at + ((row_a * p.n_heads + h) * p.tiled_splits + wid.z) * (hd + 2u);
    let out_b = out_a + p.n_heads * p.tiled_splits * (hd + 2u);  // the next row's
    for (var i = 0u; i < VEC4S; i++) {
        let d = 4u * (lane + LANES * i);
        if (live_a) { write_chunk(out_a, d, acc_a[i]); }
        if (live_b) { write_chunk(out_b, d, acc_b[i]); }
    }
    if (lane == 0u && live_a) {
        partials[out_a + hd] = max_a;
        partials[out_a + hd + 1u] = sum_a;
    }
    if (lane == 0u && live_b) {
        partials[out_b + hd] = max_b;
        partials[out_b + hd + 1u] = sum_b;
    }
}
