// Q8_0 (ggml block_q8_0): 34 bytes per 32 weights: f16 d at byte 0, int8 q[32] at 2. w = q * d.
// A 4-weight block is 4 bytes at 2 + 4i, straddling two words in every other ggml block.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 32u) + b / 8u) * 34u;
    // Sign-extend each byte: move it to the top, then shift back arithmetically.
    let q = bitcast<vec4<i32>>(vec4<u32>(w_u32(o + 2u + 4u * (b % 8u))) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u);
    return vec4<f32>(q) * w_f16(o);
}
