// y += x in place over a forward's rows: Whisper's decoder adds its learned position rows to its
// token embeddings (a pre-LN stream: the sum is the residual, not only the first norm's input).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 x (read, f32 [rows, width]),
//           3 y (read_write, f32 [rows, width]).
// Dispatch: (ceil(width / 256), step.rows, 1) workgroups of 256 threads, one element each.
struct Params { width: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.y >= step.rows || gid.x >= p.width) { return; }
    let i = gid.y * p.width + gid.x;
    y[i] = y[i] + x[i];
}
