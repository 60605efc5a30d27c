// A learned table of position embeddings resampled to a picture's patch grid: each row the weighted sum
// of TAPS table rows, y[r, :] = sum_j weights[r, j] * w[taps[r, j], :], summed tap after tap (Qwen3.5's
// ViT: transformers' bilinear, align-corners resampling of its square grid of position embeddings to
// the picture's grid, whose taps and f32 weights py_engine/vision/qwen3_5_grid.py computes on the host
// as transformers does).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 taps (read, u32 [rows, TAPS]: table rows),
//           3 weights (read, f32 [rows, TAPS]), 4 w (read, [p.row_count, p.dim] weights in format
//           WEIGHTS, as stored), 5 y (read_write, f32 [rows, p.dim]).
// Defines (py_engine/runtime/linear_plan.py: weight_defines(dim, format)), as embedding.wgsl's: kernels.py
//   appends shaders/weights/<WEIGHTS>.wgsl, whose weight_block(row, b, K, N) dequantizes block b of a
//   table row (4 consecutive columns when VEC4, else one).
// Dispatch: (ceil(p.dim / 256), step.rows, 1) workgroups of 256 threads, one element each.
struct Params { dim: u32, row_count: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> taps: array<u32>;
@group(0) @binding(3) var<storage, read> weights: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<WBlock>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

const TAPS: u32 = 4u;  // bilinear: 2 x 2 table rows a patch

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let col = gid.x;
    if (row >= step.rows || col >= p.dim) { return; }
    var sum = 0.0;
    for (var j = 0u; j < TAPS; j++) {
        let tap = min(taps[row * TAPS + j], p.row_count - 1u);  // the host's taps are in range; a bound anyway
        let block = weight_block(tap, select(col, col / 4u, VEC4), p.dim, p.row_count);
        sum += weights[row * TAPS + j] * select(block.x, block[col % 4u], VEC4);
    }
    y[row * p.dim + col] = sum;
}
