// Linear layer for many rows (prefill) on int8 dot products, precision "fast": y[r, out_offset + n]
//   = x[r, :] . w[n, :] (+ bias[n]) (+ residual[r, out_offset + n]), GATED as in matmul.wgsl, for the
//   block formats whose snippet has int8_half (linear_plan.INT8_MATMUL_FORMATS).
// x comes quantized by quantize_rows.wgsl (which also applied the RMSNorm weight, NORM: its row
//   factor is applied here to the outputs): per 32 k X_LEVELS int8 levels and a scale e, x ~ e * Q
//   with Q = 254 q1 + q2 (two levels) or q1 (one). A weight block half (16 k) comes as int8 q with
//   w = scale * q + offset (int8_half). A 32 then adds e * scale * (q . Q) + offset * (e * sum(Q)),
//   q . Q = 254 (q . q1) + q . q2 exact in i32; the offset's term only where the format has one
//   (its snippet's INT8_HALF_OFFSET: Q4_1, Q4_K; Q4_0's halves come as signed q - 8): 32 FMAs a
//   thread a stage fewer. A format whose halves have scales of their own (INT8_HALF_SCALES: Q6_K,
//   a scale per 16 weights) weighs each half's sums apart: 32 FMAs a thread a stage more.
// Bindings: gemv.wgsl's names and Params, bound to quantize_rows' outputs where it has its inputs
//   (the executor's second bind group, Op.matmul_bind): 0 step, 1 p, 2 x (read: quantize_rows' xq),
//   3 w, 4 bias, 5 residual, 6 y, 7 norm (read: quantize_rows' xs). rows = p.rows, or step.rows.
// Dispatch: ceil(rows / TILE_ROWS) * ceil(N / TILE_FEATURES) workgroups of 256 threads (GATED:
//   ceil(N / 2 / (TILE_FEATURES / 2)) feature tiles), laid out by linear_grid (x fastest). Each
//   computes TILE_ROWS x TILE_FEATURES outputs, 4 rows x 8 features per thread, 32 k per stage; a
//   stage's loads are one quad of x and one weight block half per thread. GATED: the tile's 128
//   weight rows are 64 gates and their 64 ups.
struct Params { K: u32, N: u32, out_stride: u32, out_offset: u32, rows: u32, has_bias: u32, has_residual: u32,
                 norm_eps: f32, norm_offset: f32,
                 partials_at: u32, head_dim: u32, splits: u32, split_len: u32 }  // gemv.wgsl's COMBINE only

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> w: array<WBlock>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
@group(0) @binding(7) var<storage, read> norm: array<f32>;

const TILE_ROWS: u32 = MATMUL_INT8_ROWS;  // define (linear_plan: 64)
const TILE_FEATURES: u32 = MATMUL_INT8_FEATURES;  // define (linear_plan: 128)
const SPREAD: u32 = 16u;  // a thread owns rows tr + 16 i (i < 4) and features tn + 16 j (j < 8)
const HALF: u32 = TILE_FEATURES / 2u;  // features tn + 16 j for j >= 4 lie HALF further on
const LEVELS: u32 = X_LEVELS;  // define (linear_plan.INT8_MATMUL_LEVELS): 1 or 2
const X_PARTS: u32 = 2u * LEVELS;  // staged quads of a row's 32 k: 16 k halves of each level
const W_QUADS: u32 = 3u;  // a feature's 2 quads of int8 q plus one of padding: 8 features, 8 bank groups

// Stage k0: row r's q1 (q2) words of k0 + 16 q .. at x_q1[2 r + q] (x_q2); its e and e * sum(Q).
var<workgroup> x_q1: array<vec4<u32>, 2u * TILE_ROWS>;
var<workgroup> x_q2: array<vec4<u32>, 2u * TILE_ROWS>;
var<workgroup> x_e: array<f32, TILE_ROWS>;
var<workgroup> x_sum: array<f32, TILE_ROWS>;
var<workgroup> w_q: array<vec4<u32>, W_QUADS * TILE_FEATURES>;
var<workgroup> w_scale: array<f32, TILE_FEATURES>;
var<workgroup> w_scale_b: array<f32, TILE_FEATURES>;  // INT8_HALF_SCALES: the second half's
var<workgroup> w_offset: array<f32, TILE_FEATURES>;

