// Embedding gather: y[r, :] = w[ids[r] - row_start, :] * scale, for the rows whose id lies in
// this shard [row_start, row_start + row_count). A vocabulary larger than one storage binding is
// split into shards along the vocabulary; one dispatch per shard, each writes only its own ids.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 ids (read, u32 [rows]),
//           3 w (read, [row_count, dim] weights in format WEIGHTS, as stored),
//           4 y (read_write, f32 [rows, dim]).
// Defines (py_engine/runtime/linear_plan.py: weight_defines(dim, format)), as for gemv.wgsl: kernels.py
//   appends shaders/weights/<WEIGHTS>.wgsl, whose weight_block(row, b, K, N) dequantizes block b
//   of a table row (4 consecutive columns when VEC4, else one); WBlock is w's element type.
// BY_POSITION (optional define): ids holds an id for every position of the context, and row r
//   takes the one of its position (step.pos + r): a vision-language model's picture tokens take
//   rows of its image embeddings (an f32 table; GraphBuilder.splice_images; 0xffffffff: a text
//   position, which keeps its token embedding).
//#optional BY_POSITION
// Dispatch: (ceil(dim / 256), step.rows, 1) workgroups of 256 threads, one element each. A thread
//   dequantizes its element's whole block and keeps one lane: the gather is a tiny part of a
//   forward, and one element per thread keeps every shard's dispatch the same.
struct Params { dim: u32, row_start: u32, row_count: u32, scale: f32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read> w: array<WBlock>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let col = gid.x;
    if (row >= step.rows || col >= p.dim) { return; }
//#if BY_POSITION
    let id = ids[step.pos + row];
//#else
    let id = ids[row];
//#endif
    if (id < p.row_start || id >= p.row_start + p.row_count) { return; }
    let block = weight_block(id - p.row_start, select(col, col / 4u, VEC4), p.dim, p.row_count);
    y[row * p.dim + col] = select(block.x, block[col % 4u], VEC4) * p.scale;
}
