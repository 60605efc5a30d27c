// Self-test: half floats packed in u32 words, as the f16_packed / ggml weight snippets read them
// on devices without shader-f16 (no `enable f16;` here: it must run everywhere).
// packed[i] = pack2x16float(pairs[i]); unpacked[i] = unpack2x16float(halves[i]).
// Bindings: 0 pairs (read, vec2<f32> [n]), 1 halves (read, u32 [n]),
//           2 packed (read_write, u32 [n]), 3 unpacked (read_write, vec2<f32> [n]).
// Dispatch: (ceil(n / 64), 1, 1) workgroups of 64 threads; n is a multiple of 4.
@group(0) @binding(0) var<storage, read> pairs: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read> halves: array<u32>;
@group(0) @binding(2) var<storage, read_write> packed: array<u32>;
@group(0) @binding(3) var<storage, read_write> unpacked: array<vec2<f32>>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= arrayLength(&packed)) { return; }
    packed[i] = pack2x16float(pairs[i]);
    unpacked[i] = unpack2x16float(halves[i]);
}
