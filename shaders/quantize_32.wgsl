// A 32 of x quantized in two int8 levels by 8 threads, a vec4 each, as gemv.wgsl's Q8_INPUT reads
// it (quantize_rows.wgsl's header has the levels: s the power of two that puts max |x| / s in
// [32, 64), q1 = round(x / s), q2 = round((x / s - q1) * 254), x ~ e * (254 q1 + q2), e = s / 254).
// Called (kernels.py appends it) by quantize_rows.wgsl SPREAD (x read from
// a buffer) and gemv.wgsl Q8_OUTPUT (a GEMV's own outputs, for the GEMV after it), so both write
// the same bits. The caller defines Q32_THREADS, the threads that take part (8 a 32, thread t
// holding vec4 t % 8 of its 32); every thread of the workgroup calls it (two barriers inside).
// A row of K x so quantized (gemv.wgsl's x under Q8_INPUT: one binding) is q8_row_quads(K) quads
// (vec4<u32>): its K / 16 quads of q1 words, K / 16 of q2 words, then the f32 bits of each 32's e,
// of each 32's e * sum(Q), of each 32's sum of x^2, padded to a whole quad (linear_plan.q8_row_bytes).
// Appended to the kernels that call quantize_32 or q8_row_quads; its part after `// store`
// (store_q8, which writes through the caller's q8_word(i, value): word i of its quantized rows'
// binding) to those that call store_q8.

fn q8_row_quads(K: u32) -> u32 { return K / 8u + (3u * (K / 32u) + 3u) / 4u; }

struct Q32 {
    q1: u32,  // the thread's 4 x: their q1 (pack4xI8)
    q2: u32,  // and their q2
    // The 32's e, e * sum(Q) and sum of x^2 (x before the norm weight): in its first thread only.
    e: f32,
    e_sum: f32,
    squares: f32,
}

var<workgroup> q32_tops: array<f32, Q32_THREADS>;  // each thread's max |w|
var<workgroup> q32_squares: array<f32, Q32_THREADS>;  // each thread's sum of a^2
var<workgroup> q32_sums: array<i32, Q32_THREADS>;  // each thread's sum of its 4 Q

// Thread t's 4 x `a` and the same times the norm weight, `w` (quantized; a where there is none).
// take_part: whether t is one of the Q32_THREADS (the others pass any t and get zeros).
fn quantize_32(t: u32, a: vec4<f32>, w: vec4<f32>, take_part: bool) -> Q32 {
    if (take_part) {
        let m = abs(w);
        q32_tops[t] = max(max(m.x, m.y), max(m.z, m.w));
        q32_squares[t] = dot(a, a);
    }
    workgroupBarrier();
    let g = t - t % 8u;  // the 32's first thread
    var out = Q32(0u, 0u, 0.0, 0.0, 0.0);
    var top_exp = 0;
    if (take_part) {
        let top = max(max(max(q32_tops[g], q32_tops[g + 1u]), max(q32_tops[g + 2u], q32_tops[g + 3u])),
                      max(max(q32_tops[g + 4u], q32_tops[g + 5u]), max(q32_tops[g + 6u], q32_tops[g + 7u])));
        top_exp = max(frexp(top).exp, -100);  // a max below 2^-100 quantizes to 0 (its 1 / s would overflow)
        let scaled = w * ldexp(1.0, 6 - top_exp);  // exact: a power of two
        let q1 = round(scaled);
        let q2 = vec4<i32>(round((scaled - q1) * 254.0));  // scaled - q1 is exact: |q2| <= 127
        let q = vec4<i32>(q1) * 254 + q2;
        out.q1 = pack4xI8(vec4<i32>(q1));
        out.q2 = pack4xI8(q2);
        q32_sums[t] = (q.x + q.y) + (q.z + q.w);
    }
    workgroupBarrier();
    if (take_part && t == g) {
        var total = 0;
        for (var j = 0u; j < 8u; j++) { total += q32_sums[g + j]; }
        out.e = ldexp(1.0, top_exp - 6) / 254.0;
        out.e_sum = out.e * f32(total);
        out.squares = ((q32_squares[g] + q32_squares[g + 1u]) + (q32_squares[g + 2u] + q32_squares[g + 3u]))
                    + ((q32_squares[g + 4u] + q32_squares[g + 5u]) + (q32_squares[g + 6u] + q32_squares[g + 7u]));
    }
    return out;
}

// store
// (kernels.py appends what follows only to kernels that call store_q8.)
// Thread t's part of q (quantize_32's, for vec4 j of row r of K x) into the row as gemv.wgsl's
// Q8_INPUT reads it; the 32's first thread (first) also its e, e * sum(Q) and sum of squares.
fn store_q8(q: Q32, r: u32, K: u32, j: u32, first: bool) {
    let q_at = 4u * r * q8_row_quads(K);  // the row's first word
    q8_word(q_at + j, q.q1);
    q8_word(q_at + K / 4u + j, q.q2);
    if (first) {
        let blocks = K / 32u;
        let s_at = q_at + K / 2u + j / 8u;  // the 32's e
        q8_word(s_at, bitcast<u32>(q.e));
        q8_word(s_at + blocks, bitcast<u32>(q.e_sum));
        q8_word(s_at + 2u * blocks, bitcast<u32>(q.squares));
    }
}
