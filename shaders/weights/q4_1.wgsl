// Q4_1 (ggml block_q4_1): 20 bytes per 32 weights: f16 d at byte 0, f16 m at 2, 16 bytes of
// nibbles at 4 (weight j < 16: low nibble of byte j; j >= 16: high nibble of byte j - 16).
// w = d * q + m. 20-byte blocks keep every field word-aligned.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 32u) + b / 8u) * 20u;
    let j = 4u * (b % 8u);
    let dm = unpack2x16float(w[o / 4u]);
    let q = byte_bits(w[(o + 4u + j % 16u) / 4u], 4u * (j / 16u), 15u);
    return dm.x * vec4<f32>(q) + dm.y;
}
