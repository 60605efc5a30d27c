// Linear layer for a few rows (decode): y[r, out_offset + n] = x[r, :] . w[n, :]
//                                        (+ bias[n] if has_bias) (+ residual[r, out_offset + n] if has_residual)
// With NORM, x[r, :] is first RMS-normalised: x * inverseSqrt(mean(x^2) + norm_eps) * (norm + norm_offset)
// (the scale is a factor of the whole row, so it multiplies the finished dot product). With GATED,
// w's N rows are gate | up (N / 2 each) and y[r, n] = act(gate . x + bias[n]) * (up . x + bias[N / 2 + n])
// for n < N / 2; act is SiLU, or GELU-tanh with GELU (shaders/activations.wgsl).
// Bindings (identical to matmul.wgsl; one bind group serves both):
//   0 step (uniform Step), 1 p (uniform Params),
//   2 x (read, f32 [rows, K]), 3 w (read, [N, K] weights in format WEIGHTS, as uploaded),
//   4 bias (read, f32 [N]), 5 residual (read, f32 [rows, out_stride]),
//   6 y (read_write, f32 [rows, out_stride]), 7 norm (read, f32 [K]: the RMSNorm weight).
//   Q8_INPUT: x is quantize_rows.wgsl's xq (SPREAD; stage_quantized), its rows q8_row_quads(K) quads.
//   Q8_OUTPUT: 8 yq (read_write, [rows][q8_row_quads(N')] vec4<u32>) takes y (N' outputs, the whole
//   row: out_offset 0) as quantize_rows.wgsl SPREAD would leave it for the GEMV after this one;
//   with Q8_OUT_NORM times norm (then the next RMSNorm's weight) + norm_offset.
//   rows = p.rows, step.rows when p.rows == 0, step.logit_rows when p.rows == LOGIT_ROWS.
//   bias / residual / norm are dummies when unused.
// Defines (py_engine/runtime/linear_plan.py: weight_defines, gemv_layout): WEIGHTS names the format;
//   kernels.py appends shaders/weights/<format>.wgsl, whose units part gives UNIT (weights per
//   unit: 32 or 64 for the block formats, one 16- or 32-byte load of quants), X_PAD (x blocks
//   between the starts of neighbouring units) and
//   unit_dot(row, u, K, N, x_row) (one weight row's unit u against the activation row that
//   starts at x block x_row; it reads x through act_block, or act_slot + act_at), so this file never reads w itself. VEC4 = (K % 4 == 0): x is read
//   as vec4 (XBlock), else one f32 at a time (float formats only). LANES threads split a weight
//   row's units, SLOTS such groups make a workgroup, and each thread keeps RPT rows (<= 4)
//   whose units read the same activations (cache hits); STEP units (1, 2 or 4) per lane per loop
//   iteration keep several loads in flight. No function-scope arrays: drivers put them in slow local memory. SUBGROUPS (kernels.py, from the device): reduce with subgroup
//   shuffles, else through workgroup memory. X_SUMS (formats with a per-block offset): the staged
//   chunk's x sums per 32 k, read by act_sum32. NORM, GATED, GELU: above (GATED takes RPT = 2: a
//   thread's two rows are a gate row and its up row). COMBINE (a decode token's O projection): x
//   is attention.wgsl's output tensor, whose per-split partials (from element partials_at, head
//   size head_dim, `splits` of split_len keys) are merged here as x is staged, instead of by
//   attention_combine.wgsl in a dispatch of its own.
//   Q8_ACT (block formats, precision "fast": linear_plan.int8_activations): each staged 32 x are
//   quantized to int8 in two levels (quantize_chunk), and the format's int8 units (kernels.py)
//   multiply them with dot4I8Packed: a 4-bit weight costs a fraction of an instruction instead of
//   ~3 dequantizing it to f32. Q8_EVEN_ODD (MLX): each 8 x are quantized evens first, then odds,
//   the order of MLX's nibbles (a byte holds weights 2j and 2j + 1). Q8_INPUT (with Q8_ACT, a
//   decode token's large GEMVs: linear_plan.gemv_q8_input): x comes quantized by a dispatch before.
//   Q8_OUTPUT (the GEMV before such a one, where a workgroup's outputs are whole 32s: builder.py
//   gemv_input): each workgroup quantizes its own outputs (shaders/quantize_32.wgsl) into yq / ys,
//   and that dispatch is not needed (linear_plan.GEMV_Q8_INPUT_WEIGHTS).
//   GROUPS (linear_plan.gemv_groups): each workgroup computes GROUPS groups of SLOTS * RPT outputs
//   (GATED: SLOTS), the dispatch's workgroup count apart, and stages x once for them where x
//   fits one chunk.
// Dispatch: ceil(N / (SLOTS * RPT * GROUPS)) workgroups (GATED: ceil(N / 2 / SLOTS / GROUPS)) of LANES * SLOTS threads, laid out by linear_grid
//   over x and y (x fastest) so that no dimension exceeds 65535. Rows of x are taken one after
//   another; the workgroup's weights are cache-hot after the first.
struct Params { K: u32, N: u32, out_stride: u32, out_offset: u32, rows: u32, has_bias: u32, has_residual: u32,
                 norm_eps: f32, norm_offset: f32,
                 partials_at: u32, head_dim: u32, splits: u32, split_len: u32 }  // COMBINE's partials

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
//#if Q8_INPUT
@group(0) @binding(2) var<storage, read> x: array<vec4<u32>>;  // quantize_rows' xq
//#else
@group(0) @binding(2) var<storage, read> x: array<XBlock>;
//#endif
@group(0) @binding(3) var<storage, read> w: array<WBlock>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
@group(0) @binding(7) var<storage, read> norm: array<XBlock>;  // (unread under Q8_INPUT but with Q8_OUT_NORM)
//#if Q8_OUTPUT
@group(0) @binding(8) var<storage, read_write> yq: array<vec4<u32>>;
//#endif

