// Q8_0 (ggml block_q8_0): 34 bytes per 32 weights: f16 d at byte 0, int8 q[32] at 2. w = q * d.
// Repacked (quant.py): a chunk's 32-byte quants, then its d's.
fn q8_0_quants(g: u32, total: u32) -> u32 { return repacked(g, total, 34u, 0u, 32u); }
fn q8_0_d(g: u32, total: u32) -> f32 { return w_f16(repacked(g, total, 34u, 32u, 2u)); }

fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let g = row * (K / 32u) + b / 8u;
    let total = N * (K / 32u);
    return signed_bytes(w_word(q8_0_quants(g, total) / 4u + b % 8u)) * q8_0_d(g, total);
}
// Block b (of 32) of a row, half h: its signed bytes 16 h .. 16 h + 15.
fn int8_half(row: u32, b: u32, h: u32, K: u32, N: u32) -> Int8Half {
    let g = row * (K / 32u) + b;
    let total = N * (K / 32u);
    return Int8Half(w_vec4(q8_0_quants(g, total) + 16u * h), q8_0_d(g, total), 0.0);
}
const INT8_HALF_OFFSET: bool = false;
const INT8_HALF_SCALES: bool = false;  // one scale a 32

// units
const UNIT: u32 = 32u;  // one ggml block: two 16-byte loads of quants
const X_PAD: u32 = 8u;  // x blocks from one unit's activations to the next's

// Unit u (block u of the row): its two 16-byte quads of quants, its d, its first x block.
struct Q8Unit { lo: vec4<u32>, hi: vec4<u32>, d: f32, x0: u32 }

fn q8_0_unit(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> Q8Unit {
    let g = row * (K / 32u) + u;
    let total = N * (K / 32u);
    let at = q8_0_quants(g, total);
    return Q8Unit(w_vec4(at), w_vec4(at + 16u), q8_0_d(g, total), x_row + 8u * u);
}
// f32 units

// Word t of the unit's two quads against their activations (x blocks t and 4 + t).
fn q8_0_step(lo: u32, hi: u32, xs: u32, t: u32) -> vec4<f32> {
    return byte_products(lo, act_at(xs, t)) + byte_products(hi, act_at(xs, 4u + t));
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let w = q8_0_unit(row, u, K, N, x_row);
    let xs = act_slot(w.x0);
    // Four calls with constant t, not a loop: NVIDIA's compiler leaves such loops rolled (bytes.wgsl's nibble_quad_dot).
    let s = (q8_0_step(w.lo.x, w.hi.x, xs, 0u) + q8_0_step(w.lo.y, w.hi.y, xs, 1u))
          + (q8_0_step(w.lo.z, w.hi.z, xs, 2u) + q8_0_step(w.lo.w, w.hi.w, xs, 3u));
    return w.d * dot(s, BYTE_SCALE);
}
// int8 units
// Words t of the two quads against the int8 x blocks t and 4 + t.
fn q8_0_step8(lo: u32, hi: u32, xs: u32, t: u32) -> i32 {
    return act_dot(lo, xs, t) + act_dot(hi, xs, 4u + t);
}

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let w = q8_0_unit(row, u, K, N, x_row);
    let xs = act_slot(w.x0);
    let s = (q8_0_step8(w.lo.x, w.hi.x, xs, 0u) + q8_0_step8(w.lo.y, w.hi.y, xs, 1u))
          + (q8_0_step8(w.lo.z, w.hi.z, xs, 2u) + q8_0_step8(w.lo.w, w.hi.w, xs, 3u));
    return w.d * (act_scale32(w.x0) * f32(s));
}
