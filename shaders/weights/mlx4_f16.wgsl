// MLX affine 4-bit with f16 scales and biases: the layout is in mlx4.wgsl.
fn mlx_half(bits: u32) -> f32 { return unpack2x16float(bits).x; }