const THREADS: u32 = LANES * SLOTS;
// LOGIT_ROWS (define, linear_plan.LOGIT_ROWS): the p.rows that means step.logit_rows.
const_assert !GATED || RPT == 2u;  // a thread's rows are one gate row and its up row
const_assert !Q8_ACT || Q8_INPUT || X_CHUNK / 16u <= THREADS;  // the staged x blocks' maxima fit `partial`
const_assert !Q8_INPUT || (Q8_ACT && !Q8_EVEN_ODD && !COMBINE);  // quantize_rows' order; the merge needs f32 x
// Q8_OUTPUT: a workgroup's outputs, kept by its lane-0 threads for quantize_outputs (whole 32s).
const GROUP_OUTPUTS: u32 = SLOTS * select(RPT, 1u, GATED);
const_assert !Q8_OUTPUT || GROUP_OUTPUTS % 32u == 0u;
const_assert !Q8_OUT_NORM || (Q8_OUTPUT && (!NORM || Q8_INPUT));  // the norm binding is free for the next norm
const Q32_THREADS: u32 = select(1u, GROUP_OUTPUTS / 4u, Q8_OUTPUT);  // shaders/quantize_32.wgsl: a vec4 each
var<workgroup> kept: array<f32, select(1u, GROUP_OUTPUTS, Q8_OUTPUT)>;
// Activations are staged through workgroup memory, X_CHUNK k at a time: every unit of every row
// reads them there, never from global memory again (from L2, once weights stream through L1,
// they cost more than the weights themselves). A free slot after every X_PAD blocks (the format's
// unit stride) spreads the lanes' reads, a unit apart, over the memory banks. 9 KiB, plus 4 KiB
// of partial sums at 256 threads and 256 bytes of x sums.
// Q8_INPUT: x comes quantized (8 bytes per 4 x), and a chunk is 4096 x in the same bytes: a
// 32's four slots of int8 words (act_dot), a free slot after every two 32s (the lanes' reads, a
// 32 apart, spread over the banks).
const X_CHUNK: u32 = select(2048u, 4096u, Q8_INPUT);
const X_BLOCKS: u32 = select(X_CHUNK, X_CHUNK / 4u, VEC4);
const X_SLOTS: u32 = select(X_BLOCKS + X_BLOCKS / X_PAD, X_CHUNK / 32u * 9u / 2u, Q8_INPUT);

