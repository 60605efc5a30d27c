// f32 weights, rows of K elements back to back. The binding is array<WBlock>: vec4<f32> when
// VEC4 (one 16-byte load per block), else f32 splatted into all lanes.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    return vec4<f32>(vec4<W>(w[row * select(K, K / 4u, VEC4) + b]));
}
