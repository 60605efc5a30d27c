// Decoding on the GPU with a repetition penalty: the token just chosen joins the history that
// repetition_penalty.wgsl (SEEN) reads, a flag per vocabulary entry.
// Bindings: 0 token (read, u32: [0] the chosen id, where the next forward reads its input),
//           1 seen (read_write, u32 [vocab] flags).
// Dispatch: (1, 1, 1), one thread.
@group(0) @binding(0) var<storage, read> token: array<u32>;
@group(0) @binding(1) var<storage, read_write> seen: array<u32>;

@compute @workgroup_size(1)
fn main() {
    let id = token[0];
    if (id < arrayLength(&seen)) { seen[id] = 1u; }
}
