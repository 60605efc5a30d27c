// Not a kernel: the gated MLP's activations, which py_engine/runtime/kernels.py appends to every kernel
// that calls gate_act (gated_mul.wgsl, and gemv.wgsl / matmul.wgsl with GATED). GELU (a bool
// define of that kernel) picks GELU's tanh approximation (Gemma), else SiLU (Llama, Qwen, Mistral):
// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))).
// GELU's exact form, gelu_erf (gelu.wgsl's, conv1d.wgsl's): WGSL has no erf, so erfc_pos is
// Numerical Recipes' erfc Chebyshev fit (fractional error below 1.2e-7 for z >= 0), and GELU is
// 0.5 x erfc(-x / sqrt(2)), which keeps its relative precision where x is very negative and
// 1 + erf(x / sqrt(2)) would cancel.
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

const SQRT_HALF: f32 = 0.7071067811865476;

// erfc(z) for z >= 0.
fn erfc_pos(z: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
        + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))));
    return t * safe_exp(-z * z + poly);
}

fn gelu_erf(v: f32) -> f32 {
    let u = -v * SQRT_HALF;  // GELU = 0.5 v erfc(u)
    var erfc_u = erfc_pos(abs(u));
    if (u < 0.0) { erfc_u = 2.0 - erfc_u; }
    return 0.5 * v * erfc_u;
}
