// y[r, n] = Σ_k x[r, k] · w[k, n]: rows of x times a weight stored [K, N] row-major, a torch.matmul
// operand where nn.Linear's (matmul.wgsl's, gemv.wgsl's) are [N, K]: Gemma 3's
// mm_input_projection_weight, [vision hidden, text hidden] as the checkpoint holds it. Its rows are
// read as a table's (shaders/weights/: weight_block(k, block, N, K), a row of N columns), so every
// format the embedding gather reads works, with no transposed copy. A thread's 4 columns of w are one
// block (VEC4) or 4 one-column blocks, consecutive across a workgroup's threads: each k's loads of a
// workgroup are one contiguous run of w's row k. A vision projection's work a picture (Gemma 3 4B:
// 256 x 1152 x 2560) is a small part of its tower's, so there is no tiling beyond that.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read, f32 [rows, k]),
//           3 w (read, [k, n] weights in format WEIGHTS, as stored), 4 y (read_write, f32 [rows, n]).
// Defines: linear_plan.weight_defines(n, format), as for embedding.wgsl (WEIGHTS appends its snippet).
// Dispatch: (ceil(n / (4 * 64)), ceil(p.rows / ROWS), 1) workgroups of 64 threads; thread t of
//           workgroup (i, j) computes columns 4 (64 i + t) .. + 3 of rows ROWS j .. ROWS j + ROWS - 1
//           (p.rows: a fixed count, the forward's rows being another stage's).
struct Params { k: u32, n: u32, rows: u32, pad0: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<WBlock>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

const ROWS: u32 = 4u;

// x[r, k], 0 past the rows (their outputs are not written).
fn x_at(r: u32, k: u32) -> f32 {
    if (r >= p.rows) { return 0.0; }
    return x[r * p.k + k];
}

// Columns c .. c + 3 of w's row k (0 past n).
fn w_cols(k: u32, c: u32) -> vec4<f32> {
    if (VEC4) { return weight_block(k, c / 4u, p.n, p.k); }
    var v = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        if (c + i < p.n) { v[i] = weight_block(k, c + i, p.n, p.k).x; }
    }
    return v;
}

fn write_row(r: u32, c: u32, v: vec4<f32>) {
    if (r >= p.rows) { return; }
    for (var i = 0u; i < 4u; i++) {
        if (c + i < p.n) { y[r * p.n + c + i] = v[i]; }
    }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = 4u * gid.x;
    let r = ROWS * gid.y;
    if (c >= p.n || r >= p.rows) { return; }
    // The rows' sums as named vectors, not an array indexed by row (kept in registers).
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    for (var k = 0u; k < p.k; k++) {
        let wk = w_cols(k, c);
        a0 += x_at(r, k) * wk;
        a1 += x_at(r + 1u, k) * wk;
        a2 += x_at(r + 2u, k) * wk;
        a3 += x_at(r + 3u, k) * wk;
    }
    write_row(r, c, a0);
    write_row(r + 1u, c, a1);
    write_row(r + 2u, c, a2);
    write_row(r + 3u, c, a3);
}
