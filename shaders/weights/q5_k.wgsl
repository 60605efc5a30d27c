// Q5_K (ggml block_q5_K): 176 bytes per 256 weights in 8 sub-blocks of 32: f16 d at byte 0,
// f16 dmin at 2, 12 bytes of 6-bit sub-block scales and mins at 4 (k_scales.wgsl), 32 bytes qh
// at 16 (bit s of byte i = the 5th bit of weight 32s + i), 128 bytes of low nibbles at 48 laid
// out as Q4_K's. w = (d * sc) * q - (dmin * m), the products first as in ggml.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 256u) + b / 64u) * 176u;
    let j = 4u * (b % 64u);
    let s = j / 32u;  // sub-block
    let dm = unpack2x16float(w[o / 4u]);
    let sm = k_scale_min(o + 4u, s);
    let lo = byte_bits(w[(o + 48u + 32u * (j / 64u) + j % 32u) / 4u], 4u * (s % 2u), 15u);
    let hi = byte_bits(w[(o + 16u + j % 32u) / 4u], s, 1u);
    return (dm.x * sm.x) * vec4<f32>(lo | (hi << vec4<u32>(4u))) - (dm.y * sm.y);
}
