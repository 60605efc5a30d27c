// Q4_1 (ggml block_q4_1): 20 bytes per 32 weights: f16 d at byte 0, f16 m at 2, 16 bytes of
// nibbles at 4 (weight j < 16: low nibble of byte j; j >= 16: high nibble of byte j - 16).
// w = d * q + m. Repacked (quant.py): a chunk's 16-byte quants, then its d|m words.
fn q4_1_quants(g: u32, total: u32) -> u32 { return repacked(g, total, 20u, 0u, 16u); }
fn q4_1_dm(g: u32, total: u32) -> vec2<f32> { return unpack2x16float(w_word(repacked(g, total, 20u, 16u, 4u) / 4u)); }

fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let g = row * (K / 32u) + b / 8u;
    let j = 4u * (b % 8u);
    let dm = q4_1_dm(g, N * (K / 32u));
    let q = byte_bits(w_word((q4_1_quants(g, N * (K / 32u)) + j % 16u) / 4u), 4u * (j / 16u), 15u);
    return dm.x * vec4<f32>(q) + dm.y;
}
// Block b (of 32) of a row, half h: the low nibbles of its 16 bytes (h = 0) or the high ones.
fn int8_half(row: u32, b: u32, h: u32, K: u32, N: u32) -> Int8Half {
    let g = row * (K / 32u) + b;
    let total = N * (K / 32u);
    let dm = q4_1_dm(g, total);
    return Int8Half((w_vec4(q4_1_quants(g, total)) >> vec4<u32>(4u * h)) & vec4<u32>(0x0f0f0f0fu), dm.x, dm.y);
}
const INT8_HALF_OFFSET: bool = true;
const INT8_HALF_SCALES: bool = false;  // one scale a 32

// units
const UNIT: u32 = 32u;
const X_PAD: u32 = 8u;  // x blocks from one unit's activations to the next's
// f32 units

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let g = row * (K / 32u) + u;
    let q = w_vec4(q4_1_quants(g, N * (K / 32u)));
    let x0 = x_row + 8u * u;
    let xs = act_slot(x0);
    let dm = q4_1_dm(g, N * (K / 32u));
    return dm.x * nibble_quad_dot(q, xs, 0.0) + dm.y * act_sum32(x0);
}
// int8 units
fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let g = row * (K / 32u) + u;
    let q = w_vec4(q4_1_quants(g, N * (K / 32u)));
    let x0 = x_row + 8u * u;
    let dm = q4_1_dm(g, N * (K / 32u));
    return dm.x * (act_scale32(x0) * f32(nibble_quad_dot8(q, act_slot(x0)))) + dm.y * act_sum32(x0);
}
