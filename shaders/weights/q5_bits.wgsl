// Q5_0 / Q5_1: weights j .. j + 3 of a block, from 4 low nibbles (bits `shift` of the bytes of
// quant word v) and their 5th bits (bits j .. j + 3 of the block's qh word).
// `offset` is subtracted (Q5_0's 16, or 0).
fn q5_values(v: u32, shift: u32, qh: u32, j: u32, offset: f32) -> vec4<f32> {
    let hi = (vec4<u32>(qh) >> (vec4<u32>(0u, 1u, 2u, 3u) + j)) & vec4<u32>(1u);
    return magic_f32(byte_bits(v, shift, 15u) | (hi << vec4<u32>(4u)), offset);
}
