// Not a kernel: the gated MLP's activations, which py_engine/runtime/kernels.py appends to every kernel
// that calls gate_act (gated_mul.wgsl, and gemv.wgsl / matmul.wgsl with GATED). GELU (a bool
// define of that kernel) picks GELU's tanh approximation (Gemma), else SiLU (Llama, Qwen, Mistral):
// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))).
const SQRT_2_OVER_PI: f32 = 0.7978845608028654;

fn silu(g: f32) -> f32 {
    return g / (1.0 + safe_exp(-g));
}

fn gelu_tanh(g: f32) -> f32 {
    // The tanh argument is clamped: Metal's fast-math tanh computes (e^2x - 1) / (e^2x + 1), which is
    // inf / inf = NaN once |x| is large (|g| = 100 gives x ≈ 3.6e4). tanh(±10) is ±1 to f32
    // precision, so the clamp changes nothing else: gelu(100) = 100, gelu(-100) = 0.
    let inner = clamp(SQRT_2_OVER_PI * (g + 0.044715 * g * g * g), -10.0, 10.0);
    return 0.5 * g * (1.0 + tanh(inner));
}

fn gate_act(g: f32) -> f32 {
    if (GELU) { return gelu_tanh(g); }  // a constant: the compiler keeps one branch
    return silu(g);
}
