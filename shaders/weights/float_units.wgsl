// The GEMV's units for the float formats (f32, f16, f16_packed, bf16): one weight_block each,
// 4 consecutive k when VEC4 (a 16-byte load of f32, 8 bytes of 16-bit values), else one k.
const UNIT: u32 = select(1u, 4u, VEC4);
const X_PAD: u32 = 8u;  // x blocks from one unit's activations to the next's

fn unit_dot(row: u32, u: u32, K: u32, N: u32, x_row: u32) -> f32 {
    let wv = weight_block(row, u, K, N);
    if (VEC4) { return dot(wv, act_block(x_row + u)); }
    return wv.x * act_block(x_row + u).x;
}