var<workgroup> x_chunk: array<XBlock, X_SLOTS>;
var<workgroup> partial: array<vec4<f32>, THREADS>;  // [thread] its RPT partial dot products
const X_SUMS_LEN: u32 = select(X_CHUNK / 32u, 1u, Q8_ACT);
var<workgroup> x_sums: array<f32, X_SUMS_LEN>;  // [32 x of the chunk] their sum, when X_SUMS
// Q8_ACT: [32 x of the chunk] their scale e and their sum of Q (quantize_chunk), or (Q8_INPUT) e
// times that sum (quantize_rows' xs).
const X_SCALES: u32 = select(1u, X_CHUNK / 32u, Q8_ACT);
var<workgroup> x_scale: array<f32, X_SCALES>;
const X_QSUMS: u32 = select(X_SCALES, 1u, Q8_INPUT);
const X_ESUMS: u32 = select(1u, X_SCALES, Q8_INPUT);
var<workgroup> x_qsum: array<atomic<i32>, X_QSUMS>;
var<workgroup> x_esum: array<f32, X_ESUMS>;
var<private> chunk_first: u32;  // the x block (of the whole x) that x_chunk[0] holds
// MERGE_HEADS (define, linear_plan.MERGE_HEADS): COMBINE's most attention heads.
var<workgroup> head_merge: array<vec2<f32>, MERGE_HEADS>;  // COMBINE: each head's (peak, total)

// The x_chunk slot of x block i (an index into the whole x, within the staged chunk).
// Q8_INPUT: the index within the chunk of block i's 32 (act_dot).
fn act_slot(i: u32) -> u32 {
    let at = i - chunk_first;
    if (Q8_INPUT) { return at / 8u; }
    return at + at / X_PAD;
}

//#if Q8_INPUT
//#else
// Element j of x's binding.
fn x_element(j: u32) -> f32 {
//#if VEC4
    return x[j / 4u][j % 4u];
//#else
    return x[j];
//#endif
}

// The splits of the forward's keys (COMBINE): those past them are empty, weigh exactly 0 in
// attention_combine.wgsl, and are skipped here. A sliding layer's ring (attention.wgsl RING) has
// `splits` of its own, all in use once kv_len passes its rows.
fn merge_splits() -> u32 { return min(p.splits, (step.kv_len + p.split_len - 1u) / p.split_len); }

// COMBINE: each head's largest split max and its splits' weighted sum for activation row r, as
// attention_combine.wgsl computes them, into head_merge (then a barrier).
fn merge_heads(r: u32, lid: u32) {
    let hd = p.head_dim;
    let heads = p.K / hd;
    for (var h = lid; h < heads; h += THREADS) {
        let base = p.partials_at + (r * heads + h) * p.splits * (hd + 2u);
        var peak = -3.0e38;
        for (var s = 0u; s < merge_splits(); s++) { peak = max(peak, x_element(base + s * (hd + 2u) + hd)); }
        var total = 0.0;
        for (var s = 0u; s < merge_splits(); s++) {
            let part = base + s * (hd + 2u);
            total += x_element(part + hd + 1u) * safe_exp(x_element(part + hd) - peak);
        }
        head_merge[h] = vec2<f32>(peak, total);
    }
    workgroupBarrier();
}

