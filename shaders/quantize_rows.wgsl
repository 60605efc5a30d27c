// The activations of a prefill's int8 matmul (matmul_int8.wgsl), or (SPREAD) of a decode token's
// large GEMV (gemv.wgsl Q8_INPUT), quantized once per forward for all their workgroups: each 32 x
// of a row (times the RMSNorm weight, with has_norm) in X_LEVELS int8 levels. Two as gemv.wgsl's Q8_ACT does it: s the power of two that puts max |x| / s in [32, 64),
// t = x / s, q1 = round(t), q2 = round((t - q1) * 254), x ~ e * (254 q1 + q2) with e = s / 254.
// One as llama.cpp's q8_1: q1 = round(x * 127 / max |x|), x ~ e * q1 with e = max |x| / 127.
// Bindings: 0 step (uniform Step: rows), 1 p (uniform Params), 2 x (read, f32 [rows, K] as vec4),
//   3 norm (read, f32 [K] as vec4: the RMSNorm weight; a dummy without has_norm),
//   4 xq (read_write, [rows][X_LEVELS K / 16] vec4<u32>: row r's q1 words in its first K / 16
//   quads, q2's in the next; 32 k = 2 quads), 5 xs (read_write, f32 [rows][2 K / 32 + 1]: each
//   32's e, then each 32's e * sum(Q) (Q = 254 q1 + q2, or q1), then the row's RMS factor
//   1 / sqrt(mean(x^2) + eps), or 1). SPREAD: no xs; xq is [rows][q8_row_quads(K)] vec4<u32>:
//   each row's q1 and q2 quads, then its 32s' e, e * sum(Q) and sums of x^2 (shaders/quantize_32.wgsl).
// Dispatch: (rows, 1, 1) workgroups of 256 threads, one row each; a thread takes every 256th 32.
//   SPREAD: linear_plan.quantize_spread_grid, (ceil(K / 32 / SPREAD_BLOCKS), rows, 1) workgroups
//   of 64 threads, 8 a 32 (a vec4 each: one load of x, of the norm weight; shaders/quantize_32.wgsl,
//   two levels only), and no row reduction (the GEMV sums the squares as it stages them). Where the
//   GEMV before can quantize its own outputs (gemv.wgsl Q8_OUTPUT), it runs instead of this. On an H200 before an 8B's GEMV: a row as one
//   workgroup's loop and reduction added 5.8-8.9 us, a 32 a thread 4.3-9.0, 8 threads a 32 less
//   (linear_plan.GEMV_Q8_INPUT_WEIGHTS has the numbers). The same bits either way.
struct Params { K: u32, has_norm: u32, norm_eps: f32, norm_offset: f32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> norm: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> xq: array<vec4<u32>>;
//#if SPREAD
//#else
@group(0) @binding(5) var<storage, read_write> xs: array<f32>;
//#endif

const THREADS: u32 = select(256u, 64u, SPREAD);
const LEVELS: u32 = X_LEVELS;  // define (linear_plan.INT8_MATMUL_LEVELS)
const SPREAD_BLOCKS: u32 = 8u;  // SPREAD: the 32s of a workgroup (linear_plan.QUANTIZE_SPREAD_BLOCKS)
var<workgroup> squares: array<f32, THREADS>;
const Q32_THREADS: u32 = select(1u, THREADS, SPREAD);  // SPREAD: every thread quantizes (shaders/quantize_32.wgsl)
const_assert !SPREAD || LEVELS == 2u;  // the GEMV's two levels

// Four x at scale 1 / inv: (q1 word, q2 word, sum of the 4 Q = 254 q1 + q2); one level: (q1
// word, 0, sum of the 4 q1).
fn levels(v: vec4<f32>, inv: f32) -> vec3<u32> {
    if (LEVELS == 1u) {
        let q1 = clamp(vec4<i32>(round(v * inv)), vec4<i32>(-127), vec4<i32>(127));
        return vec3<u32>(pack4xI8(q1), 0u, bitcast<u32>(q1.x + q1.y + q1.z + q1.w));
    }
    let t = v * inv;  // exact: inv is a power of two
    let q1 = round(t);
    let q2 = vec4<i32>(round((t - q1) * 254.0));  // t - q1 is exact: |q2| <= 127
    let q = vec4<i32>(q1) * 254 + q2;
    return vec3<u32>(pack4xI8(vec4<i32>(q1)), pack4xI8(q2), bitcast<u32>(q.x + q.y + q.z + q.w));
}

fn weighed(v: vec4<f32>, i: u32) -> vec4<f32> {
    if (p.has_norm == 0u) { return v; }
    return v * (norm[i] + p.norm_offset);
}

// SPREAD: the thread's vec4 (k of 8) of 32 b, of row r, quantized with the 32's other 7 threads
// (shaders/quantize_32.wgsl, which gemv.wgsl Q8_OUTPUT shares); the 32's first thread writes its
// scale, e * sum(Q) and sum of squares. The row path's below gives the same bits.
fn quantize_spread(r: u32, group: u32, lid: u32) {
    let blocks = p.K / 32u;
    let k = lid % 8u;
    let b = group * SPREAD_BLOCKS + lid / 8u;
    let live = b < blocks;
    let n = 8u * min(b, blocks - 1u) + k;  // the vec4 within the row (the last 32's past the row)
    let a = x[r * (p.K / 4u) + n];
    let q = quantize_32(lid, a, weighed(a, n), true);
    if (live) { store_q8(q, r, p.K, n, k == 0u); }
}

// Word i of xq (shaders/quantize_32.wgsl's store_q8).
fn q8_word(i: u32, value: u32) { xq[i / 4u][i % 4u] = value; }

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = select(wid.x, wid.y, SPREAD);
    if (r >= step.rows) { return; }
//#if SPREAD
    quantize_spread(r, wid.x, lid);
//#else
    let blocks = p.K / 32u;
    let at = r * (p.K / 4u);  // the row's first x vec4
    let q_at = r * (LEVELS * p.K / 16u);
    let s_at = r * (2u * blocks + 1u);
    var sum_sq = 0.0;
    for (var b = lid; b < blocks; b += THREADS) {
        // Named vectors, never an indexed array: drivers move an array indexed in a loop to local memory.
        let i = at + 8u * b;
        let a0 = x[i]; let a1 = x[i + 1u]; let a2 = x[i + 2u]; let a3 = x[i + 3u];
        let a4 = x[i + 4u]; let a5 = x[i + 5u]; let a6 = x[i + 6u]; let a7 = x[i + 7u];
        sum_sq += ((dot(a0, a0) + dot(a1, a1)) + (dot(a2, a2) + dot(a3, a3)))
                + ((dot(a4, a4) + dot(a5, a5)) + (dot(a6, a6) + dot(a7, a7)));
        let n = 8u * b;
        let w0 = weighed(a0, n); let w1 = weighed(a1, n + 1u); let w2 = weighed(a2, n + 2u); let w3 = weighed(a3, n + 3u);
        let w4 = weighed(a4, n + 4u); let w5 = weighed(a5, n + 5u); let w6 = weighed(a6, n + 6u); let w7 = weighed(a7, n + 7u);
        let top = max(max(max(abs(w0), abs(w1)), max(abs(w2), abs(w3))), max(max(abs(w4), abs(w5)), max(abs(w6), abs(w7))));
        let top1 = max(max(top.x, top.y), max(top.z, top.w));
        // Two levels: max = f * 2^exp, f in [0.5, 1): s = 2^(exp - 6). A max below 2^-100 quantizes to 0.
        let top_exp = max(frexp(top1).exp, -100);
        let inv = select(ldexp(1.0, 6 - top_exp), select(0.0, 127.0 / top1, top1 > 0.0), LEVELS == 1u);
        let l0 = levels(w0, inv); let l1 = levels(w1, inv); let l2 = levels(w2, inv); let l3 = levels(w3, inv);
        let l4 = levels(w4, inv); let l5 = levels(w5, inv); let l6 = levels(w6, inv); let l7 = levels(w7, inv);
        xq[q_at + 2u * b] = vec4<u32>(l0.x, l1.x, l2.x, l3.x);
        xq[q_at + 2u * b + 1u] = vec4<u32>(l4.x, l5.x, l6.x, l7.x);
        if (LEVELS == 2u) {
            xq[q_at + p.K / 16u + 2u * b] = vec4<u32>(l0.y, l1.y, l2.y, l3.y);
            xq[q_at + p.K / 16u + 2u * b + 1u] = vec4<u32>(l4.y, l5.y, l6.y, l7.y);
        }
        let sums = bitcast<vec4<i32>>(vec4<u32>(l0.z, l1.z, l2.z, l3.z)) + bitcast<vec4<i32>>(vec4<u32>(l4.z, l5.z, l6.z, l7.z));
        let e = select(ldexp(1.0, top_exp - 6) / 254.0, top1 / 127.0, LEVELS == 1u);
        xs[s_at + b] = e;
        xs[s_at + blocks + b] = e * f32((sums.x + sums.y) + (sums.z + sums.w));
    }
    squares[lid] = sum_sq;
    workgroupBarrier();
    for (var half = THREADS / 2u; half > 0u; half /= 2u) {
        if (lid < half) { squares[lid] += squares[lid + half]; }
        workgroupBarrier();
    }
    if (lid == 0u) {
        xs[s_at + 2u * blocks] = select(1.0, inverseSqrt(squares[0] / f32(p.K) + p.norm_eps), p.has_norm != 0u);
    }
//#endif
}
