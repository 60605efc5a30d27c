// Q5_1 (ggml block_q5_1): 24 bytes per 32 weights: f16 d at byte 0, f16 m at 2, u32 qh at 4
// (bit j = the 5th bit of weight j), 16 bytes of low nibbles at 8 (weight j < 16: low nibble
// of byte j; j >= 16: high nibble of byte j - 16). w = d * q + m. All fields word-aligned.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 32u) + b / 8u) * 24u;
    let j = 4u * (b % 8u);
    let dm = unpack2x16float(w[o / 4u]);
    let lo = byte_bits(w[(o + 8u + j % 16u) / 4u], 4u * (j / 16u), 15u);
    let hi = (vec4<u32>(w[o / 4u + 1u]) >> (vec4<u32>(0u, 1u, 2u, 3u) + j)) & vec4<u32>(1u);
    return dm.x * vec4<f32>(lo | (hi << vec4<u32>(4u))) + dm.y;
}
