// Bidirectional multi-head attention of an encoder's many rows (a vision tower's patches, an
// embedder's packed texts), flash-attention style, straight from the fused q|k|v projection:
// encoder_attention.wgsl's semantics, Params and bindings (one bind group serves both; the graph
// runs this one in forwards of more than ENCODER_FEW_ROWS rows, bert.encoder_attention), but there
// a workgroup per (head, row) read every key of its span from memory: Gemma 3's tower (4,096 patch
// rows, 16 heads of 72) spent ~90 ms a layer there on an H200.
//   y[r, h, :] = softmax_k(scale * q[r, h] . k[k, h]) . v[k, h]   over k in [spans[2r], spans[2r + 1])
// A workgroup takes one head and a block of BLOCK_ROWS rows: SLOTS slots of LANES consecutive
// threads, slot s rows 2s and 2s + 1 of the block (a and b below). Lane l owns the head's vec4
// chunks l, l + LANES, ... of both rows' q (in registers, scaled) and output accumulators. Rows come
// in span order (packed texts one after another; a tile's patches share one span), so the block's
// keys run from its first row's span start to its last live row's span end, in tiles of KEYS keys
// (K then V in workgroup memory, each key padded to STRIDE vec4s). Per tile:
//   1. each thread loads its share of the tile's K and V (all loads, then the stores); barrier;
//   2. each lane's partial dots of both rows with the tile's keys, 4 keys a vec4, summed over the
//      slot's lanes by a subgroupShuffleXor butterfly (the same bits in every lane);
//   3. per row, every lane alike: the span's mask (skipped for a tile wholly inside it), the
//      tile's max, the exp weights (tile_softmax.wgsl), running max and sum, and the rescaled
//      accumulator plus the weighted value chunks; barrier (the next tile overwrites this one).
// The two rows are named pairs (qa / qb, acc_a / acc_b), never arrays indexed by row: NVIDIA's
// compile of those puts them in local memory (attention_tiled.wgsl, whose layout this is).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 qkv (read, f32 [rows, q_stride] as vec4s:
//           head h's q at h * head_dim, its k at k_offset + g * head_dim, its v at v_offset + g *
//           head_dim where g = h / kv_group; every offset and q_stride a multiple of 4), 3 spans (read, u32 [rows, 2]: each
//           row's keys, first row and end row), 4 y (read_write, f32 [rows, n_heads * head_dim]).
// Defines: HEAD_VEC4S (head_dim / 4, head_dim a multiple of 4 up to 256), LANES (2 or 4 with SUBGROUPS,
//           whose subgroups are at least 4 wide in WebGPU; 1 without: a thread owns its rows whole,
//           as a CPU adapter runs them best), F16_MATH with ATT_MATH (f16 with it, else f32):
//           attention_grid.encoder_defines.
// f32 arithmetic, but with F16_MATH (precision "fast" on a device with shader-f16) as
// attention_tiled.wgsl's: K and V staged in f16 (32 keys a tile), q held in f16, each lane's dot
// products summed in f16 before the f32 sum of the lanes, and a tile's weighted values summed in
// f16 before the f32 rescale and add; the softmax stays f32.
// Dispatch: attention_grid.encoder_grid: (n_heads, ceil(step.rows / BLOCK_ROWS), 1) workgroups of
//           256 threads. Workgroup storage: 16 KiB (`tile`).
struct Params {
    n_heads: u32, head_dim: u32, q_stride: u32, k_offset: u32,
    v_offset: u32, scale: f32, kv_group: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> qkv: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> spans: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const THREADS: u32 = 256u;  // attention_grid.TILED_THREADS
const SLOTS: u32 = THREADS / LANES;
const BLOCK_ROWS: u32 = 2u * SLOTS;  // attention_grid.encoder_grid's
const VEC4S: u32 = (HEAD_VEC4S + LANES - 1u) / LANES;  // a lane's chunks of a head vector
const STRIDE: u32 = VEC4S * LANES;  // a key's vec4s in the tile (zeros past the head's)
const TILE_VEC4S: u32 = 1024u << u32(F16_MATH);  // 16 KiB
// K and V, half the tile each: 32 keys of head_dim 64, 24 of 72 (28 at 2 lanes), 16 of 128, 8 of 256; F16_MATH:
// 32 of head_dim up to 128, 16 of 256.
const KEYS: u32 = min(32u, TILE_VEC4S / 2u / STRIDE) / 4u * 4u;
const V_AT: u32 = KEYS * STRIDE;  // the tile's values: tile[V_AT + key * STRIDE + chunk]
const LOADS: u32 = (KEYS * STRIDE + THREADS - 1u) / THREADS;  // K (and V) vec4s a thread stages per tile
var<workgroup> tile: array<vec4<ATT_MATH>, TILE_VEC4S>;

// Dimensions 4c .. 4c + 3 of row `row`'s part at `offset` (q: 0, k: k_offset, v: v_offset) of
// head h (zeros past the head and for an idle row).
fn head_chunk(row: u32, offset: u32, h: u32, c: u32, live: bool) -> vec4<f32> {
    if (live && c < HEAD_VEC4S) { return qkv[(row * p.q_stride + offset + h * p.head_dim) / 4u + c]; }
    return vec4<f32>(0.0);
}

// Dimensions 4c .. 4c + 3 of row `row`'s output (past the head's: none).
fn write_chunk(row: u32, h: u32, c: u32, v: vec4<f32>) {
    if (c < HEAD_VEC4S) {
        let at = (row * p.n_heads + h) * p.head_dim + 4u * c;
        y[at] = v.x;
        y[at + 1u] = v.y;
        y[at + 2u] = v.z;
        y[at + 3u] = v.w;
    }
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let slot = lid / LANES;
    let lane = lid % LANES;
    let row0 = wid.y * BLOCK_ROWS;
    let row_a = row0 + 2u * slot;
    let row_b = row_a + 1u;
    let live_a = row_a < step.rows;
    let live_b = row_b < step.rows;
    // Each row's keys: [lo, hi) (none for an idle one); the block's: [first, end), uniform across
    // the workgroup (its barriers sit in the loop over them).
    var lo_a = 0u;
    var hi_a = 0u;
    var lo_b = 0u;
    var hi_b = 0u;
    if (live_a) {
        lo_a = spans[2u * row_a];
        hi_a = spans[2u * row_a + 1u];
    }
    if (live_b) {
        lo_b = spans[2u * row_b];
        hi_b = spans[2u * row_b + 1u];
    }
    let first = spans[2u * row0];
    let end = spans[2u * (min(row0 + BLOCK_ROWS, step.rows) - 1u) + 1u];

    var qa: array<vec4<ATT_MATH>, VEC4S>;
    var qb: array<vec4<ATT_MATH>, VEC4S>;
    var acc_a: array<vec4<f32>, VEC4S>;
    var acc_b: array<vec4<f32>, VEC4S>;
    for (var i = 0u; i < VEC4S; i++) {
        qa[i] = vec4<ATT_MATH>(head_chunk(row_a, 0u, h, lane + LANES * i, live_a) * p.scale);
        qb[i] = vec4<ATT_MATH>(head_chunk(row_b, 0u, h, lane + LANES * i, live_b) * p.scale);
        acc_a[i] = vec4<f32>(0.0);
        acc_b[i] = vec4<f32>(0.0);
    }
    var max_a = -3.0e38;
    var max_b = -3.0e38;
    var sum_a = 0.0;
    var sum_b = 0.0;

    for (var start = first; start < end; start += KEYS) {
        // This thread's share of the tile: vec4 lid + THREADS * i of K and of V (key idx / STRIDE,
        // chunk idx % STRIDE); zeros past the head and for keys at or past `end`, so every staged
        // number is finite (a masked key's value weighs 0, and 0 * finite is 0).
        var k_in: array<vec4<ATT_MATH>, LOADS>;
        var v_in: array<vec4<ATT_MATH>, LOADS>;
        for (var i = 0u; i < LOADS; i++) {
            let idx = lid + THREADS * i;
            let key = start + idx / STRIDE;
            let live = idx < KEYS * STRIDE && key < end;
            k_in[i] = vec4<ATT_MATH>(head_chunk(key, p.k_offset, h / p.kv_group, idx % STRIDE, live));
            v_in[i] = vec4<ATT_MATH>(head_chunk(key, p.v_offset, h / p.kv_group, idx % STRIDE, live));
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
            // A lane's dots in ATT_MATH (F16_MATH: its dimensions' sums in f16), then f32.
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
            // consecutive invocations, as gemv.wgsl assumes; WebGPU's are at least 4 wide). The
            // butterfly adds the same two values in each pair of lanes: every lane gets the same bits.
            for (var o = 1u; o < LANES; o <<= 1u) {
                da += subgroupShuffleXor(da, o);
                db += subgroupShuffleXor(db, o);
            }
//#else
            const_assert LANES == 1u;
//#endif
            sa[g] = da;
            sb[g] = db;
        }

        // The online softmax of each row over this tile's keys in its [lo, hi): `whole` when every
        // key is (all tiles of a picture's rows), which skips the per-key mask.
        let whole_a = start >= lo_a && start + KEYS <= hi_a;
        let whole_b = start >= lo_b && start + KEYS <= hi_b;
        var top_a = vec4<f32>(-3.0e38);
        var top_b = vec4<f32>(-3.0e38);
        for (var g = 0u; g < KEYS / 4u; g++) {
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
        let corr_a = safe_exp(max_a - new_a);  // first keys: -3e38 - max -> 0
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
        // summed in f16, then added to the rescaled f32 accumulators; otherwise in f32 onto them.
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

    for (var i = 0u; i < VEC4S; i++) {
        if (live_a) { write_chunk(row_a, h, lane + LANES * i, acc_a[i] / sum_a); }
        if (live_b) { write_chunk(row_b, h, lane + LANES * i, acc_b[i] / sum_b); }
    }
}
