// MLX affine 4-bit (mlx.core.quantize, bits=4, group size MLX_GROUP). One binding of N rows
// holds three sections back to back: packed weights (N x K/8 u32 words; weight k of a row is
// bits 4 (k % 8) of word k / 8), then scales (N x K/G 16-bit, from byte N K / 2), then biases
// (N x K/G 16-bit; only 2-aligned). mlx_half (mlx4_f16.wgsl / mlx4_bf16.wgsl) decodes the
// 16-bit values. w = scale * q + bias.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let groups = K / MLX_GROUP;
    let g = row * groups + 4u * b / MLX_GROUP;        // this block's group, counted over the binding
    let scales = N * (K / 8u) * 4u;                   // byte offsets of the sections
    let biases = scales + N * groups * 2u;
    let word = w[row * (K / 8u) + b / 2u];
    let q = (vec4<u32>(word) >> (vec4<u32>(0u, 4u, 8u, 12u) + 16u * (b % 2u))) & vec4<u32>(15u);
    return mlx_half(w_u16(scales + 2u * g)) * vec4<f32>(q) + mlx_half(w_u16(biases + 2u * g));
}
