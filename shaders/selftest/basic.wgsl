// Self-test: the simplest compute there is. If this fails, nothing else can be trusted: the
// device does not run kernels, or buffers do not reach them or come back.
// y[i] = x[i] * 3 + i (u32, wrapping), which the CPU checks word for word.
// Bindings: 0 x (read, u32 [n]), 1 y (read_write, u32 [n]).
// Dispatch: (ceil(n / 64), 1, 1) workgroups of 64 threads.
@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&y)) { return; }
    y[i] = x[i] * 3u + i;
}
