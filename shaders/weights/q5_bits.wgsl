// Q5_0 / Q5_1: weights j .. j + 3 of a block, from 4 low nibbles (bits `shift` of the bytes of
// quant word v) and their 5th bits (bits j .. j + 3 of the block's qh word).
// `offset` is subtracted (Q5_0's 16, or 0).
fn q5_values(v: u32, shift: u32, qh: u32, j: u32, offset: f32) -> vec4<f32> {
    let hi = (vec4<u32>(qh) >> (vec4<u32>(0u, 1u, 2u, 3u) + j)) & vec4<u32>(1u);
    return magic_f32(byte_bits(v, shift, 15u) | (hi << vec4<u32>(4u)), offset);
}
// units
// A unit's quad of low nibbles q and its qh word against x blocks 0 .. 7 from slot xs, minus
// `offset` (word t: weights 4t .. 4t + 3 and 16 + 4t ..; four calls, as bytes.wgsl's nibble_quad_dot).
fn q5_quad_dot(q: vec4<u32>, qh: u32, xs: u32, offset: f32) -> f32 {
    return (q5_word_dot(q.x, qh, xs, 0u, offset) + q5_word_dot(q.y, qh, xs, 1u, offset))
         + (q5_word_dot(q.z, qh, xs, 2u, offset) + q5_word_dot(q.w, qh, xs, 3u, offset));
}

fn q5_word_dot(v: u32, qh: u32, xs: u32, t: u32, offset: f32) -> f32 {
    return dot(q5_values(v, 0u, qh, 4u * t, offset), act_at(xs, t)) + dot(q5_values(v, 4u, qh, 16u + 4u * t, offset), act_at(xs, 4u + t));
}