// q . (254 a1 + a2) (one level: q . a1) over 16 int8 pairs, exact: |result| < 127 * 2^15 * 16.
fn dot16(q: vec4<u32>, a1: vec4<u32>, a2: vec4<u32>) -> i32 {
    let d1 = (dot4I8Packed(q.x, a1.x) + dot4I8Packed(q.y, a1.y)) + (dot4I8Packed(q.z, a1.z) + dot4I8Packed(q.w, a1.w));
    if (LEVELS == 1u) { return d1; }
    let d2 = (dot4I8Packed(q.x, a2.x) + dot4I8Packed(q.y, a2.y)) + (dot4I8Packed(q.z, a2.z) + dot4I8Packed(q.w, a2.w));
    return 254 * d1 + d2;
}

// One x row's 16 k (both levels) against 4 features' 16 k.
fn dots4(acc: vec4<i32>, a1: vec4<u32>, a2: vec4<u32>, b0: vec4<u32>, b1: vec4<u32>, b2: vec4<u32>, b3: vec4<u32>) -> vec4<i32> {
    return acc + vec4<i32>(dot16(b0, a1, a2), dot16(b1, a1, a2), dot16(b2, a1, a2), dot16(b3, a1, a2));
}

// A stage's exact sums weighed into the f32 outputs of tile row r (scales ws, offsets wo of 4 features).
// One level's sums are below 2^22 (32 k of |q| <= 128 times |q1| <= 127), so an integer add
// and a float subtract convert them exactly (1.5 * 2^23 + n is a float's bits): the i32 -> f32
// conversion is a quarter-rate instruction on NVIDIA GPUs, 32 a thread a stage (H200, an 8B
// layer's four matmuls at 512 rows, benchmarks/matmul_rate.py: 4,530 -> 4,483 us).
fn weigh(acc: vec4<f32>, n: vec4<i32>, r: u32, ws: vec4<f32>, wo: vec4<f32>) -> vec4<f32> {
    let magic = bitcast<vec4<f32>>(n + vec4<i32>(0x4B400000)) - vec4<f32>(12582912.0);
    let exact = select(vec4<f32>(n), magic, LEVELS == 1u);
    if (!INT8_HALF_OFFSET) { return fma(exact, x_e[r] * ws, acc); }  // the format's snippet: no offset
    return fma(exact, x_e[r] * ws, fma(vec4<f32>(x_sum[r]), wo, acc));
}

// The scales of tile features n + 16 j (j < 4): the blocks' (or first halves'), or (second,
// INT8_HALF_SCALES) the second halves'.
fn tile_scales(n: u32, second: bool) -> vec4<f32> {
    if (second) { return vec4<f32>(w_scale_b[n], w_scale_b[n + SPREAD], w_scale_b[n + 2u * SPREAD], w_scale_b[n + 3u * SPREAD]); }
    return vec4<f32>(w_scale[n], w_scale[n + SPREAD], w_scale[n + 2u * SPREAD], w_scale[n + 3u * SPREAD]);
}

// Row r's outputs: `low` for features n + 16 j, `high` for n + HALF + 16 j (GATED: `low` the
// gates and `high` the ups of outputs n + 16 j); `scale` the row's RMS factor.
fn write_row(r: u32, n: u32, rows: u32, low: vec4<f32>, high: vec4<f32>, blocks: u32) {
    if (r >= rows) { return; }
    let scale = norm[r * (2u * blocks + 1u) + 2u * blocks];
    let lo = low * scale;
    let hi = high * scale;
    for (var j = 0u; j < 4u; j++) {
        let o = n + SPREAD * j;
        if (GATED) {
            if (o < p.N / 2u) { write_gated(r, o, lo[j], hi[j]); }
        } else {
            if (o < p.N) { write_output(r, o, lo[j]); }
            if (o + HALF < p.N) { write_output(r, o + HALF, hi[j]); }
        }
    }
}

