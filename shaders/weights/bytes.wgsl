// Byte-level reads of a weight binding `w: array<vec4<u32>>` holding little-endian bytes (the ggml
// and MLX formats). Stored ggml blocks of 34, 18, 22 or 210 bytes put fields at offsets that are
// only 2-aligned, so 16- and 32-bit fields are read at any even byte offset `o`; the repacked
// layouts (py_engine/runtime/quant.py) put every block's quants at a 16-byte boundary, read by w_quad.
fn w_word(i: u32) -> u32 { return w[i / 4u][i % 4u]; }
fn w_vec4(byte_offset: u32) -> vec4<u32> { return w[byte_offset / 16u]; }  // 16-aligned

// Word t of a 16-byte load, without indexing the vector: a dynamically indexed vector can be
// spilled to local memory; these selects fold away for a constant t and cost three operations
// otherwise.
fn word(q: vec4<u32>, t: u32) -> u32 { return select(select(q.x, q.y, t == 1u), select(q.z, q.w, t == 3u), t >= 2u); }
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

// Half h (16 weights) of a block of 32 as int8 for matmul_int8.wgsl: w = scale * q + offset, q's
// 16 signed bytes in k order (word t: weights 4t .. 4t + 3 of the half).
struct Int8Half { q: vec4<u32>, scale: f32, offset: f32 }  // w = scale * q + offset, offset 0 without INT8_HALF_OFFSET

// Byte offset of field (`before` bytes into the repacked block, `size` bytes per block) of block g
// of a repacked binding holding `total` blocks of `block_bytes` (quant.REPACK_CHUNK = 8 per chunk;
// the last chunk may hold fewer, so its fields start closer together).
fn repacked(g: u32, total: u32, block_bytes: u32, before: u32, size: u32) -> u32 {
    let chunk = g / 8u;
    return chunk * 8u * block_bytes + min(8u, total - 8u * chunk) * before + (g % 8u) * size;
}

// Small unsigned integers q (< 2^23) as floats, minus `offset`, without an int-to-float
// conversion (a quarter-rate instruction on NVIDIA GPUs, the GEMV's bottleneck): q OR 2^23's bits
// is the float 2^23 + q, exactly.
fn magic_f32(q: vec4<u32>, offset: f32) -> vec4<f32> {
    return bitcast<vec4<f32>>(q | vec4<u32>(0x4b000000u)) - (8388608.0 + offset);
}

// The four signed bytes of v (each byte + 128, unsigned, minus 128).
fn signed_bytes(v: u32) -> vec4<f32> { return magic_f32(byte_bits(v ^ 0x80808080u, 0u, 255u), 128.0); }

// The 8 nibbles of word v minus `offset`, times activations: the low nibble of byte j times lo[j],
// its high nibble times hi[j]. Masked in place, without a shift, a nibble below bit 23 is a float's
// mantissa (as in magic_f32) at 16^i times its value, so a weight costs one AND|OR, one subtraction
// and one FMA; the products keep those powers of 16 (sum them, then weigh by LO_SCALE / HI_SCALE).
struct Nibbles { lo: vec4<f32>, hi: vec4<f32> }
const LO_SCALE = vec4<f32>(1.0, 1.0 / 256.0, 1.0 / 65536.0, 1.0 / 4096.0);
const HI_SCALE = vec4<f32>(1.0 / 16.0, 1.0 / 4096.0, 1.0 / 256.0, 1.0 / 65536.0);

fn nibble_products(v: u32, lo: vec4<f32>, hi: vec4<f32>, offset: f32) -> Nibbles {
    let high = v >> 12u;  // bits 20..31 (byte 2's high nibble, byte 3) down to 8..19
    let l = bitcast<vec4<f32>>((vec4<u32>(v, v, v, high) & vec4<u32>(0xfu, 0xf00u, 0xf0000u, 0xf000u)) | vec4<u32>(0x4b000000u))
          - (8388608.0 + offset / LO_SCALE);
    let h = bitcast<vec4<f32>>((vec4<u32>(v, v, high, high) & vec4<u32>(0xf0u, 0xf000u, 0xf00u, 0xf0000u)) | vec4<u32>(0x4b000000u))
          - (8388608.0 + offset / HI_SCALE);
    return Nibbles(l * lo, h * hi);
}

fn nibbles_sum(a: Nibbles, b: Nibbles, c: Nibbles, d: Nibbles) -> Nibbles {
    return Nibbles((a.lo + b.lo) + (c.lo + d.lo), (a.hi + b.hi) + (c.hi + d.hi));
}

// The 4 signed bytes of v times x, byte j at 256^(j % 2) (weigh the sum by BYTE_SCALE): as
// nibble_products, a masked byte below bit 23 is a mantissa.
const BYTE_SCALE = vec4<f32>(1.0, 1.0 / 256.0, 1.0, 1.0 / 256.0);

fn byte_products(v: u32, x: vec4<f32>) -> vec4<f32> {
    let u = v ^ 0x80808080u;  // each byte + 128: unsigned
    let b = bitcast<vec4<f32>>((vec4<u32>(u, u, u >> 16u, u >> 16u) & vec4<u32>(0xffu, 0xff00u, 0xffu, 0xff00u)) | vec4<u32>(0x4b000000u))
          - (8388608.0 + 128.0 / BYTE_SCALE);
    return b * x;
}
// units
// f32 units
// A unit's 16-byte quad of 32 nibbles, ggml order (word t: weights 4t .. 4t + 3 in its low nibbles,
// 16 + 4t .. in its high ones), minus `offset`, against x blocks 0 .. 7 from slot xs (gemv.wgsl's
// act_at). Four calls with constant t, not a loop: NVIDIA's compiler leaves a 4-trip loop rolled,
// and the loop ran 17-30 % slower (Q4_0, H100).
fn nibble_quad_dot(q: vec4<u32>, xs: u32, offset: f32) -> f32 {
    let n = nibbles_sum(nibble_products(q.x, act_at(xs, 0u), act_at(xs, 4u), offset),
                        nibble_products(q.y, act_at(xs, 1u), act_at(xs, 5u), offset),
                        nibble_products(q.z, act_at(xs, 2u), act_at(xs, 6u), offset),
                        nibble_products(q.w, act_at(xs, 3u), act_at(xs, 7u), offset));
    return dot(n.lo, LO_SCALE) + dot(n.hi, HI_SCALE);
}
// int8 units
// The same quad against int8 x (gemv.wgsl Q8_ACT, act_dot): the integer dot of the nibbles, offset
// not applied. A byte's low nibble pairs with x block t's, its high nibble with block 4 + t's: one
// AND (and a shift) per 4 weights, and act_dot's two dot4I8Packed.
const NIBBLES = 0x0f0f0f0fu;

fn nibble_word_dot8(v: u32, xs: u32, t: u32) -> i32 {
    return act_dot(v & NIBBLES, xs, t) + act_dot((v >> 4u) & NIBBLES, xs, 4u + t);
}

fn nibble_quad_dot8(q: vec4<u32>, xs: u32) -> i32 {
    return (nibble_word_dot8(q.x, xs, 0u) + nibble_word_dot8(q.y, xs, 1u))
         + (nibble_word_dot8(q.z, xs, 2u) + nibble_word_dot8(q.w, xs, 3u));
}
