// MLX affine 4-bit (mlx.core.quantize, bits=4, group size MLX_GROUP). One binding of N rows
// holds three sections back to back: packed weights (N x K/8 u32 words; weight k of a row is
// bits 4 (k % 8) of word k / 8), then scales (N x K/G 16-bit, from byte N K / 2), then biases
// (N x K/G 16-bit; only 2-aligned). mlx_half (mlx4_f16.wgsl / mlx4_bf16.wgsl) decodes the
// 16-bit values. w = scale * q + bias.
fn mlx_scale_bias(row: u32, k: u32, K: u32, N: u32) -> vec2<f32> {
    let groups = K / MLX_GROUP;
    let g = row * groups + k / MLX_GROUP;  // the group of weight k, counted over the binding
    let scales = N * (K / 8u) * 4u;        // byte offsets of the sections
    let biases = scales + N * groups * 2u;
    return vec2<f32>(mlx_half(w_u16(scales + 2u * g)), mlx_half(w_u16(biases + 2u * g)));
}

fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let word = w_word(row * (K / 8u) + b / 2u);
    let q = (vec4<u32>(word) >> (vec4<u32>(0u, 4u, 8u, 12u) + 16u * (b % 2u))) & vec4<u32>(15u);
    let sb = mlx_scale_bias(row, 4u * b, K, N);
    return sb.x * vec4<f32>(q) + sb.y;
}
// units
const UNIT: u32 = 32u;  // four packed words: one 16-byte load (rows start 16-aligned: K % 32 == 0)
const UNIT_QUADS: u32 = 8u;

fn unit_x(u: u32, x_row: u32, xs: ptr<function, array<vec4<f32>, UNIT_QUADS>>) { x_quads(x_row + 8u * u, xs); }

fn unit_dot(row: u32, u: u32, K: u32, N: u32, xs: ptr<function, array<vec4<f32>, UNIT_QUADS>>) -> f32 {
    let q = w_vec4(16u * (row * (K / 32u) + u));
    var s = 0.0;
    for (var t = 0u; t < 4u; t++) {
        let lo = (vec4<u32>(q[t]) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u);
        let hi = (vec4<u32>(q[t]) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u);
        s += dot(vec4<f32>(lo), (*xs)[2u * t]) + dot(vec4<f32>(hi), (*xs)[2u * t + 1u]);
    }
    let x_sum = quads_sum((*xs)[0], (*xs)[1], (*xs)[2], (*xs)[3]) + quads_sum((*xs)[4], (*xs)[5], (*xs)[6], (*xs)[7]);
    let sb = mlx_scale_bias(row, 32u * u, K, N);
    return sb.x * s + sb.y * x_sum;
}
