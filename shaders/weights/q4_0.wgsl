// Q4_0 (ggml block_q4_0): 18 bytes per 32 weights: f16 d at byte 0, 16 bytes of nibbles at 2;
// weight j < 16 is the low nibble of byte j, weight j >= 16 the high nibble of byte j - 16.
// w = (q - 8) * d.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 32u) + b / 8u) * 18u;
    let j = 4u * (b % 8u);  // the block's first weight within the ggml block
    let q = byte_bits(w_u32(o + 2u + j % 16u), 4u * (j / 16u), 15u);
    return (vec4<f32>(q) - 8.0) * w_f16(o);
}
