// Q5_0 (ggml block_q5_0): 22 bytes per 32 weights: f16 d at byte 0, u32 qh at 2 (bit j = the
// 5th bit of weight j), 16 bytes of low nibbles at 6 (weight j < 16: low nibble of byte j;
// j >= 16: high nibble of byte j - 16). w = (q - 16) * d.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 32u) + b / 8u) * 22u;
    let j = 4u * (b % 8u);
    let lo = byte_bits(w_u32(o + 6u + j % 16u), 4u * (j / 16u), 15u);
    let hi = (vec4<u32>(w_u32(o + 2u)) >> (vec4<u32>(0u, 1u, 2u, 3u) + j)) & vec4<u32>(1u);
    return (vec4<f32>(lo | (hi << vec4<u32>(4u))) - 16.0) * w_f16(o);
}
