// Byte-level reads of a weight binding `w: array<u32>` holding raw little-endian bytes (the ggml
// and MLX formats). ggml blocks of 34, 18, 22 or 210 bytes put rows and blocks at offsets that
// are only 2-aligned, so 16- and 32-bit fields are read at any even byte offset `o`.
fn w_u8(o: u32) -> u32 { return (w[o / 4u] >> (8u * (o % 4u))) & 0xffu; }
fn w_u16(o: u32) -> u32 { return (w[o / 4u] >> (8u * (o % 4u))) & 0xffffu; }  // o even
fn w_f16(o: u32) -> f32 { return unpack2x16float(w_u16(o)).x; }  // o even

// 4 bytes at even offset o; when o % 4 == 2 they straddle two words.
fn w_u32(o: u32) -> u32 {
    let i = o / 4u;
    if (o % 4u == 0u) { return w[i]; }
    return (w[i] >> 16u) | (w[i + 1u] << 16u);
}

// Bits shift .. of each of v's 4 bytes, masked: byte_bits(v, 4u, 15u) = their high nibbles.
fn byte_bits(v: u32, shift: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(v) >> (vec4<u32>(0u, 8u, 16u, 24u) + shift)) & vec4<u32>(mask);
}
