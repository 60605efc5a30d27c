// Q4_K (ggml block_q4_K): 144 bytes (9 x 16) per 256 weights in 8 sub-blocks of 32, read as
// stored: f16 d at byte 0, f16 dmin at 2, 12 bytes of 6-bit sub-block scales and mins at 4
// (k_scales.wgsl), 128 bytes of nibbles at 16: weights 64p + i (i < 32) are the low nibbles of
// bytes 32p + i, weights 64p + 32 + i their high nibbles. w = (d * sc) * q - (dmin * m), the
// products first as in ggml.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 256u) + b / 64u) * 144u;
    let j = 4u * (b % 64u);
    let head = w_vec4(o);
    let dm = unpack2x16float(head.x);
    let sm = k_scale_min(head.yzw, j / 32u);
    let q = byte_bits(w_word((o + 16u + 32u * (j / 64u) + j % 32u) / 4u), 4u * ((j / 32u) % 2u), 15u);
    return (dm.x * sm.x) * vec4<f32>(q) - (dm.y * sm.y);
}
// Block b (of 32: sub-block b % 8 of its 256) of a row, half h: its 16 nibbles from weight 16 h,
// as unsigned bytes q (0..15) with w = (d * sc) * q - (dmin * m): one scale and one offset for
// the sub-block's 32 weights, as the int8 matmul weighs a 32 (INT8_HALF_OFFSET).
fn int8_half(row: u32, b: u32, h: u32, K: u32, N: u32) -> Int8Half {
    let o = (row * (K / 256u) + b / 8u) * 144u;
    let sub = b % 8u;
    let head = w_vec4(o);
    let dm = unpack2x16float(head.x);
    let sm = k_scale_min(head.yzw, sub);
    let q = (w_vec4(o + 16u + 32u * (sub / 2u) + 16u * h) >> vec4<u32>(4u * (sub % 2u))) & vec4<u32>(0x0f0f0f0fu);
    return Int8Half(q, dm.x * sm.x, -(dm.y * sm.y));
}
const INT8_HALF_OFFSET: bool = true;
const INT8_HALF_SCALES: bool = false;  // one scale a 32

// units
const UNIT: u32 = 64u;  // sub-blocks 2p and 2p + 1: the low and high nibbles of 32 bytes
const X_PAD: u32 = 16u;  // x blocks from one unit's activations to the next's

// Unit u of a row's 144-byte blocks: its block's head (d, dmin, scales), the two quads of its
// sub-blocks' nibbles, p = u % 4 (sub-blocks 2p, 2p + 1) and its first x block.
struct Q4kUnit { head: vec4<u32>, qa: vec4<u32>, qb: vec4<u32>, pair: u32, x0: u32 }

fn q4_k_unit(row: u32, u: u32, K: u32, x_row: u32) -> Q4kUnit {
    let o = (row * (K / 256u) + u / 4u) * 144u;
    let pair = u % 4u;
    return Q4kUnit(w_vec4(o), w_vec4(o + 16u + 32u * pair), w_vec4(o + 32u + 32u * pair), pair, x_row + 16u * u);
}
// f32 units

// Word t of both quads: low nibbles against x blocks t and 4 + t, high nibbles 8 + t and 12 + t.
fn q4_k_step(qa: u32, qb: u32, xs: u32, t: u32) -> Nibbles {
    let a = nibble_products(qa, act_at(xs, t), act_at(xs, 8u + t), 0.0);
    let b = nibble_products(qb, act_at(xs, 4u + t), act_at(xs, 12u + t), 0.0);
    return Nibbles(a.lo + b.lo, a.hi + b.hi);
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let w = q4_k_unit(row, u, K, x_row);
    let xs = act_slot(w.x0);
    // Four calls with constant t, not a loop: NVIDIA's compiler leaves such loops rolled (bytes.wgsl's nibble_quad_dot).
    // n.lo: sub-block 2p (low nibbles), at LO_SCALE; n.hi: sub-block 2p + 1, at HI_SCALE.
    let n = nibbles_sum(q4_k_step(w.qa.x, w.qb.x, xs, 0u), q4_k_step(w.qa.y, w.qb.y, xs, 1u),
                        q4_k_step(w.qa.z, w.qb.z, xs, 2u), q4_k_step(w.qa.w, w.qb.w, xs, 3u));
    return k_unit_total(w.head, w.pair, dot(n.lo, LO_SCALE), dot(n.hi, HI_SCALE), w.x0);
}
// int8 units
// Word t of both quads against int8 x: (sub-block 2p: blocks t, 4 + t; 2p + 1: 8 + t, 12 + t).
fn q4_k_step8(qa: u32, qb: u32, xs: u32, t: u32) -> vec2<i32> {
    return vec2<i32>(act_dot(qa & NIBBLES, xs, t) + act_dot(qb & NIBBLES, xs, 4u + t),
                     act_dot((qa >> 4u) & NIBBLES, xs, 8u + t) + act_dot((qb >> 4u) & NIBBLES, xs, 12u + t));
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let w = q4_k_unit(row, u, K, x_row);
    let xs = act_slot(w.x0);
    let s = (q4_k_step8(w.qa.x, w.qb.x, xs, 0u) + q4_k_step8(w.qa.y, w.qb.y, xs, 1u))
          + (q4_k_step8(w.qa.z, w.qb.z, xs, 2u) + q4_k_step8(w.qa.w, w.qb.w, xs, 3u));
    return k_unit_total(w.head, w.pair, act_scale32(w.x0) * f32(s.x), act_scale32(w.x0 + 8u) * f32(s.y), w.x0);
}
