// Q5_0 / Q5_1: weights j .. j + 3 of a block, from 4 low nibbles (bits `shift` of the bytes of
// quant word v) and their 5th bits (bits j .. j + 3 of the block's qh word).
// `offset` is subtracted (Q5_0's 16, or 0).
fn q5_values(v: u32, shift: u32, qh: u32, j: u32, offset: f32) -> vec4<f32> {
    let hi = (vec4<u32>(qh) >> (vec4<u32>(0u, 1u, 2u, 3u) + j)) & vec4<u32>(1u);
    return magic_f32(byte_bits(v, shift, 15u) | (hi << vec4<u32>(4u)), offset);
}
// units
// f32 units
// A unit's quad of low nibbles q and its qh word against x blocks 0 .. 7 from slot xs, minus
// `offset` (word t: weights 4t .. 4t + 3 and 16 + 4t ..; four calls, as bytes.wgsl's nibble_quad_dot).
fn q5_quad_dot(q: vec4<u32>, qh: u32, xs: u32, offset: f32) -> f32 {
    return (q5_word_dot(q.x, qh, xs, 0u, offset) + q5_word_dot(q.y, qh, xs, 1u, offset))
         + (q5_word_dot(q.z, qh, xs, 2u, offset) + q5_word_dot(q.w, qh, xs, 3u, offset));
}

fn q5_word_dot(v: u32, qh: u32, xs: u32, t: u32, offset: f32) -> f32 {
    return dot(q5_values(v, 0u, qh, 4u * t, offset), act_at(xs, t)) + dot(q5_values(v, 4u, qh, 16u + 4u * t, offset), act_at(xs, 4u + t));
}
// int8 units
// Int8 x (gemv.wgsl Q8_ACT): qh bits j .. j + 3 as bit 4 of bytes 0 .. 3. One multiply spreads
// them: the four shifted copies of the 4 bits (by 4, 11, 18, 25) do not overlap, so nothing carries.
fn q5_high4(qh: u32, j: u32) -> u32 { return (((qh >> j) & 15u) * 0x02040810u) & 0x10101010u; }

// Word t of the quad (weights 4t .. and 16 + 4t .., 5 bits each, offset not applied) against the
// int8 x blocks t and 4 + t.
fn q5_word_dot8(v: u32, qh: u32, xs: u32, t: u32) -> i32 {
    return act_dot((v & NIBBLES) | q5_high4(qh, 4u * t), xs, t)
         + act_dot(((v >> 4u) & NIBBLES) | q5_high4(qh, 16u + 4u * t), xs, 4u + t);
}

fn q5_quad_dot8(q: vec4<u32>, qh: u32, xs: u32) -> i32 {
    return (q5_word_dot8(q.x, qh, xs, 0u) + q5_word_dot8(q.y, qh, xs, 1u))
         + (q5_word_dot8(q.z, qh, xs, 2u) + q5_word_dot8(q.w, qh, xs, 3u));
}
