// Self-test, large buffers (2 of 2): verify big_fill.wgsl's pattern on the GPU, so 64 MiB need
// not travel back to the CPU: each workgroup counts the mismatches of its GROUP_WORDS words
// (a shared-memory tree sums its threads' counts) and writes one count.
// Bindings: 0 p (uniform Params), 1 big (read, u32 [words]),
//           2 mismatches (read_write, u32 [words / GROUP_WORDS]).
// Dispatch: (words / GROUP_WORDS, 1, 1) workgroups of 256 threads.
struct Params { words: u32, seed: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> big: array<u32>;
@group(0) @binding(2) var<storage, read_write> mismatches: array<u32>;

const THREADS: u32 = 256u;
const GROUP_WORDS: u32 = 4096u;  // keep in step with big_fill.wgsl

var<workgroup> counts: array<u32, THREADS>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var bad = 0u;
    for (var k = lid; k < GROUP_WORDS; k += THREADS) {
        let i = wid.x * GROUP_WORDS + k;
        if (big[i] != ((i * 2654435761u) ^ p.seed)) { bad += 1u; }
    }
    counts[lid] = bad;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { counts[lid] += counts[lid + stride]; }
        workgroupBarrier();
    }
    if (lid == 0u) { mismatches[wid.x] = counts[0]; }
}
