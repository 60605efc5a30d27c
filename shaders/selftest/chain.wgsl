// Self-test: one step of a dependent chain. Every step reads what the previous dispatch wrote
// (two buffers, ping-pong), and each element mixes in its neighbour, so a dispatch that runs
// before its predecessor's writes are visible (the WebKit bug that gave all-zero logits), or a
// batch the GPU process drops, changes the final words. Used by the submit probe and
// the "Check this device" suite; py_engine/selftest/chain.py holds the CPU reference.
// Bindings: 0 src (read, u32 [n]), 1 dst (read_write, u32 [n]).
// Dispatch: (n / 64, 1, 1) workgroups of 64 threads; n is a multiple of 64.
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = arrayLength(&src);
    let i = gid.x;
    let mixed = src[i] * 1664525u + 1013904223u + (src[(i + 1u) % n] ^ (src[i] >> 7u));
    dst[i] = mixed;
}
