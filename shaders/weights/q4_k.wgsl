// Q4_K (ggml block_q4_K): 144 bytes per 256 weights in 8 sub-blocks of 32: f16 d at byte 0,
// f16 dmin at 2, 12 bytes of 6-bit sub-block scales and mins at 4 (k_scales.wgsl), 128 bytes of
// nibbles at 16: weights 64g + i (i < 32) are the low nibbles of bytes 32g + i, weights
// 64g + 32 + i their high nibbles. w = (d * sc) * q - (dmin * m), the products first as in ggml.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 256u) + b / 64u) * 144u;
    let j = 4u * (b % 64u);
    let dm = unpack2x16float(w[o / 4u]);
    let sm = k_scale_min(o + 4u, j / 32u);
    let q = byte_bits(w[(o + 16u + 32u * (j / 64u) + j % 32u) / 4u], 4u * ((j / 32u) % 2u), 15u);
    return (dm.x * sm.x) * vec4<f32>(q) - (dm.y * sm.y);
}
