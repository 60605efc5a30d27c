// Q5_0 (ggml block_q5_0): 22 bytes per 32 weights: f16 d at byte 0, u32 qh at 2 (bit j = the
// 5th bit of weight j), 16 bytes of low nibbles at 6 (weight j < 16: low nibble of byte j;
// j >= 16: high nibble of byte j - 16). w = (q - 16) * d.
// Repacked (quant.py): a chunk's 16-byte low nibbles, then its qh words, then its d's.
fn q5_0_quants(g: u32, total: u32) -> u32 { return repacked(g, total, 22u, 0u, 16u); }
fn q5_0_high(g: u32, total: u32) -> u32 { return w_word(repacked(g, total, 22u, 16u, 4u) / 4u); }
fn q5_0_d(g: u32, total: u32) -> f32 { return w_f16(repacked(g, total, 22u, 20u, 2u)); }

fn weight_block(row: u32, b: u32, K: u32, N: u32) -> vec4<f32> {
    let g = row * (K / 32u) + b / 8u;
    let total = N * (K / 32u);
    let j = 4u * (b % 8u);
    let v = w_word((q5_0_quants(g, total) + j % 16u) / 4u);
    return q5_values(v, 4u * (j / 16u), q5_0_high(g, total), j, 16.0) * q5_0_d(g, total);
}
// units
const UNIT: u32 = 32u;
const X_PAD: u32 = 8u;  // x blocks from one unit's activations to the next's
// f32 units

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let g = row * (K / 32u) + u;
    let total = N * (K / 32u);
    let q = w_vec4(q5_0_quants(g, total));
    let qh = q5_0_high(g, total);
    let x0 = x_row + 8u * u;
    let xs = act_slot(x0);
    let s = q5_quad_dot(q, qh, xs, 16.0);
    return q5_0_d(g, total) * s;
}
// int8 units
// (q - 16) . x = q . x - 16 sum(x), the sum over the int8 x (act_sum32).
fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let g = row * (K / 32u) + u;
    let total = N * (K / 32u);
    let q = w_vec4(q5_0_quants(g, total));
    let x0 = x_row + 8u * u;
    let dots = f32(q5_quad_dot8(q, q5_0_high(g, total), act_slot(x0)));
    return q5_0_d(g, total) * (act_scale32(x0) * dots - 16.0 * act_sum32(x0));
}