// x block i of activation row r (i counted from the row's start). COMBINE: merged from the
// attention's partials with attention_combine.wgsl's operations in its order, so the two agree
// bit for bit (head_merge holds each head's peak and total).
fn x_block(r: u32, i: u32) -> XBlock {
    let x_row_blocks = select(p.K, p.K / 4u, VEC4);
    if (!COMBINE) { return x[r * x_row_blocks + i]; }
    let hd = p.head_dim;
    let k = select(i, 4u * i, VEC4);  // the block's first element within the row; hd % 4 == 0 when VEC4
    let base = p.partials_at + (r * (p.K / hd) + k / hd) * p.splits * (hd + 2u);
    let merged = head_merge[k / hd];
    var value = vec4<f32>(0.0);
    for (var s = 0u; s < merge_splits(); s++) {
        let at = base + s * (hd + 2u) + k % hd;
        let w = safe_exp(x_element(base + s * (hd + 2u) + hd) - merged.x);
        value.x += x_element(at) * w;
        if (VEC4) {
            value.y += x_element(at + 1u) * w;
            value.z += x_element(at + 2u) * w;
            value.w += x_element(at + 3u) * w;
        }
    }
//#if VEC4
    return value / merged.y;
//#else
    return value.x / merged.y;
//#endif
}

//#endif

// x block i widened to f32 (a one-k block, VEC4 false, is splatted).
fn act_block(i: u32) -> vec4<f32> { return vec4<f32>(x_chunk[act_slot(i)]); }

// Block i + c, for a block i that starts an X_PAD group of the chunk (slot = act_slot(i)), as a
// block format's unit does: with c a constant its index is one addition, not act_slot's four
// integer operations (the quantized GEMV is bound by instruction issue, not by memory).
fn act_at(slot: u32, c: u32) -> vec4<f32> { return vec4<f32>(x_chunk[slot + c + c / X_PAD]); }

// The sum of the 32 x from block i (whole-x index, a multiple of 8 from the chunk's start): the
// formats with an offset (X_SUMS) weigh it by the x sum; every row's units share these. Q8_ACT:
// the sum of their Q times e, so that an offset multiplies the x the int8 dot saw.
fn act_sum32(i: u32) -> f32 {
//#if Q8_INPUT
    return x_esum[(i - chunk_first) / 8u];
//#else
//#if Q8_ACT
    let at = (i - chunk_first) / 8u;
    return x_scale[at] * f32(atomicLoad(&x_qsum[at]));
//#else
    return x_sums[(i - chunk_first) / 8u];
//#endif
//#endif
}

//#if Q8_ACT
// Q8_ACT replaces each staged 32 x by int8 in place (quantize_chunk), in two levels: with s the
// power of two that puts max |x| / s in [32, 64), t = x / s, q1 = round(t) and q2 = round((t - q1)
// * 254), so that Q = 254 q1 + q2 is x / (s / 254) at ~13 bits. One level (llama.cpp's q8_1:
// round(x * 127 / max)) added mean KL divergences of 4e-3 on SmolLM2-135M, past issue 28's 1e-3
// (benchmarks/fidelity.py): small models' activations have outliers that leave a block's other
// x a few steps of 127. The second level costs one more dot4I8Packed per 4 weights (~2 us of a
// Q4_0 4096 x 14336 GEMV on an H200), and a power of two makes every step exact (t, t - q1) or
// one rounded product, as numpy computes it (tests/quant_ref.py). The 8 x blocks of a 32 hold,
// compacted into their first 4 slots, each x block's q1 and q2 words (pack4xI8): slot k = (q1, q2
// of block 2k, q1, q2 of block 2k + 1). x_scale: e = s / 254 (x ~ e * Q); x_qsum: the 32's sum of Q.
//#if Q8_INPUT
// Q8_INPUT: x is quantized once for all the GEMV's workgroups, as above, by quantize_rows.wgsl
// (SPREAD) before it, or by the GEMV before (Q8_OUTPUT): row r of x holds its q1 words in K / 16
// quads, its q2 words in as many, then per 32 e, per 32 e * sum(Q) and per 32 the sum of the x^2
// before the norm weight (shaders/quantize_32.wgsl). The chunk's words go to act_dot's slots, the
// 32s' e and e * sum(Q) to x_scale and x_esum (then a barrier); returned: this thread's share of
// the chunk's sum of x^2 (NORM). chunk_start and blocks count x blocks (4 x).
fn stage_quantized(r: u32, chunk_start: u32, blocks: u32, lid: u32) -> f32 {
    let quads = p.K / 16u;  // one level's quads in a row
    let row_at = r * q8_row_quads(p.K);
    let q_at = row_at + chunk_start / 4u;
    for (var j = lid; j < blocks / 4u; j += THREADS) {  // quad j: x blocks 4j .. 4j + 3 of the chunk
        let q1 = x[q_at + j];
        let q2 = x[q_at + quads + j];
        let at = 4u * (j / 2u) + j / 4u + 2u * (j % 2u);  // slots 2 (j % 2), + 1 of 32 j / 2
        x_chunk[at] = bitcast<vec4<f32>>(vec4<u32>(q1.x, q2.x, q1.y, q2.y));
        x_chunk[at + 1u] = bitcast<vec4<f32>>(vec4<u32>(q1.z, q2.z, q1.w, q2.w));
    }
    let s_at = 4u * (row_at + 2u * quads) + chunk_start / 8u;  // the chunk's first e, as a word of x
    var squares = 0.0;
    for (var g = lid; g < blocks / 8u; g += THREADS) {
        x_scale[g] = x_word(s_at + g);
        x_esum[g] = x_word(s_at + p.K / 32u + g);
        squares += x_word(s_at + 2u * (p.K / 32u) + g);
    }
    workgroupBarrier();
    return squares;
}

