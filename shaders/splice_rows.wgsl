// Image embeddings spliced into a forward's token embeddings: y[r, :] = src[slot, :] for each row r
// whose position's slot (slots[step.pos + r]) is below p.count; the other rows keep the token
// embedding the embedding op wrote. A vision-language model's picture tokens take the vision
// tower's rows this way (py_engine/vision/encoder.py writes src; the engine writes each position's
// slot, 0xffffffff for a text token, before the prompt's prefill).
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 slots (read, u32 [context]: a slot per
//           position), 3 src (read, f32 [count, dim]), 4 y (read_write, f32 [rows, dim]).
// Dispatch: (ceil(dim / 256), step.rows, 1) workgroups of 256 threads, one element each.
struct Params { dim: u32, count: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> slots: array<u32>;
@group(0) @binding(3) var<storage, read> src: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let row = gid.y;
    let col = gid.x;
    if (row >= step.rows || col >= p.dim) { return; }
    let slot = slots[step.pos + row];
    if (slot >= p.count) { return; }
    y[row * p.dim + col] = src[slot * p.dim + col];
}
