// Average pooling of a square patch grid (torch's AvgPool2d(kernel, stride=kernel) over the grid, as
// Gemma 3's multi-modal projector pools its vision tower's output): token t of the (side / kernel)^2
// tokens, row-major, is the mean of the kernel x kernel patches (kernel t_row + i, kernel t_col + j)
// of the side x side grid (row-major rows of x), summed row by row (i, then j) and divided by
// kernel^2, as torch's CPU kernel sums and divides.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read, f32 [side^2, dim]),
//           3 y (read_write, f32 [tokens, dim]).
// Dispatch: (ceil(dim / 256), tokens, 1) workgroups of 256 threads, one element each (a fixed grid:
//           the forward's rows are the patches, the tokens are fewer).
struct Params { dim: u32, side: u32, kernel: u32, tokens: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let d = gid.x;
    let t = gid.y;
    if (d >= p.dim || t >= p.tokens) { return; }
    let per_side = p.side / p.kernel;
    let top = (t / per_side) * p.kernel;
    let left = (t % per_side) * p.kernel;
    var sum = 0.0;
    for (var i = 0u; i < p.kernel; i++) {
        for (var j = 0u; j < p.kernel; j++) {
            sum += x[((top + i) * p.side + left + j) * p.dim + d];
        }
    }
    y[t * p.dim + d] = sum / f32(p.kernel * p.kernel);
}
