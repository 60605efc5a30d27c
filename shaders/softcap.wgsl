// Final logit softcapping (Gemma 2): y = cap * tanh(y / cap), in place over the rows the LM head
// scored (step.logit_rows of them, at rows 0 ..).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 y (read_write, f32 [logit rows, count]).
// Dispatch: (ceil(count / 256), LOGIT_ROWS_MAX, 1) workgroups of 256 threads; rows past
//           step.logit_rows return at once.
// tanh's argument is clamped to ±10 (tanh(10) is 1 to f32 precision): Metal's fast-math tanh is
// NaN for large arguments (shaders/activations.wgsl says why).
struct Params { count: u32, cap: f32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.y >= step.logit_rows || gid.x >= p.count) { return; }
    let i = gid.y * p.count + gid.x;
    y[i] = tanh(clamp(y[i] / p.cap, -10.0, 10.0)) * p.cap;
}
