// Q6_K (ggml block_q6_K): 210 bytes per 256 weights: ql[128] at byte 0, qh[64] at 128, int8
// scales[16] at 192 (one per 16 weights), f16 d at 208. Weight j = 128h + 32t + i (h < 2,
// t < 4, i < 32): low 4 bits = nibble t / 2 of ql byte 64h + 32 (t % 2) + i, high 2 bits = bits
// 2t of qh byte 32h + i. w = (d * scale) * (q - 32).
// Repacked (quant.py): a chunk's ql, then its qh, its scales, its d's (all but d 16-aligned).
fn q6_k_field(g: u32, total: u32, before: u32, size: u32) -> u32 { return repacked(g, total, 210u, before, size); }

fn q6_k_scale(scales: vec4<u32>, i: u32) -> f32 { return f32(bitcast<i32>(((word(scales, i / 4u) >> (8u * (i % 4u))) & 0xffu) << 24u) >> 24u); }

fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let g = row * (K / 256u) + b / 64u;
    let total = N * (K / 256u);
    let j = 4u * (b % 64u);
    let h = j / 128u;
    let t = (j / 32u) % 4u;
    let i = j % 32u;
    let lo = byte_bits(w_word((q6_k_field(g, total, 0u, 128u) + 64u * h + 32u * (t % 2u) + i) / 4u), 4u * (t / 2u), 15u);
    let hi = byte_bits(w_word((q6_k_field(g, total, 128u, 64u) + 32u * h + i) / 4u), 2u * t, 3u);
    let scale = q6_k_scale(w_vec4(q6_k_field(g, total, 192u, 16u)), j / 16u);
    return (w_f16(q6_k_field(g, total, 208u, 2u)) * scale) * (vec4<f32>(lo | (hi << vec4<u32>(4u))) - 32.0);
}
// Block b (of 32: weights 32 (b % 8) .. of its 256, h2 = (b % 8) / 4, t = b % 4) of a row, half h:
// its 16 q - 32 as signed bytes (q ^ 32's bit 5 is the sign: times 7 it fills bits 6 and 7), at
// its own scale d * scales[8 h2 + 2 t + h] (INT8_HALF_SCALES: a scale per 16 weights).
fn int8_half(row: u32, b: u32, h: u32, K: u32, N: u32) -> Int8Half {
    let g = row * (K / 256u) + b / 8u;
    let total = N * (K / 256u);
    let h2 = (b % 8u) / 4u;
    let t = b % 4u;
    let lo = (w_vec4(q6_k_field(g, total, 0u, 128u) + 64u * h2 + 32u * (t % 2u) + 16u * h) >> vec4<u32>(4u * (t / 2u))) & vec4<u32>(0x0f0f0f0fu);
    let hi = (w_vec4(q6_k_field(g, total, 128u, 64u) + 32u * h2 + 16u * h) >> vec4<u32>(2u * t)) & vec4<u32>(0x03030303u);
    let v = (lo | (hi << vec4<u32>(4u))) ^ vec4<u32>(0x20202020u);
    let scale = q6_k_scale(w_vec4(q6_k_field(g, total, 192u, 16u)), 8u * h2 + 2u * t + h);
    return Int8Half(v | ((v & vec4<u32>(0x20202020u)) * 7u), w_f16(q6_k_field(g, total, 208u, 2u)) * scale, 0.0);
}
const INT8_HALF_OFFSET: bool = false;
const INT8_HALF_SCALES: bool = true;

// units
// Unit v of a block (h = v / 2, s = v % 2): 32 ql bytes at 64h + 32s hold weights 128h + 32s + i
// (low nibbles, t = s) and 128h + 64 + 32s + i (high nibbles, t = s + 2); their high bits are
// bits 2s and 2s + 4 of qh bytes 32h + i. Activations: two runs of 32, 64 apart.
const UNIT: u32 = 64u;
const X_PAD: u32 = 8u;  // a unit's two runs of activations start 8-block aligned

// Unit u of a row's blocks: its ql and qh quads, its block (g of total), half h and run s, and its
// first x block (the low-nibble run's 32 x; the high one's from x0 + 16; quads: 64 per block).
struct Q6kUnit { la: vec4<u32>, lb: vec4<u32>, ha: vec4<u32>, hb: vec4<u32>, g: u32, total: u32, h: u32, s: u32, x0: u32 }

