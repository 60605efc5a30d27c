// Self-test, large buffers (1 of 2): fill a big buffer with a pattern that differs at every word,
// so a write landing at the wrong address, a page lost or aliased, or a stale page is caught.
// pattern(i) = (i * 2654435761) ^ seed: the multiplier is odd, so no two words (of 2^32) match;
// big_check.wgsl and py_engine/selftest/memory_checks.py compute the same.
// Bindings: 0 p (uniform Params), 1 big (read_write, u32 [words]).
// Dispatch: (words / GROUP_WORDS, 1, 1) workgroups of 256 threads; each writes GROUP_WORDS
//           consecutive words, 256 at a time (coalesced). words is a multiple of GROUP_WORDS.
struct Params { words: u32, seed: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> big: array<u32>;

const THREADS: u32 = 256u;
const GROUP_WORDS: u32 = 4096u;  // keep in step with memory_checks.py and big_check.wgsl

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    for (var k = lid; k < GROUP_WORDS; k += THREADS) {
        let i = wid.x * GROUP_WORDS + k;
        big[i] = (i * 2654435761u) ^ p.seed;
    }
}
