// Q5_K (ggml block_q5_K): 176 bytes (11 x 16) per 256 weights in 8 sub-blocks of 32, read as
// stored: f16 d at byte 0, f16 dmin at 2, 12 bytes of 6-bit sub-block scales and mins at 4
// (k_scales.wgsl), 32 bytes qh at 16 (bit s of byte i = the 5th bit of weight 32s + i), 128 bytes
// of low nibbles at 48 laid out as Q4_K's. w = (d * sc) * q - (dmin * m), the products first as in ggml.
fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let o = (row * (K / 256u) + b / 64u) * 176u;
    let j = 4u * (b % 64u);
    let s = j / 32u;  // sub-block
    let head = w_vec4(o);
    let dm = unpack2x16float(head.x);
    let sm = k_scale_min(head.yzw, s);
    let lo = byte_bits(w_word((o + 48u + 32u * (j / 64u) + j % 32u) / 4u), 4u * (s % 2u), 15u);
    let hi = byte_bits(w_word((o + 16u + j % 32u) / 4u), s, 1u);
    return (dm.x * sm.x) * vec4<f32>(lo | (hi << vec4<u32>(4u))) - (dm.y * sm.y);
}
// units
const UNIT: u32 = 64u;  // sub-blocks 2p and 2p + 1: the low and high nibbles of 32 bytes, qh bits 2p, 2p + 1
const X_PAD: u32 = 16u;  // x blocks from one unit's activations to the next's

// Unit u of a row's 176-byte blocks: its block's head (d, dmin, scales), both quads of high bits,
// the two quads of its sub-blocks' nibbles, p = u % 4 (sub-blocks 2p, 2p + 1), its first x block.
struct Q5kUnit { head: vec4<u32>, ha: vec4<u32>, hb: vec4<u32>, qa: vec4<u32>, qb: vec4<u32>, pair: u32, x0: u32 }

fn q5_k_unit(row: u32, u: u32, K: u32, x_row: u32) -> Q5kUnit {
    let o = (row * (K / 256u) + u / 4u) * 176u;
    let pair = u % 4u;
    return Q5kUnit(w_vec4(o), w_vec4(o + 16u), w_vec4(o + 32u), w_vec4(o + 48u + 32u * pair),
                   w_vec4(o + 64u + 32u * pair), pair, x_row + 16u * u);
}
// f32 units

fn q5_k_values(v: u32, shift: u32, qh: u32, bit: u32) -> vec4<f32> {
    return magic_f32(byte_bits(v, shift, 15u) | (byte_bits(qh, bit, 1u) << vec4<u32>(4u)), 0.0);
}

// Word t of both quads: (sub-block 2p against x blocks t, 4 + t; sub-block 2p + 1 against 8 + t, 12 + t).
fn q5_k_step(qa: u32, qb: u32, ha: u32, hb: u32, pair: u32, xs: u32, t: u32) -> vec2<f32> {
    let lo = dot(q5_k_values(qa, 0u, ha, 2u * pair), act_at(xs, t)) + dot(q5_k_values(qb, 0u, hb, 2u * pair), act_at(xs, 4u + t));
    let hi = dot(q5_k_values(qa, 4u, ha, 2u * pair + 1u), act_at(xs, 8u + t)) + dot(q5_k_values(qb, 4u, hb, 2u * pair + 1u), act_at(xs, 12u + t));
    return vec2<f32>(lo, hi);
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let w = q5_k_unit(row, u, K, x_row);
    let xs = act_slot(w.x0);
    // Four calls with constant t, not a loop: NVIDIA's compiler leaves such loops rolled (bytes.wgsl's nibble_quad_dot).
    let sums = (q5_k_step(w.qa.x, w.qb.x, w.ha.x, w.hb.x, w.pair, xs, 0u) + q5_k_step(w.qa.y, w.qb.y, w.ha.y, w.hb.y, w.pair, xs, 1u))
             + (q5_k_step(w.qa.z, w.qb.z, w.ha.z, w.hb.z, w.pair, xs, 2u) + q5_k_step(w.qa.w, w.qb.w, w.ha.w, w.hb.w, w.pair, xs, 3u));
    return k_unit_total(w.head, w.pair, sums.x, sums.y, w.x0);
}
// int8 units
// Four weights' 5-bit q as bytes: the nibbles `shift` of v, bit `bit` of qh's bytes as bit 4.
fn q5_k_bytes(v: u32, shift: u32, qh: u32, bit: u32) -> u32 {
    return ((v >> shift) & NIBBLES) | (((qh >> bit) & 0x01010101u) << 4u);
}

// Word t of both quads against int8 x: (sub-block 2p: blocks t, 4 + t; 2p + 1: 8 + t, 12 + t).
fn q5_k_step8(qa: u32, qb: u32, ha: u32, hb: u32, pair: u32, xs: u32, t: u32) -> vec2<i32> {
    let lo = act_dot(q5_k_bytes(qa, 0u, ha, 2u * pair), xs, t)
           + act_dot(q5_k_bytes(qb, 0u, hb, 2u * pair), xs, 4u + t);
    let hi = act_dot(q5_k_bytes(qa, 4u, ha, 2u * pair + 1u), xs, 8u + t)
           + act_dot(q5_k_bytes(qb, 4u, hb, 2u * pair + 1u), xs, 12u + t);
    return vec2<i32>(lo, hi);
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let w = q5_k_unit(row, u, K, x_row);
    let xs = act_slot(w.x0);
    let s = (q5_k_step8(w.qa.x, w.qb.x, w.ha.x, w.hb.x, w.pair, xs, 0u) + q5_k_step8(w.qa.y, w.qb.y, w.ha.y, w.hb.y, w.pair, xs, 1u))
          + (q5_k_step8(w.qa.z, w.qb.z, w.ha.z, w.hb.z, w.pair, xs, 2u) + q5_k_step8(w.qa.w, w.qb.w, w.ha.w, w.hb.w, w.pair, xs, 3u));
    return k_unit_total(w.head, w.pair, act_scale32(w.x0) * f32(s.x), act_scale32(w.x0 + 8u) * f32(s.y), w.x0);
}
