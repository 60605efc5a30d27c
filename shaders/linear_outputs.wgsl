// A linear layer's outputs (kernels.py appends this to the kernels that call write_output: gemv,
// matmul, matmul_int8, whose bindings p, bias, residual and y it uses). Each returns the value it
// wrote (gemv.wgsl Q8_OUTPUT quantizes it).

// y[r, out_offset + n] = v (+ bias[n] when has_bias, + the residual's when has_residual).
fn write_output(r: u32, n: u32, dot_value: f32) -> f32 {
    var v = dot_value;
    if (p.has_bias != 0u) { v += bias[n]; }
    return store_output(r, n, v);
}

// GATED: output n from its gate row's and up row's dot products.
fn write_gated(r: u32, n: u32, gate: f32, up: f32) -> f32 {
    var g = gate;
    var u = up;
    if (p.has_bias != 0u) { g += bias[n]; u += bias[p.N / 2u + n]; }
    return store_output(r, n, gate_act(g) * u);
}

// y[r, out_offset + n] = v (+ the residual's; read only when there is one).
fn store_output(r: u32, n: u32, v: f32) -> f32 {
    let at = r * p.out_stride + p.out_offset + n;
    var out = v;
    if (p.has_residual != 0u) { out += residual[at]; }
    y[at] = out;
    return out;
}
