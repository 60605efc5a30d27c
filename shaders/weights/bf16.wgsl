// bf16 weights (each the top 16 bits of an f32), rows of K elements back to back, read as u32
// words. WBlock = vec2<u32> when VEC4 (a block's 4 values in one 8-byte load), else u32: element
// e is half e % 2 of word e / 2, so any K works (odd K: rows start 2 bytes into a word).
// Both branches must type-check with either WBlock: vec2<u32>(...) splats a u32 and keeps a vec2.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    if (VEC4) {
        let v = vec2<u32>(w[row * (K / 4u) + b]);
        return bitcast<vec4<f32>>(vec4<u32>(v.x << 16u, v.x & 0xffff0000u, v.y << 16u, v.y & 0xffff0000u));
    }
    let e = row * K + b;
    return vec4<f32>(bitcast<f32>(((vec2<u32>(w[e / 2u]).x >> (16u * (e % 2u))) & 0xffffu) << 16u));
}