// GATED: the weight row behind tile feature f of the tile whose first output is n0.
fn tile_weight_row(n0: u32, f: u32) -> u32 {
    if (!GATED) { return n0 + f; }
    return select(n0 + f, p.N / 2u + n0 + f - HALF, f >= HALF);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let rows = select(p.rows, step.rows, p.rows == 0u);
    if (rows == 0u) { return; }
    let row_tiles = (rows + TILE_ROWS - 1u) / TILE_ROWS;
    let group = wid.x + wid.y * groups.x;
    let row0 = (group % row_tiles) * TILE_ROWS;
    let n0 = (group / row_tiles) * select(TILE_FEATURES, HALF, GATED);
    if (n0 >= select(p.N, p.N / 2u, GATED)) { return; }  // the grid's last line may run past the tiles
    let blocks = p.K / 32u;

    // Staging role: quad `part` (level part / 2, 16 k part % 2) of tile row lid / X_PARTS of x, row lid % 64's
    // e (lid < 64) or e-weighed sum (64 <= lid < 128), and half lid % 2 of tile feature lid / 2's block.
    let x_row = row0 + lid / X_PARTS;
    let part = lid % X_PARTS;
    let live_x = lid < X_PARTS * TILE_ROWS && x_row < rows;
    let x_at = x_row * (LEVELS * p.K / 16u) + (part / 2u) * (p.K / 16u) + part % 2u;  // + 2 b at stage b
    let x_store = 2u * (lid / X_PARTS) + part % 2u;
    let s_row = row0 + lid % TILE_ROWS;
    let live_s = lid < select(1u, 2u, INT8_HALF_OFFSET) * TILE_ROWS && s_row < rows;  // e * sum(Q) for an offset
    let s_at = s_row * (2u * blocks + 1u) + select(0u, blocks, lid >= TILE_ROWS);  // + b at stage b
    let f = lid / 2u;
    let h = lid % 2u;
    let w_row = tile_weight_row(n0, f);
    let live_w = w_row < p.N;
    // Computing role: a warp's 32 threads take 4 tr by 8 tn, so each shared read asks for 4 (x)
    // or 8 (w) distinct quads.
    let warp = lid / 32u;
    let lane = lid % 32u;
    let tr = (warp / 2u) * 4u + lane / 8u;
    let tn = (warp % 2u) * 8u + lane % 8u;

    // lo_i / hi_i: row tr + 16 i, features tn + 16 j and tn + HALF + 16 j (j < 4). Named, not an
    // array: drivers move an array indexed in a loop to slow local memory.
    var lo0 = vec4<f32>(0.0); var lo1 = vec4<f32>(0.0); var lo2 = vec4<f32>(0.0); var lo3 = vec4<f32>(0.0);
    var hi0 = vec4<f32>(0.0); var hi1 = vec4<f32>(0.0); var hi2 = vec4<f32>(0.0); var hi3 = vec4<f32>(0.0);
    // Each stage's global loads are issued before the previous stage is multiplied, hiding latency.
    var xq = vec4<u32>(0u);
    var xs = 0.0;
    var wh = Int8Half(vec4<u32>(0u), 0.0, 0.0);
    if (live_x) { xq = x[x_at]; }
    if (live_s) { xs = norm[s_at]; }
    if (live_w) { wh = int8_half(w_row, 0u, h, p.K, p.N); }
    for (var b = 0u; b < blocks; b++) {
        if (part < 2u) {
            if (lid < X_PARTS * TILE_ROWS) { x_q1[x_store] = xq; }
        } else { x_q2[x_store] = xq; }
        if (lid < TILE_ROWS) { x_e[lid] = xs; } else if (lid < 2u * TILE_ROWS) { x_sum[lid - TILE_ROWS] = xs; }
        w_q[W_QUADS * f + h] = wh.q;
        if (h == 0u) {
            w_scale[f] = wh.scale;
            if (INT8_HALF_OFFSET) { w_offset[f] = wh.offset; }
        } else if (INT8_HALF_SCALES) {
            w_scale_b[f] = wh.scale;
        }
        workgroupBarrier();
        if (b + 1u < blocks) {
            if (live_x) { xq = x[x_at + 2u * (b + 1u)]; }
            if (live_s) { xs = norm[s_at + b + 1u]; }
            if (live_w) { wh = int8_half(w_row, b + 1u, h, p.K, p.N); }
        }
        var s0 = vec4<i32>(0); var s1 = vec4<i32>(0); var s2 = vec4<i32>(0); var s3 = vec4<i32>(0);
        var t0 = vec4<i32>(0); var t1 = vec4<i32>(0); var t2 = vec4<i32>(0); var t3 = vec4<i32>(0);
        for (var q = 0u; q < 2u; q++) {
            let w_at = W_QUADS * tn + q;
            let b0 = w_q[w_at];
            let b1 = w_q[w_at + W_QUADS * SPREAD];
            let b2 = w_q[w_at + 2u * W_QUADS * SPREAD];
            let b3 = w_q[w_at + 3u * W_QUADS * SPREAD];
            let c0 = w_q[w_at + W_QUADS * HALF];
            let c1 = w_q[w_at + W_QUADS * (HALF + SPREAD)];
            let c2 = w_q[w_at + W_QUADS * (HALF + 2u * SPREAD)];
            let c3 = w_q[w_at + W_QUADS * (HALF + 3u * SPREAD)];
            let at = 2u * tr + q;
            var a1 = x_q1[at];
            var a2 = x_q2[at];
            s0 = dots4(s0, a1, a2, b0, b1, b2, b3); t0 = dots4(t0, a1, a2, c0, c1, c2, c3);
            a1 = x_q1[at + 2u * SPREAD]; a2 = x_q2[at + 2u * SPREAD];
            s1 = dots4(s1, a1, a2, b0, b1, b2, b3); t1 = dots4(t1, a1, a2, c0, c1, c2, c3);
            a1 = x_q1[at + 4u * SPREAD]; a2 = x_q2[at + 4u * SPREAD];
            s2 = dots4(s2, a1, a2, b0, b1, b2, b3); t2 = dots4(t2, a1, a2, c0, c1, c2, c3);
            a1 = x_q1[at + 6u * SPREAD]; a2 = x_q2[at + 6u * SPREAD];
            s3 = dots4(s3, a1, a2, b0, b1, b2, b3); t3 = dots4(t3, a1, a2, c0, c1, c2, c3);
            if (INT8_HALF_SCALES && q == 0u) {  // the first half's sums at its own scales (no offset)
                let ws = tile_scales(tn, false);
                let vs = tile_scales(tn + HALF, false);
                let none = vec4<f32>(0.0);
                lo0 = weigh(lo0, s0, tr, ws, none); hi0 = weigh(hi0, t0, tr, vs, none);
                lo1 = weigh(lo1, s1, tr + SPREAD, ws, none); hi1 = weigh(hi1, t1, tr + SPREAD, vs, none);
                lo2 = weigh(lo2, s2, tr + 2u * SPREAD, ws, none); hi2 = weigh(hi2, t2, tr + 2u * SPREAD, vs, none);
                lo3 = weigh(lo3, s3, tr + 3u * SPREAD, ws, none); hi3 = weigh(hi3, t3, tr + 3u * SPREAD, vs, none);
                s0 = vec4<i32>(0); s1 = vec4<i32>(0); s2 = vec4<i32>(0); s3 = vec4<i32>(0);
                t0 = vec4<i32>(0); t1 = vec4<i32>(0); t2 = vec4<i32>(0); t3 = vec4<i32>(0);
            }
        }
        // The stage's sums (INT8_HALF_SCALES: the second half's) at their scales.
        let ws = tile_scales(tn, INT8_HALF_SCALES);
        let wo = vec4<f32>(w_offset[tn], w_offset[tn + SPREAD], w_offset[tn + 2u * SPREAD], w_offset[tn + 3u * SPREAD]);
        let vs = tile_scales(tn + HALF, INT8_HALF_SCALES);
        let vo = vec4<f32>(w_offset[tn + HALF], w_offset[tn + HALF + SPREAD], w_offset[tn + HALF + 2u * SPREAD], w_offset[tn + HALF + 3u * SPREAD]);
        lo0 = weigh(lo0, s0, tr, ws, wo); hi0 = weigh(hi0, t0, tr, vs, vo);
        lo1 = weigh(lo1, s1, tr + SPREAD, ws, wo); hi1 = weigh(hi1, t1, tr + SPREAD, vs, vo);
        lo2 = weigh(lo2, s2, tr + 2u * SPREAD, ws, wo); hi2 = weigh(hi2, t2, tr + 2u * SPREAD, vs, vo);
        lo3 = weigh(lo3, s3, tr + 3u * SPREAD, ws, wo); hi3 = weigh(hi3, t3, tr + 3u * SPREAD, vs, vo);
        workgroupBarrier();
    }
    let r = row0 + tr;
    let n = n0 + tn;
    write_row(r, n, rows, lo0, hi0, blocks);
    write_row(r + SPREAD, n, rows, lo1, hi1, blocks);
    write_row(r + 2u * SPREAD, n, rows, lo2, hi2, blocks);
    write_row(r + 3u * SPREAD, n, rows, lo3, hi3, blocks);
}
