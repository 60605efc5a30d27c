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
const X_PAD: u32 = 8u;  // x blocks from one unit's activations to the next's
// f32 units

// Word t holds weights 8t .. 8t + 7, weight 8t + k at bits 4k: byte j's nibbles are 2j, 2j + 1.
fn mlx4_step(v: u32, xs: u32, t: u32) -> Nibbles {
    let xa = act_at(xs, 2u * t);
    let xb = act_at(xs, 2u * t + 1u);
    return nibble_products(v, vec4<f32>(xa.xz, xb.xz), vec4<f32>(xa.yw, xb.yw), 0.0);
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let q = w_vec4(16u * (row * (K / 32u) + u));
    let x0 = x_row + 8u * u;
    let xs = act_slot(x0);
    // Four calls with constant t, not a loop: NVIDIA's compiler leaves such loops rolled (bytes.wgsl's nibble_quad_dot).
    let n = nibbles_sum(mlx4_step(q.x, xs, 0u), mlx4_step(q.y, xs, 1u), mlx4_step(q.z, xs, 2u), mlx4_step(q.w, xs, 3u));
    let sb = mlx_scale_bias(row, 32u * u, K, N);
    return sb.x * (dot(n.lo, LO_SCALE) + dot(n.hi, HI_SCALE)) + sb.y * act_sum32(x0);
}
// int8 units
// Word t against int8 x blocks 2t (the evens of x 8t .. 8t + 7: gemv.wgsl Q8_EVEN_ODD) and 2t + 1
// (the odds): the low nibbles of its bytes, then the high ones.
fn mlx4_step8(v: u32, xs: u32, t: u32) -> i32 {
    return act_dot(v & NIBBLES, xs, 2u * t) + act_dot((v >> 4u) & NIBBLES, xs, 2u * t + 1u);
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let q = w_vec4(16u * (row * (K / 32u) + u));
    let x0 = x_row + 8u * u;
    let xs = act_slot(x0);
    let s = (mlx4_step8(q.x, xs, 0u) + mlx4_step8(q.y, xs, 1u)) + (mlx4_step8(q.z, xs, 2u) + mlx4_step8(q.w, xs, 3u));
    let sb = mlx_scale_bias(row, 32u * u, K, N);
    return sb.x * (act_scale32(x0) * f32(s)) + sb.y * act_sum32(x0);
}
