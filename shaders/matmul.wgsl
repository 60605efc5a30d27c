// Linear layer for many rows (prefill): y[r, out_offset + n] = x[r, :] . w[n, :]
//                                        (+ bias[n] if has_bias) (+ residual[r, out_offset + n] if has_residual)
// Bindings (identical to gemv.wgsl; one bind group serves both):
//   0 step (uniform Step), 1 p (uniform Params),
//   2 x (read, f32 [rows, K]), 3 w (read, W [N, K]), 4 bias (read, f32 [N]),
//   5 residual (read, f32 [rows, out_stride]), 6 y (read_write, f32 [rows, out_stride]).
//   rows = p.rows, or step.rows when p.rows == 0. bias / residual are dummies when unused.
// Defines (py_engine/linear_plan.py: linear_defines): W, the weight element: f32 or 16-bit
//   floats (never spelt out here: kernels.py enables that extension when the source names it).
//   VEC4 = (K % 4 == 0): then x and w are read as blocks of four consecutive k
//   (XBlock = vec4<f32>, WBlock = vec4<W>); otherwise one k per block (XBlock = f32, WBlock = W).
// Dispatch: ceil(rows / TILE) * ceil(N / TILE) workgroups of 256 threads, laid out by
//   linear_grid over x and y (x fastest) so that no dimension exceeds 65535. Each workgroup
//   computes one TILE x TILE block of y (rows x features), 4 x 4 outputs per thread, walking K
//   in TILE_K steps through shared memory. Consecutive workgroups take the row tiles of one
//   feature tile, so a weight tile is fetched from memory once and then hit in cache.
struct Params { K: u32, N: u32, out_stride: u32, out_offset: u32, rows: u32, has_bias: u32, has_residual: u32, pad: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<XBlock>;
@group(0) @binding(3) var<storage, read> w: array<WBlock>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;

const TILE: u32 = 64u;    // output rows and features per workgroup; keep in step with linear_plan.py
const TILE_K: u32 = 16u;  // k per shared-memory stage: 64 rows x 16 k = one 4-wide load per thread
const QUADS: u32 = TILE / 4u;

// k-major, so the 4 rows (or 4 features) a thread multiplies are one vec4 read. 2 x 4 KiB.
var<workgroup> x_tile: array<vec4<f32>, TILE_K * QUADS>;  // [k][row / 4]
var<workgroup> w_tile: array<vec4<f32>, TILE_K * QUADS>;  // [k][feature / 4]

// A block widened to f32. A one-k block (VEC4 false) is splatted, so its value is `.x`.
fn weight_block(i: u32) -> vec4<f32> { return vec4<f32>(vec4<W>(w[i])); }
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

fn w_quad(n: u32, k: u32) -> vec4<f32> {
    var q = vec4<f32>(0.0);
    if (n < p.N) {
        if (VEC4) {
            if (k < p.K) { q = weight_block((n * p.K + k) / 4u); }
        } else {
            for (var j = 0u; j < 4u; j++) {
                if (k + j < p.K) { q[j] = weight_block(n * p.K + k + j).x; }
            }
        }
    }
    return q;
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
    if (rows == 0u) { return; }
    let row_tiles = (rows + TILE - 1u) / TILE;
    let group = wid.x + wid.y * groups.x;
    let row0 = (group % row_tiles) * TILE;
    let n0 = (group / row_tiles) * TILE;
    if (n0 >= p.N) { return; }  // the grid's last line may run past the tiles

    // Loading role: 4 consecutive k of one row of x and one row of w (4 threads cover a row).
    let load_row = lid / 4u;
    let load_k = (lid % 4u) * 4u;
    // Computing role: rows row0 + 4 * tr .. + 4, features n0 + 4 * tn .. + 4.
    let tr = lid / QUADS;
    let tn = lid % QUADS;

    var acc: array<vec4<f32>, 4>;  // acc[i][j]: row 4 * tr + i, feature 4 * tn + j
    // Each stage's global loads are issued before the previous stage is multiplied, hiding latency.
    var x_next = x_quad(row0 + load_row, load_k, rows);
    var w_next = w_quad(n0 + load_row, load_k);
    for (var k0 = 0u; k0 < p.K; k0 += TILE_K) {
        for (var j = 0u; j < 4u; j++) {
            x_tile[(load_k + j) * QUADS + load_row / 4u][load_row % 4u] = x_next[j];
            w_tile[(load_k + j) * QUADS + load_row / 4u][load_row % 4u] = w_next[j];
        }
        workgroupBarrier();
        x_next = x_quad(row0 + load_row, k0 + TILE_K + load_k, rows);
        w_next = w_quad(n0 + load_row, k0 + TILE_K + load_k);
        for (var kk = 0u; kk < TILE_K; kk++) {
            let a = x_tile[kk * QUADS + tr];
            let b = w_tile[kk * QUADS + tn];
            acc[0] += a.x * b;
            acc[1] += a.y * b;
            acc[2] += a.z * b;
            acc[3] += a.w * b;
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < 4u; i++) {
        let r = row0 + 4u * tr + i;
        for (var j = 0u; j < 4u; j++) {
            let n = n0 + 4u * tn + j;
            if (r < rows && n < p.N) { write_output(r, n, acc[i][j]); }
        }
    }
}