// Word i of x (Q8_INPUT), an f32.
fn x_word(i: u32) -> f32 { return bitcast<f32>(x[i / 4u][i % 4u]); }
//#else
struct Quantized { words: vec2<u32>, sum: i32 }  // an x block's q1 and q2 words, its 4 Q's sum

fn quantize4(v: vec4<f32>, inv: f32) -> Quantized {
    let t = v * inv;  // exact: inv is a power of two
    let q1 = round(t);
    let q2 = vec4<i32>(round((t - q1) * 254.0));  // t - q1 is exact: |q2| <= 127
    let q = vec4<i32>(q1) * 254 + q2;
    return Quantized(vec2<u32>(pack4xI8(vec4<i32>(q1)), pack4xI8(q2)), q.x + q.y + q.z + q.w);
}

// The staged chunk's `blocks` x blocks as int8, a pair of x blocks (2k, 2k + 1 of 32-block b) per
// thread: every thread has a short part (one thread per 32 made a Q4_0 4096 x 14336 GEMV 7 us
// slower on an H200, 32.6 us against 25.5: the workgroup waits at the barrier after it). The
// staging left each x block's max |x| in `partial` (free until the row's reduction). Slot k of a
// 32 is rewritten once its 4 pairs have read slots 2k and 2k + 1 (the barrier inside; the loop's
// count is the same for every thread).
fn quantize_chunk(lid: u32, blocks: u32) {
    for (var first = 0u; first < blocks / 2u; first += THREADS) {
        let pair = first + lid;
        let live = pair < blocks / 2u;
        let b = pair / 4u;
        let k = pair % 4u;
        let base = 8u * b + (8u * b) / X_PAD;  // X_PAD is a multiple of 8: the 32's 8 slots are consecutive
        var a = vec4<f32>(0.0);
        var e = vec4<f32>(0.0);
        var top = vec4<f32>(0.0);
        if (live) {
            a = x_chunk[base + 2u * k];
            e = x_chunk[base + 2u * k + 1u];
            top = max(partial[2u * b], partial[2u * b + 1u]);
            if (k == 0u) { atomicStore(&x_qsum[b], 0); }
        }
        workgroupBarrier();
        if (live) {
            // max = f * 2^exp, f in [0.5, 1): s = 2^(exp - 6). A max below 2^-100 quantizes to 0
            // (its 1 / s would overflow).
            let top_exp = max(frexp(max(max(top.x, top.y), max(top.z, top.w))).exp, -100);
            let inv = ldexp(1.0, 6 - top_exp);
            let lo = quantize4(select(a, vec4<f32>(a.xz, e.xz), Q8_EVEN_ODD), inv);
            let hi = quantize4(select(e, vec4<f32>(a.yw, e.yw), Q8_EVEN_ODD), inv);
            x_chunk[base + k] = bitcast<vec4<f32>>(vec4<u32>(lo.words, hi.words));
            atomicAdd(&x_qsum[b], lo.sum + hi.sum);
            if (k == 0u) { x_scale[b] = ldexp(1.0, top_exp - 6) / 254.0; }
        }
    }
}
//#endif

