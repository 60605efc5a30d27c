// Not a kernel: a helper that py_engine/runtime/kernels.py appends to every kernel.
// Metal compiles WGSL with fast math: there exp() of a very negative (or -inf) argument can come
// back NaN instead of 0, and a large one overflows to inf (inf * 0 = NaN further on). So every
// exp() goes through safe_exp, whose argument is kept in [-80, 80]: below -80 the result is
// exactly 0 (exp(-80) ≈ 2e-35 is nothing next to a max term's 1; it also keeps -inf logits at
// probability 0), above 80 it is capped (exp(80) ≈ 5.5e34 stays finite).
fn safe_exp(x: f32) -> f32 {
    if (x < -80.0) { return 0.0; }
    return exp(min(x, 80.0));
}
