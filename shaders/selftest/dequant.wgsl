// Self-test: a weight format's dequantization on its own, exactly as the GEMV / matmul /
// embedding kernels call it: kernels.py appends shaders/weights/<WEIGHTS>.wgsl, whose
// weight_block(row, b, K, N) turns block b (4 consecutive k) of weight row `row` into floats.
// y[row * K + 4 b .. + 4] = weight_block(row, b, K, N).
// Bindings: 0 p (uniform Params), 1 w (read, the weight bytes as the kernels read them: repacked
//           where the format has a repack, in 16-byte words),
//           2 y (read_write, vec4<f32> [N * K / 4]).
// Dispatch: (ceil(N * K / 4 / 64), 1, 1) workgroups of 64 threads, one block each.
// Defines: WEIGHTS (a non-float format: its snippet reads `w` as 16-byte words).
struct Params { K: u32, N: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let blocks = p.K / 4u;
    let i = gid.x;
    if (i >= p.N * blocks) { return; }
    y[i] = weight_block(i / blocks, i % blocks, p.K, p.N);
}