// The sum of w's 4 signed bytes times x block i + c's Q (for a block i that starts an X_PAD group
// of the chunk, slot = act_slot(i), as act_at): x ~ act_scale32 * Q. |result| < 2^24 per 4 bytes.
fn act_dot(w: u32, slot: u32, c: u32) -> i32 {
    let k = c % 8u;  // its block within its 32, whose compacted slots start at slot + c - k (+ pads)
//#if Q8_INPUT
    let g = slot + c / 8u;  // its 32 (act_slot's index)
    let q = bitcast<vec4<u32>>(x_chunk[4u * g + g / 2u + k / 2u]);
//#else
    let q = bitcast<vec4<u32>>(x_chunk[slot + (c - k) + (c - k) / X_PAD + k / 2u]);
//#endif
    let words = select(q.xy, q.zw, k % 2u == 1u);
    return 254 * dot4I8Packed(w, words.x) + dot4I8Packed(w, words.y);
}

// The scale e of the 32 x from block i (as act_sum32's i).
fn act_scale32(i: u32) -> f32 { return x_scale[(i - chunk_first) / 8u]; }
//#endif

// Q8_OUTPUT: the workgroup's output i (of GROUP_OUTPUTS), as written, for quantize_outputs.
fn keep_output(i: u32, v: f32) {
//#if Q8_OUTPUT
    kept[i] = v;
//#endif
}

//#if Q8_OUTPUT
// Output vec4 j's weights in the next RMSNorm (Q8_OUT_NORM: the norm binding + norm_offset), as
// quantize_rows' `weighed` applies them.
fn next_norm(j: u32) -> vec4<f32> {
    if (!Q8_OUT_NORM) { return vec4<f32>(1.0); }
//#if VEC4
    return norm[j] + p.norm_offset;
//#else
    return vec4<f32>(norm[4u * j], norm[4u * j + 1u], norm[4u * j + 2u], norm[4u * j + 3u]) + p.norm_offset;
//#endif
}

// Row r's outputs of this workgroup (kept, after a barrier) into yq as quantize_rows.wgsl SPREAD
// writes them: a vec4 a thread, 8 threads a 32 (every thread calls it: barriers inside).
fn quantize_outputs(r: u32, group: u32, lid: u32) {
    let t = min(lid, Q32_THREADS - 1u);
    let width = p.out_stride;  // the whole output row (builder.py gives Q8_OUTPUT only to such ops)
    let j = group * (GROUP_OUTPUTS / 4u) + t;  // the vec4 within the row
    let live = lid < Q32_THREADS && 4u * j < width;  // whole 32s: width % 32 == 0
    let a = vec4<f32>(kept[4u * t], kept[4u * t + 1u], kept[4u * t + 2u], kept[4u * t + 3u]);
    let q = quantize_32(t, a, a * select(vec4<f32>(1.0), next_norm(j), live), lid < Q32_THREADS);
    if (live) { store_q8(q, r, width, j, t % 8u == 0u); }
}

// Word i of yq (shaders/quantize_32.wgsl's store_q8).
fn q8_word(i: u32, value: u32) { yq[i / 4u][i % 4u] = value; }
//#endif

// Unit u of rows n.x .. n.w (the first RPT of them) against activation row x_row.
fn unit_rows(n: vec4<u32>, u: u32, x_row: u32) -> vec4<f32> {
    var d = vec4<f32>(0.0);
    d.x = unit_dot(n.x, u, p.K, p.N, x_row);
    if (RPT > 1u) { d.y = unit_dot(n.y, u, p.K, p.N, x_row); }
    if (RPT > 2u) { d.z = unit_dot(n.z, u, p.K, p.N, x_row); }
    if (RPT > 3u) { d.w = unit_dot(n.w, u, p.K, p.N, x_row); }
    return d;
}

