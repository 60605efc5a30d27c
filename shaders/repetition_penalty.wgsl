// Repetition penalty (HF RepetitionPenaltyLogitsProcessor), in place on one logits row: for each id
// in ids[0 .. p.count), logit * penalty if logit < 0 else logit / penalty.
// The ids must be distinct: each is one thread's read-modify-write of its logit.
// SEEN (decoding on the GPU): ids holds a flag per vocabulary entry instead (non-zero: the id is in
// the history; mark_seen.wgsl sets the chosen token's), p.count is the vocabulary and thread i
// handles id i.
// Bindings: 0 p (uniform Params), 1 ids (read, u32 [count], each < vocab; SEEN: u32 [vocab] flags),
//           2 logits (read_write, f32 row starting at element p.logits_base).
// Dispatch: (ceil(count / SAMPLING_THREADS), 1, 1) workgroups of SAMPLING_THREADS threads.
// Defines: SEEN (above). SAMPLING_THREADS (py_engine/decode/row_draw.py THREADS): threads per workgroup.
struct Params { count: u32, penalty: f32, logits_base: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> logits: array<f32>;

@compute @workgroup_size(SAMPLING_THREADS)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= p.count || (SEEN && ids[gid.x] == 0u)) { return; }
    let i = p.logits_base + select(ids[gid.x], gid.x, SEEN);
    let v = logits[i];
    logits[i] = select(v / p.penalty, v * p.penalty, v < 0.0);
}
