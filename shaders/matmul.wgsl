// Linear layer for many rows (prefill): y[r, out_offset + n] = x[r, :] . w[n, :]
//                                        (+ bias[n] if has_bias) (+ residual[r, out_offset + n] if has_residual)
// NORM (RMSNorm of x first) and GATED (w is gate | up, y = act(gate) * up) as in gemv.wgsl.
// Bindings (identical to gemv.wgsl; one bind group serves both):
//   0 step (uniform Step), 1 p (uniform Params),
//   2 x (read, f32 [rows, K]), 3 w (read, [N, K] weights in format WEIGHTS, as stored),
//   4 bias (read, f32 [N]), 5 residual (read, f32 [rows, out_stride]),
//   6 y (read_write, f32 [rows, out_stride]), 7 norm (read, f32 [K]: the RMSNorm weight).
//   rows = p.rows, step.rows when p.rows == 0, step.logit_rows when p.rows == LOGIT_ROWS (a vision
//   tower's merger: the forward's output rows, each several of its rows; the grid, sized for step.rows,
//   then has workgroups past the tiles, which return). bias / residual / norm are dummies when unused.
// Defines (py_engine/runtime/linear_plan.py: weight_defines): WEIGHTS names the format; kernels.py appends
//   shaders/weights/<format>.wgsl, whose weight_block(row, b, K, N) dequantizes block b of a
//   weight row, so this file never reads w itself. WBlock is w's element type (vec4<W> / W for
//   f32 and f16, u32 words for packed and quantized formats). VEC4 = (K % 4 == 0): then x and w
//   are read as blocks of four consecutive k (XBlock = vec4<f32>); otherwise (float formats
//   only) one k per block (XBlock = f32).
// Dispatch: ceil(rows / TILE) * ceil(N / TILE) workgroups of 256 threads, laid out by
//   linear_grid over x and y (x fastest) so that no dimension exceeds 65535. Each workgroup
//   computes one TILE x TILE block of y (rows x features), 4 x 4 outputs per thread, walking K
//   in TILE_K steps through shared memory (one vec4 of x and of w loaded per thread per step,
//   16 vec4 dot products per 8 shared vec4 reads). Consecutive workgroups take the row tiles of
//   one feature tile, so a weight tile is fetched from memory once and then hit in cache.
//   GATED: a tile's 64 weight rows are 32 gate rows and their 32 up rows (ceil(N / 2 / 32) feature
//   tiles); a thread's features tn, tn + 16 are gates, tn + 32, tn + 48 their ups. NORM: the
//   threads that stage a row's x also sum its squares; the row's scale multiplies its outputs.
struct Params { K: u32, N: u32, out_stride: u32, out_offset: u32, rows: u32, has_bias: u32, has_residual: u32,
                 norm_eps: f32, norm_offset: f32,
                 partials_at: u32, head_dim: u32, splits: u32, split_len: u32 }  // gemv.wgsl's COMBINE only

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<XBlock>;
@group(0) @binding(3) var<storage, read> w: array<WBlock>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
@group(0) @binding(7) var<storage, read> norm: array<XBlock>;

const TILE: u32 = MATMUL_TILE;  // output rows and features per workgroup (define, linear_plan.MATMUL_TILE)
const TILE_K: u32 = 16u;  // k per shared-memory stage: 64 rows x 16 k = one 4-wide load per thread
const SPREAD: u32 = 16u;  // a thread owns rows tr + 16 i and features tn + 16 j (i, j < 4)
// A tile row holds TILE_K / 4 = 4 quads of k plus one quad of padding: with a 5-quad stride the
// 8 threads of one 128-byte shared-memory access (tn .. tn + 7) hit 8 different bank groups.
const ROW_QUADS: u32 = TILE_K / 4u + 1u;

// Tiles are stored as whole quads (4 consecutive k), never a component at a time: threads writing
// different components of one vector race (WGSL counts a component write as a write of the whole
// vector; Metal and D3D really do read-modify-write it, gpuweb/gpuweb#2112). 2 x 5 KiB.
var<workgroup> x_tile: array<vec4<f32>, TILE * ROW_QUADS>;  // [row][k / 4]
var<workgroup> w_tile: array<vec4<f32>, TILE * ROW_QUADS>;  // [feature][k / 4]

// An activation block widened to f32; weight_block (the WEIGHTS snippet) returns the same shape.
// A one-k block (VEC4 false) is splatted, so its value is `.x`.
fn act_block(i: u32) -> vec4<f32> { return vec4<f32>(x[i]); }

// x[row, k .. k + 4] (w[n, k .. k + 4]) with zeros past the edges of the matrix; k % 4 == 0.
fn x_quad(row: u32, k: u32, rows: u32) -> vec4<f32> {
    var q = vec4<f32>(0.0);
    if (row < rows) {
        if (VEC4) {
            if (k < p.K) { q = act_block((row * p.K + k) / 4u); }
        } else {
            for (var j = 0u; j < 4u; j++) {
                if (k + j < p.K) { q[j] = act_block(row * p.K + k + j).x; }
            }
        }
    }
    return q;
}

// NORM: (norm[k .. k + 4] + norm_offset), zeros past K, like x_quad.
fn norm_quad(k: u32) -> vec4<f32> {
    var q = vec4<f32>(0.0);
    if (VEC4) {
        if (k < p.K) { q = vec4<f32>(norm[k / 4u]) + p.norm_offset; }
    } else {
        for (var j = 0u; j < 4u; j++) {
            if (k + j < p.K) { q[j] = vec4<f32>(norm[k + j]).x + p.norm_offset; }
        }
    }
    return q;
}

