// Self-test: safe_exp (shaders/safe_exp.wgsl, which kernels.py appends to every kernel) at the
// arguments where a fast-math exp() goes wrong: far below -80 (NaN instead of 0 on Metal), above
// 88.7 (inf in f32), -inf (masked attention logits). y[i] = safe_exp(x[i]).
// Bindings: 0 x (read, f32 [n]), 1 y (read_write, f32 [n]).
// Dispatch: (ceil(n / 64), 1, 1) workgroups of 64 threads.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&y)) { return; }
    y[i] = safe_exp(x[i]);
}