// The sum of every thread's v, returned to every thread (NORM's sum of squares); `partial` is
// free again when it returns.
fn workgroup_sum(v: f32, lid: u32, subgroup_size: u32) -> f32 {
    var total = 0.0;
//#if SUBGROUPS
    let s = subgroupAdd(v);
    if (lid % subgroup_size == 0u) { partial[lid / subgroup_size] = vec4<f32>(s); }
    workgroupBarrier();
    for (var k = 0u; k < THREADS / subgroup_size; k++) { total += partial[k].x; }
//#else
    partial[lid] = vec4<f32>(v);
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { partial[lid] = partial[lid] + partial[lid + stride]; }
        workgroupBarrier();
    }
    total = partial[0].x;
//#endif
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32,
//#endif
) {
    // p.rows: a fixed count, 0 for the forward's rows, or LOGIT_ROWS for its scored rows (the LM head).
    let rows = select(select(p.rows, step.rows, p.rows == 0u), step.logit_rows, p.rows == LOGIT_ROWS);
    let first_group = wid.x + wid.y * groups.x;
    let launched = groups.x * groups.y;
    let slot = lid / LANES;
    let lane = lid % LANES;
    let outputs = select(p.N, p.N / 2u, GATED);
    let units = p.K / UNIT;
    let x_row_blocks = select(p.K, p.K / 4u, VEC4);
    let chunk_units = X_CHUNK / UNIT;  // UNIT divides X_CHUNK: 1, 4, 32 or 64
    let steps = (chunk_units + STEP * LANES - 1u) / (STEP * LANES);
    // GROUPS: x fits one chunk, and the workgroup stages it once for its groups (with several
    // chunks every group stages its own).
    let stage_once = units <= chunk_units;

    for (var r = 0u; r < rows; r++) {
        let x_row = r * x_row_blocks;
        var row_scale = 1.0;  // NORM: the row's inverseSqrt(mean(x^2) + eps), once x is staged
        // GROUPS groups of outputs a workgroup, `launched` apart (linear_plan.gemv_groups): fewer
        // workgroups than outputs need, so that they run in one wave, and x staged fewer times.
        for (var g = 0u; g < GROUPS; g++) {
            let group = first_group + g * launched;
            if (group * GROUP_OUTPUTS >= outputs) { break; }  // uniform: the workgroup's groups are done
            let restage = g == 0u || !stage_once;
            let n0 = (group * SLOTS + slot) * select(RPT, 1u, GATED);
            // Rows past N (in the last group) read row N - 1 and write nothing: every thread runs
            // the same loop, so the reductions below stay in uniform control flow.
            var n = min(vec4<u32>(n0) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.N - 1u));
            if (GATED) {
                let gate = min(n0, outputs - 1u);
                n = vec4<u32>(gate, gate + outputs, gate, gate);
            }
//#if Q8_INPUT
//#else
            if (COMBINE && restage) { merge_heads(r, lid); }
//#endif
            var acc = vec4<f32>(0.0);
            var squares = 0.0;  // NORM: this thread's share of the row's sum of squares
            for (var first_unit = 0u; first_unit < units; first_unit += chunk_units) {
                // From uniform values, not the private chunk_first: WGSL counts a private variable's
                // value as non-uniform, and Q8_ACT's quantize_chunk loops `blocks` times around a barrier.
                let chunk_start = first_unit * (UNIT / select(1u, 4u, VEC4));
                chunk_first = x_row + chunk_start;
                let blocks = min(X_BLOCKS, x_row_blocks - chunk_start);
                if (restage) {
//#if Q8_INPUT
                    squares += stage_quantized(r, chunk_start, blocks, lid);
//#else
                    for (var i = lid; i < blocks; i += THREADS) {
                        var v = x_block(r, chunk_first - x_row + i);
                        if (NORM) {
                            let q = vec4<f32>(v);
                            squares += select(q.x * q.x, dot(q, q), VEC4);
                            v = v * (norm[chunk_first - x_row + i] + XBlock(p.norm_offset));
                        }
                        x_chunk[i + i / X_PAD] = v;
//#if Q8_ACT
                        let m = abs(v);
                        partial[i / 4u][i % 4u] = max(max(m.x, m.y), max(m.z, m.w));  // for quantize_chunk
//#endif
                    }
                    workgroupBarrier();
//#if Q8_ACT
                    quantize_chunk(lid, blocks);
                    workgroupBarrier();
//#else
                    // Once per chunk, not once per unit of every row: 8 x reads a unit fewer. From the staged
                    // chunk after its barrier: summing from x itself to share that barrier ran 4-5 % slower.
                    if (X_SUMS) {
                        for (var s = lid; s < blocks / 8u; s += THREADS) {
                            let slot = act_slot(chunk_first + 8u * s);
                            let sum = ((act_at(slot, 0u) + act_at(slot, 1u)) + (act_at(slot, 2u) + act_at(slot, 3u)))
                                    + ((act_at(slot, 4u) + act_at(slot, 5u)) + (act_at(slot, 6u) + act_at(slot, 7u)));
                            x_sums[s] = dot(sum, vec4<f32>(1.0));
                        }
                        workgroupBarrier();
                    }
//#endif
//#endif
                }
                let last_unit = min(units, first_unit + chunk_units);
                for (var s = 0u; s < steps; s++) {
                    let u = first_unit + lane + s * STEP * LANES;
                    // STEP units' loads in flight, then the remainder one at a time.
                    if (STEP == 4u && u + 3u * LANES < last_unit) {
                        acc += (unit_rows(n, u, x_row) + unit_rows(n, u + LANES, x_row))
                             + (unit_rows(n, u + 2u * LANES, x_row) + unit_rows(n, u + 3u * LANES, x_row));
                    } else if (STEP == 2u && u + LANES < last_unit) {
                        acc += unit_rows(n, u, x_row) + unit_rows(n, u + LANES, x_row);
                    } else {
                        for (var v = u; v < min(last_unit, u + STEP * LANES); v += LANES) {
                            acc += unit_rows(n, v, x_row);
                        }
                    }
                }
                workgroupBarrier();  // x_chunk is restaged for the next chunk
            }
            if (NORM && restage) {
//#if SUBGROUPS
                let sum_squares = workgroup_sum(squares, lid, subgroup_size);
//#else
                let sum_squares = workgroup_sum(squares, lid, 1u);  // (1: unused without subgroups)
//#endif
                row_scale = inverseSqrt(sum_squares / f32(p.K) + p.norm_eps);
            }
            acc *= row_scale;
            // Sum acc over the slot's LANES threads; lane 0 ends up with the total.
//#if SUBGROUPS
            // Butterfly within each subgroup (lanes l and l ^ o share a subgroup while o < its size),
            // then workgroup memory across the subgroups of a slot when a slot spans several.
            for (var o = LANES / 2u; o > 0u; o >>= 1u) {
                acc += select(vec4<f32>(0.0), subgroupShuffleXor(acc, o), o < subgroup_size);
            }
            let span = min(LANES, subgroup_size);
            partial[lid] = acc;
            workgroupBarrier();
            if (lane == 0u) {
                for (var k = span; k < LANES; k += span) { acc += partial[lid + k]; }
            }
//#else
            partial[lid] = acc;
            workgroupBarrier();
            for (var stride = LANES / 2u; stride > 1u; stride >>= 1u) {
                if (lane < stride) { partial[lid] += partial[lid + stride]; }
                workgroupBarrier();
            }
            if (lane == 0u) { acc = partial[lid] + partial[lid + 1u]; }
//#endif
            if (lane == 0u) {
                if (GATED) {
                    if (n0 < outputs) { keep_output(slot, write_gated(r, n0, acc.x, acc.y)); }
                } else {
                    for (var j = 0u; j < RPT; j++) {
                        if (n0 + j < p.N) { keep_output(slot * RPT + j, write_output(r, n0 + j, acc[j])); }
                    }
                }
            }
//#if Q8_OUTPUT
            workgroupBarrier();
            quantize_outputs(r, group, lid);
//#endif
            workgroupBarrier();  // `partial` (and `kept`) are rewritten for the next group or row
        }
    }
}
