// MLX affine 4-bit with bf16 scales and biases: the layout is in mlx4.wgsl.
fn mlx_half(bits: u32) -> f32 { return bitcast<f32>(bits << 16u); }