fn q6_k_unit(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> Q6kUnit {
    let g = row * (K / 256u) + u / 4u;
    let total = N * (K / 256u);
    let h = (u % 4u) / 2u;
    let s = u % 2u;
    let ql = q6_k_field(g, total, 0u, 128u) + 64u * h + 32u * s;
    let qh = q6_k_field(g, total, 128u, 64u) + 32u * h;
    return Q6kUnit(w_vec4(ql), w_vec4(ql + 16u), w_vec4(qh), w_vec4(qh + 16u), g, total, h, s,
                   x_row + 64u * (u / 4u) + 32u * h + 8u * s);
}
// f32 units

// Four weights' q - 32 from a ql word (nibble `shift`) and a qh word (bits `bit`).
fn q6_values(ql: u32, shift: u32, qh: u32, bit: u32) -> vec4<f32> {
    return magic_f32(byte_bits(ql, shift, 15u) | (byte_bits(qh, bit, 3u) << vec4<u32>(4u)), 32.0);
}

// Word t of the ql and qh quads against x blocks t, 4 + t (low nibbles), 16 + t, 20 + t (high).
fn q6_k_step(la: u32, lb: u32, ha: u32, hb: u32, s: u32, xs: u32, t: u32) -> vec4<f32> {
    return vec4<f32>(dot(q6_values(la, 0u, ha, 2u * s), act_at(xs, t)),
                     dot(q6_values(lb, 0u, hb, 2u * s), act_at(xs, 4u + t)),
                     dot(q6_values(la, 4u, ha, 2u * s + 4u), act_at(xs, 16u + t)),
                     dot(q6_values(lb, 4u, hb, 2u * s + 4u), act_at(xs, 20u + t)));
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let w = q6_k_unit(row, u, K, N, x_row);
    let xs = act_slot(w.x0);
    // Four calls with constant t, not a loop: NVIDIA's compiler leaves such loops rolled (bytes.wgsl's nibble_quad_dot).
    let ab = (q6_k_step(w.la.x, w.lb.x, w.ha.x, w.hb.x, w.s, xs, 0u) + q6_k_step(w.la.y, w.lb.y, w.ha.y, w.hb.y, w.s, xs, 1u))
           + (q6_k_step(w.la.z, w.lb.z, w.ha.z, w.hb.z, w.s, xs, 2u) + q6_k_step(w.la.w, w.lb.w, w.ha.w, w.hb.w, w.s, xs, 3u));
    let a0 = ab.x;  // weights i < 16 of the low-nibble run
    let a1 = ab.y;  // i >= 16
    let b0 = ab.z;  // the high-nibble run
    let b1 = ab.w;
    let scales = w_vec4(q6_k_field(w.g, w.total, 192u, 16u));
    let first = 8u * w.h + 2u * w.s;  // the scale of weights 128h + 32s .. + 16
    let sum = q6_k_scale(scales, first) * a0 + q6_k_scale(scales, first + 1u) * a1
            + q6_k_scale(scales, first + 4u) * b0 + q6_k_scale(scales, first + 5u) * b1;
    return w_f16(q6_k_field(w.g, w.total, 208u, 2u)) * sum;
}
// int8 units
// Four weights' q - 32 as signed bytes: q + 96 (< 256: no carry into the next byte) with bit 7
// flipped is q - 32 mod 256.
fn q6_bytes(ql: u32, shift: u32, qh: u32, bit: u32) -> u32 {
    let q = ((ql >> shift) & NIBBLES) | (((qh >> bit) & 0x03030303u) << 4u);
    return (q + 0x60606060u) ^ 0x80808080u;
}

// Word t of the ql and qh quads against int8 x blocks t, 4 + t (low nibbles), 16 + t, 20 + t (high).
fn q6_k_step8(la: u32, lb: u32, ha: u32, hb: u32, s: u32, xs: u32, t: u32) -> vec4<i32> {
    return vec4<i32>(act_dot(q6_bytes(la, 0u, ha, 2u * s), xs, t),
                     act_dot(q6_bytes(lb, 0u, hb, 2u * s), xs, 4u + t),
                     act_dot(q6_bytes(la, 4u, ha, 2u * s + 4u), xs, 16u + t),
                     act_dot(q6_bytes(lb, 4u, hb, 2u * s + 4u), xs, 20u + t));
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let w = q6_k_unit(row, u, K, N, x_row);
    let xs = act_slot(w.x0);
    let ab = vec4<f32>((q6_k_step8(w.la.x, w.lb.x, w.ha.x, w.hb.x, w.s, xs, 0u) + q6_k_step8(w.la.y, w.lb.y, w.ha.y, w.hb.y, w.s, xs, 1u))
                     + (q6_k_step8(w.la.z, w.lb.z, w.ha.z, w.hb.z, w.s, xs, 2u) + q6_k_step8(w.la.w, w.lb.w, w.ha.w, w.hb.w, w.s, xs, 3u)));
    let scales = w_vec4(q6_k_field(w.g, w.total, 192u, 16u));
    let first = 8u * w.h + 2u * w.s;  // the scale of weights 128h + 32s .. + 16
    let low = q6_k_scale(scales, first) * ab.x + q6_k_scale(scales, first + 1u) * ab.y;
    let high = q6_k_scale(scales, first + 4u) * ab.z + q6_k_scale(scales, first + 5u) * ab.w;
    return w_f16(q6_k_field(w.g, w.total, 208u, 2u)) * (act_scale32(w.x0) * low + act_scale32(w.x0 + 16u) * high);
}
