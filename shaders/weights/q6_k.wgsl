// Q6_K (ggml block_q6_K): 210 bytes per 256 weights: ql[128] at byte 0, qh[64] at 128, int8
// scales[16] at 192 (one per 16 weights), f16 d at 208. Weight j = 128h + 32t + i (h < 2,
// t < 4, i < 32): low 4 bits = nibble t / 2 of ql byte 64h + 32 (t % 2) + i, high 2 bits = bits
// 2t of qh byte 32h + i. w = (d * scale) * (q - 32). 210-byte blocks are only 2-aligned.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 256u) + b / 64u) * 210u;
    let j = 4u * (b % 64u);
    let h = j / 128u;
    let t = (j / 32u) % 4u;
    let i = j % 32u;
    let lo = byte_bits(w_u32(o + 64u * h + 32u * (t % 2u) + i), 4u * (t / 2u), 15u);
    let hi = byte_bits(w_u32(o + 128u + 32u * h + i), 2u * t, 3u);
    let scale = f32(bitcast<i32>(w_u8(o + 192u + j / 16u) << 24u) >> 24u);
    return (w_f16(o + 208u) * scale) * (vec4<f32>(lo | (hi << vec4<u32>(4u))) - 32.0);
}
