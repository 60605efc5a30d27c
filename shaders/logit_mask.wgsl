// Constrained decoding (py_engine/constrain/): in place on one logits row, every token whose bit
// is clear in the mask is made impossible before the row is sampled. A very negative finite value
// rather than -inf: WGSL lets compilers assume no infinities, and the samplers' exp() of it is 0.
// Bindings: 0 p (uniform Params), 1 mask (read, u32 [ceil(vocab / 32)]: bit i % 32 of word i / 32
//           set = token i allowed), 2 logits (read_write, f32 row starting at element p.logits_base).
// Dispatch: (ceil(vocab / SAMPLING_THREADS), 1, 1) workgroups of SAMPLING_THREADS threads.
// Defines: SAMPLING_THREADS (py_engine/decode/row_draw.py THREADS): threads per workgroup.
struct Params { vocab: u32, logits_base: u32 }

const IMPOSSIBLE: f32 = -1.0e30;

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> mask: array<u32>;
@group(0) @binding(2) var<storage, read_write> logits: array<f32>;

@compute @workgroup_size(SAMPLING_THREADS)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let id = gid.x;
    if (id >= p.vocab) { return; }
    if ((mask[id / 32u] & (1u << (id % 32u))) == 0u) { logits[p.logits_base + id] = IMPOSSIBLE; }
}
