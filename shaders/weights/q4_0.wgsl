// Q4_0 (ggml block_q4_0): 18 bytes per 32 weights: f16 d at byte 0, 16 bytes of nibbles at 2;
// weight j < 16 is the low nibble of byte j, weight j >= 16 the high nibble of byte j - 16.
// w = (q - 8) * d. Repacked (quant.py): a chunk's 16-byte quants, then its d's.
fn q4_0_quants(g: u32, total: u32) -> u32 { return repacked(g, total, 18u, 0u, 16u); }
fn q4_0_d(g: u32, total: u32) -> f32 { return w_f16(repacked(g, total, 18u, 16u, 2u)); }

fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let g = row * (K / 32u) + b / 8u;
    let j = 4u * (b % 8u);  // the block's first weight within the ggml block
    let q = byte_bits(w_word((q4_0_quants(g, N * (K / 32u)) + j % 16u) / 4u), 4u * (j / 16u), 15u);
    return (vec4<f32>(q) - 8.0) * q4_0_d(g, N * (K / 32u));
}
// Block b (of 32) of a row, half h: the low nibbles of its 16 bytes (h = 0) or the high ones, as
// the signed bytes q - 8 (q ^ 8 is q - 8's low nibble, whose bit 3 is the sign: times 0x1e it
// fills the byte's high nibble), so that the matmul has no offset term (INT8_HALF_OFFSET).
fn int8_half(row: u32, b: u32, h: u32, K: u32, N: u32) -> Int8Half {
    let g = row * (K / 32u) + b;
    let total = N * (K / 32u);
    let v = ((w_vec4(q4_0_quants(g, total)) >> vec4<u32>(4u * h)) & vec4<u32>(0x0f0f0f0fu)) ^ vec4<u32>(0x08080808u);
    return Int8Half(v | ((v & vec4<u32>(0x08080808u)) * 0x1eu), q4_0_d(g, total), 0.0);
}
const INT8_HALF_OFFSET: bool = false;
const INT8_HALF_SCALES: bool = false;  // one scale a 32

// units
const UNIT: u32 = 32u;  // one ggml block: one 16-byte load of quants
const X_PAD: u32 = 8u;  // x blocks from one unit's activations to the next's
// f32 units

// Unit u (block u of the row) against the activations from x block x_row + 8u.
fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let g = row * (K / 32u) + u;
    let q = w_vec4(q4_0_quants(g, N * (K / 32u)));
    let x0 = x_row + 8u * u;
    let xs = act_slot(x0);
    return q4_0_d(g, N * (K / 32u)) * nibble_quad_dot(q, xs, 8.0);
}
// int8 units
// (q - 8) . x = q . x - 8 sum(x), the sum over the int8 x (act_sum32).
fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let g = row * (K / 32u) + u;
    let q = w_vec4(q4_0_quants(g, N * (K / 32u)));
    let x0 = x_row + 8u * u;
    let dots = f32(nibble_quad_dot8(q, act_slot(x0)));
    return q4_0_d(g, N * (K / 32u)) * (act_scale32(x0) * dots - 8.0 * act_sum32(x0));
}
