// Byte-level reads of a weight binding `w: array<vec4<u32>>` holding little-endian bytes (the ggml
// and MLX formats). Stored ggml blocks of 34, 18, 22 or 210 bytes put fields at offsets that are
// only 2-aligned, so 16- and 32-bit fields are read at any even byte offset `o`; the repacked
// layouts (py_engine/quant.py) put every block's quants at a 16-byte boundary, read by w_quad.
fn w_word(i: u32) -> u32 { return w[i / 4u][i % 4u]; }
fn w_vec4(byte_offset: u32) -> vec4<u32> { return w[byte_offset / 16u]; }  // 16-aligned
fn w_u8(o: u32) -> u32 { return (w_word(o / 4u) >> (8u * (o % 4u))) & 0xffu; }
fn w_u16(o: u32) -> u32 { return (w_word(o / 4u) >> (8u * (o % 4u))) & 0xffffu; }  // o even
fn w_f16(o: u32) -> f32 { return unpack2x16float(w_u16(o)).x; }  // o even

// 4 bytes at even offset o; when o % 4 == 2 they straddle two words.
fn w_u32(o: u32) -> u32 {
    let i = o / 4u;
    if (o % 4u == 0u) { return w_word(i); }
    return (w_word(i) >> 16u) | (w_word(i + 1u) << 16u);
}

// Bits shift .. of each of v's 4 bytes, masked: byte_bits(v, 4u, 15u) = their high nibbles.
fn byte_bits(v: u32, shift: u32, mask: u32) -> vec4<u32> {
    return (vec4<u32>(v) >> (vec4<u32>(0u, 8u, 16u, 24u) + shift)) & vec4<u32>(mask);
}

// Byte offset of field (`before` bytes into the repacked block, `size` bytes per block) of block g
// of a repacked binding holding `total` blocks of `block_bytes` (quant.REPACK_CHUNK = 8 per chunk;
// the last chunk may hold fewer, so its fields start closer together).
fn repacked(g: u32, total: u32, block_bytes: u32, before: u32, size: u32) -> u32 {
    let chunk = g / 8u;
    return chunk * 8u * block_bytes + min(8u, total - 8u * chunk) * before + (g % 8u) * size;
}

// The four signed bytes of v.
fn signed_bytes(v: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(v) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

// The sum of a unit's activations (what a format's offset or min multiplies).
fn quads_sum(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>) -> f32 { return dot(a + b + c + d, vec4<f32>(1.0)); }
