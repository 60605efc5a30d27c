// Q5_1 (ggml block_q5_1): 24 bytes per 32 weights: f16 d at byte 0, f16 m at 2, u32 qh at 4
// (bit j = the 5th bit of weight j), 16 bytes of low nibbles at 8 (weight j < 16: low nibble
// of byte j; j >= 16: high nibble of byte j - 16). w = d * q + m.
// Repacked (quant.py): a chunk's 16-byte low nibbles, then its qh words, then its d|m words.
fn q5_1_quants(g: u32, total: u32) -> u32 { return repacked(g, total, 24u, 0u, 16u); }
fn q5_1_high(g: u32, total: u32) -> u32 { return w_word(repacked(g, total, 24u, 16u, 4u) / 4u); }
fn q5_1_dm(g: u32, total: u32) -> vec2<f32> { return unpack2x16float(w_word(repacked(g, total, 24u, 20u, 4u) / 4u)); }

fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let g = row * (K / 32u) + b / 8u;
    let total = N * (K / 32u);
    let j = 4u * (b % 8u);
    let dm = q5_1_dm(g, total);
    let v = w_word((q5_1_quants(g, total) + j % 16u) / 4u);
    return dm.x * q5_values(v, 4u * (j / 16u), q5_1_high(g, total), j, 0.0) + dm.y;
}
// units
const UNIT: u32 = 32u;
const X_PAD: u32 = 8u;  // x blocks from one unit's activations to the next's
// f32 units

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let g = row * (K / 32u) + u;
    let total = N * (K / 32u);
    let q = w_vec4(q5_1_quants(g, total));
    let qh = q5_1_high(g, total);
    let x0 = x_row + 8u * u;
    let xs = act_slot(x0);
    let s = q5_quad_dot(q, qh, xs, 0.0);
    let dm = q5_1_dm(g, total);
    return dm.x * s + dm.y * act_sum32(x0);
}
// int8 units
fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let g = row * (K / 32u) + u;
    let total = N * (K / 32u);
    let q = w_vec4(q5_1_quants(g, total));
    let x0 = x_row + 8u * u;
    let dots = f32(q5_quad_dot8(q, q5_1_high(g, total), act_slot(x0)));
    let dm = q5_1_dm(g, total);
    return dm.x * (act_scale32(x0) * dots) + dm.y * act_sum32(x0);
}
