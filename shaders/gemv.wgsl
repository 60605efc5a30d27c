// Linear layer for a few rows (decode): y[r, out_offset + n] = x[r, :] . w[n, :]
//                                        (+ bias[n] if has_bias) (+ residual[r, out_offset + n] if has_residual)
// Bindings (identical to matmul.wgsl; one bind group serves both):
//   0 step (uniform Step), 1 p (uniform Params),
//   2 x (read, f32 [rows, K]), 3 w (read, [N, K] weights in format WEIGHTS, as stored),
//   4 bias (read, f32 [N]), 5 residual (read, f32 [rows, out_stride]),
//   6 y (read_write, f32 [rows, out_stride]).
//   rows = p.rows, or step.rows when p.rows == 0. bias / residual are dummies when unused.
// Defines (py_engine/linear_plan.py: weight_defines): WEIGHTS names the format; kernels.py appends
//   shaders/weights/<format>.wgsl, whose weight_block(row, b, K, N) dequantizes block b of a
//   weight row, so this file never reads w itself. WBlock is w's element type (vec4<W> / W for
//   f32 and f16, u32 words for packed and quantized formats). VEC4 = (K % 4 == 0): then x and w
//   are read as blocks of four consecutive k (XBlock = vec4<f32>); otherwise (float formats
//   only) one k per block (XBlock = f32).
// Dispatch: ceil(N / FEATURES_PER_GROUP) workgroups of 256 threads, laid out by linear_grid
//   over x and y (x fastest) so that no dimension exceeds 65535. Each workgroup owns
//   FEATURES_PER_GROUP output features for every row: LANES threads stride along each weight
//   row (coalesced loads), then a shared-memory tree sums their partial dots. Up to GEMV_ROWS
//   rows share each weight load; more rows take one more pass per GEMV_ROWS.
struct Params { K: u32, N: u32, out_stride: u32, out_offset: u32, rows: u32, has_bias: u32, has_residual: u32, pad: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<XBlock>;
@group(0) @binding(3) var<storage, read> w: array<WBlock>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

// 32 threads walk one weight row together: each warp-sized load is one contiguous segment.
const LANES: u32 = 32u;
const FEATURES_PER_GROUP: u32 = 8u;  // 8 x 32 = 256 threads; keep in step with linear_plan.py
const GEMV_ROWS: u32 = 8u;           // rows per pass over the weights; keep in step with linear_plan.py
const THREADS: u32 = LANES * FEATURES_PER_GROUP;

var<workgroup> partial: array<f32, GEMV_ROWS * THREADS>;  // [row][thread] partial dot products

// An activation block widened to f32; weight_block (the WEIGHTS snippet) returns the same shape.
// A one-k block (VEC4 false) is splatted, so its value is `.x`.
fn act_block(i: u32) -> vec4<f32> { return vec4<f32>(x[i]); }

fn block_dot(wv: vec4<f32>, xv: vec4<f32>) -> f32 {
    if (VEC4) { return dot(wv, xv); }
    return wv.x * xv.x;
}

// One weight block times the same block of each row in the pass (x block index `at` for the
// first, + `blocks` per row). Eight named accumulators, not an indexed array: drivers move a
// dynamically indexed array to slow local memory.
fn accumulate_rows(lo: ptr<function, vec4<f32>>, hi: ptr<function, vec4<f32>>, wv: vec4<f32>,
                   at: u32, blocks: u32, pass_rows: u32) {
    (*lo).x += block_dot(wv, act_block(at));
    if (pass_rows > 1u) { (*lo).y += block_dot(wv, act_block(at + blocks)); }
    if (pass_rows > 2u) { (*lo).z += block_dot(wv, act_block(at + 2u * blocks)); }
    if (pass_rows > 3u) { (*lo).w += block_dot(wv, act_block(at + 3u * blocks)); }
    if (pass_rows > 4u) { (*hi).x += block_dot(wv, act_block(at + 4u * blocks)); }
    if (pass_rows > 5u) { (*hi).y += block_dot(wv, act_block(at + 5u * blocks)); }
    if (pass_rows > 6u) { (*hi).z += block_dot(wv, act_block(at + 6u * blocks)); }
    if (pass_rows > 7u) { (*hi).w += block_dot(wv, act_block(at + 7u * blocks)); }
}

fn write_output(r: u32, n: u32, dot_value: f32) {
    let at = r * p.out_stride + p.out_offset + n;
    var v = dot_value;
    if (p.has_bias != 0u) { v += bias[n]; }
    if (p.has_residual != 0u) { v += residual[at]; }
    y[at] = v;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let rows = select(p.rows, step.rows, p.rows == 0u);
    let group = wid.x + wid.y * groups.x;
    let slot = lid / LANES;
    let lane = lid % LANES;
    let n = group * FEATURES_PER_GROUP + slot;
    let blocks = select(p.K, p.K / 4u, VEC4);  // blocks per row of x and of w
    // Features past N (in the last workgroup) load nothing but still reach every barrier.
    let my_blocks = select(0u, blocks, n < p.N);

    for (var row0 = 0u; row0 < rows; row0 += GEMV_ROWS) {
        let pass_rows = min(GEMV_ROWS, rows - row0);
        let x_row = row0 * blocks;
        // Initialised explicitly: naga zeroes a bare loop-local `var` only once (gfx-rs/wgpu#9489).
        var acc_lo = vec4<f32>(0.0);  // rows row0 .. row0 + 3
        var acc_hi = vec4<f32>(0.0);  // rows row0 + 4 .. row0 + 7
        if (pass_rows == 1u) {
            // Decode. Without the per-row branches the loop is one basic block, and two loads
            // per thread are in flight: about twice the general loop's speed on an H100 / H200.
            var b = lane;
            for (; b + LANES < my_blocks; b += 2u * LANES) {
                let w0 = weight_block(n, b, p.K, p.N);
                let w1 = weight_block(n, b + LANES, p.K, p.N);
                acc_lo.x += block_dot(w0, act_block(x_row + b)) + block_dot(w1, act_block(x_row + b + LANES));
            }
            if (b < my_blocks) { acc_lo.x += block_dot(weight_block(n, b, p.K, p.N), act_block(x_row + b)); }
        } else {
            for (var b = lane; b < my_blocks; b += LANES) {
                accumulate_rows(&acc_lo, &acc_hi, weight_block(n, b, p.K, p.N), x_row + b, blocks, pass_rows);
            }
        }
        let lo = acc_lo;
        let hi = acc_hi;
        for (var r = 0u; r < pass_rows; r++) {
            partial[r * THREADS + lid] = select(hi[r % 4u], lo[r % 4u], r < 4u);
        }
        workgroupBarrier();
        // Tree reduction over the LANES threads of each feature.
        for (var stride = LANES / 2u; stride > 0u; stride >>= 1u) {
            if (lane < stride) {
                for (var r = 0u; r < pass_rows; r++) {
                    partial[r * THREADS + lid] += partial[r * THREADS + lid + stride];
                }
            }
            workgroupBarrier();
        }
        // Lane r of each feature writes row row0 + r.
        if (lane < pass_rows && n < p.N) {
            write_output(row0 + lane, n, partial[lane * THREADS + slot * LANES]);
        }
        workgroupBarrier();  // `partial` is rewritten by the next pass
    }
}
