// f16 weights without shader-f16: the same bytes as f16.wgsl (rows of K halves back to back,
// K even), read as u32 words and widened by unpack2x16float. WBlock = vec2<u32> when VEC4 (a
// block's 4 halves in one 8-byte load), else u32 (element e is half e % 2 of word e / 2).
// Both branches must type-check with either WBlock: vec2<u32>(...) splats a u32 and keeps a vec2.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    if (VEC4) {
        let v = vec2<u32>(w[row * (K / 4u) + b]);
        return vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y));
    }
    let e = row * K + b;
    return vec4<f32>(unpack2x16float(vec2<u32>(w[e / 2u]).x)[e % 2u]);
}