fn w_quad(n: u32, k: u32) -> vec4<f32> {
    var q = vec4<f32>(0.0);
    if (n < p.N) {
        if (VEC4) {
            if (k < p.K) { q = weight_block(n, k / 4u, p.K, p.N); }
        } else {
            for (var j = 0u; j < 4u; j++) {
                if (k + j < p.K) { q[j] = weight_block(n, k + j, p.K, p.N).x; }
            }
        }
    }
    return q;
}

// One row's 4 k against the 4 features' 4 k: the row's contribution to its 4 outputs.
fn dots(a: vec4<f32>, b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(a, b0), dot(a, b1), dot(a, b2), dot(a, b3));
}

// Row r's outputs for features n, n + 16, n + 32, n + 48 (GATED: n and n + 16, from their gates
// v.x, v.y and ups v.z, v.w).
fn write_row(r: u32, n: u32, rows: u32, v: vec4<f32>) {
    if (r >= rows) { return; }
    if (GATED) {
        for (var j = 0u; j < 2u; j++) {
            if (n + SPREAD * j < p.N / 2u) { write_gated(r, n + SPREAD * j, v[j], v[j + 2u]); }
        }
        return;
    }
    for (var j = 0u; j < 4u; j++) {
        if (n + SPREAD * j < p.N) { write_output(r, n + SPREAD * j, v[j]); }
    }
}

// GATED: the weight row behind tile feature f of the tile whose first output is n0.
fn tile_weight_row(n0: u32, f: u32) -> u32 {
    if (!GATED) { return n0 + f; }
    return select(n0 + f, p.N / 2u + n0 + f - TILE / 2u, f >= TILE / 2u);
}

// NORM: tile row r's RMS scale from the sums of squares its 4 loading threads left in x_tile.
fn row_scale(r: u32) -> f32 {
    let at = r * ROW_QUADS;
    let sum = (x_tile[at].x + x_tile[at + 1u].x) + (x_tile[at + 2u].x + x_tile[at + 3u].x);
    return inverseSqrt(sum / f32(p.K) + p.norm_eps);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let rows = select(select(p.rows, step.rows, p.rows == 0u), step.logit_rows, p.rows == LOGIT_ROWS);
    if (rows == 0u) { return; }
    let row_tiles = (rows + TILE - 1u) / TILE;
    let group = wid.x + wid.y * groups.x;
    let row0 = (group % row_tiles) * TILE;
    let n0 = (group / row_tiles) * select(TILE, TILE / 2u, GATED);
    if (n0 >= select(p.N, p.N / 2u, GATED)) { return; }  // the grid's last line may run past the tiles

    // Loading role: one quad of k of one row of x and of w (4 threads cover a row's TILE_K).
    let load_row = lid / 4u;
    let load_quad = lid % 4u;
    let load_at = load_row * ROW_QUADS + load_quad;
    // Computing role: rows tr + 16 i and features tn + 16 j of the tile. Spread rather than
    // adjacent, so the 16 tn of a warp read 16 consecutive (padded) tile rows.
    let tr = lid / SPREAD;
    let tn = lid % SPREAD;

    // acc_i[j]: row tr + 16 i, feature tn + 16 j. Named, not an array: drivers move a
    // dynamically indexed array to slow local memory.
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    // Each stage's global loads are issued before the previous stage is multiplied, hiding latency.
    let w_row = tile_weight_row(n0, load_row);
    var x_next = x_quad(row0 + load_row, 4u * load_quad, rows);
    var w_next = w_quad(w_row, 4u * load_quad);
    var squares = 0.0;  // NORM: this thread's share of its load_row's sum of squares
    for (var k0 = 0u; k0 < p.K; k0 += TILE_K) {
        if (NORM) {
            squares += dot(x_next, x_next);
            x_next *= norm_quad(k0 + 4u * load_quad);
        }
        x_tile[load_at] = x_next;
        w_tile[load_at] = w_next;
        workgroupBarrier();
        x_next = x_quad(row0 + load_row, k0 + TILE_K + 4u * load_quad, rows);
        w_next = w_quad(w_row, k0 + TILE_K + 4u * load_quad);
        for (var q = 0u; q < TILE_K / 4u; q++) {
            let b0 = w_tile[tn * ROW_QUADS + q];
            let b1 = w_tile[(tn + SPREAD) * ROW_QUADS + q];
            let b2 = w_tile[(tn + 2u * SPREAD) * ROW_QUADS + q];
            let b3 = w_tile[(tn + 3u * SPREAD) * ROW_QUADS + q];
            acc0 += dots(x_tile[tr * ROW_QUADS + q], b0, b1, b2, b3);
            acc1 += dots(x_tile[(tr + SPREAD) * ROW_QUADS + q], b0, b1, b2, b3);
            acc2 += dots(x_tile[(tr + 2u * SPREAD) * ROW_QUADS + q], b0, b1, b2, b3);
            acc3 += dots(x_tile[(tr + 3u * SPREAD) * ROW_QUADS + q], b0, b1, b2, b3);
        }
        workgroupBarrier();
    }
    if (NORM) {
        // The 4 threads of a load_row hold its sum of squares; x_tile is free after the last barrier.
        x_tile[load_at] = vec4<f32>(squares);
        workgroupBarrier();
        acc0 *= row_scale(tr);
        acc1 *= row_scale(tr + SPREAD);
        acc2 *= row_scale(tr + 2u * SPREAD);
        acc3 *= row_scale(tr + 3u * SPREAD);
    }

    write_row(row0 + tr, n0 + tn, rows, acc0);
    write_row(row0 + tr + SPREAD, n0 + tn, rows, acc1);
    write_row(row0 + tr + 2u * SPREAD, n0 + tn, rows, acc2);
    write_row(row0 + tr + 3u * SPREAD, n0 + tn, rows, acc3);
}
