// Greedy pick: the argmax of one logits row, ties → lowest id (as torch.argmax), in two dispatches:
//   FINAL = false: workgroup w reduces ids [w * chunk, (w + 1) * chunk) to best[w], chunk = ceil(vocab / groups);
//   FINAL = true:  one workgroup reduces best[0 .. groups) to best[groups], the answer.
// Bindings: 0 p (uniform Params), 1 logits (read, f32 row starting at element p.logits_base),
//           2 best (read_write, Candidate [groups + 1]).
// Dispatch: (p.groups, 1, 1) with FINAL = false, then (1, 1, 1) with FINAL = true; THREADS threads each.
// Defines: FINAL (above). SAMPLING_THREADS (py_engine/decode/row_draw.py THREADS, a power of two): the
//   threads per workgroup. SUBGROUPS (kernels.py, from the device): the workgroup's best by subgroup
//   shuffles (the order is total, so the answer is the workgroup-memory tree's).
struct Params { vocab: u32, logits_base: u32, groups: u32 }
struct Candidate { value: f32, id: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> best: array<Candidate>;

const THREADS = SAMPLING_THREADS;  // threads per workgroup (define, row_draw.THREADS)
const NO_ID = 0xffffffffu;

var<workgroup> shared_best: array<Candidate, THREADS>;

// The sampling order: higher logit first, ties → lower id; NO_ID (no token) comes after every token.
fn beats(a: Candidate, b: Candidate) -> bool {
    return a.id != NO_ID && (b.id == NO_ID || a.value > b.value || (a.value == b.value && a.id < b.id));
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32, @builtin(subgroup_invocation_id) subgroup_lane: u32,
//#endif
) {
    var mine = Candidate(0.0, NO_ID);
    if (FINAL) {
        for (var i = lid; i < p.groups; i += THREADS) {
            if (beats(best[i], mine)) { mine = best[i]; }
        }
    } else {
        let chunk = (p.vocab + p.groups - 1u) / p.groups;
        let end = min(p.vocab, (wid.x + 1u) * chunk);
        for (var i = wid.x * chunk + lid; i < end; i += THREADS) {
            let c = Candidate(logits[p.logits_base + i], i);
            if (beats(c, mine)) { mine = c; }
        }
    }
//#if SUBGROUPS
    // The best of each subgroup by a butterfly, then across the subgroups': one barrier, not nine.
    for (var o = 1u; o < subgroup_size; o <<= 1u) {
        let other = Candidate(subgroupShuffleXor(mine.value, o), subgroupShuffleXor(mine.id, o));
        if (beats(other, mine)) { mine = other; }
    }
    if (subgroup_lane == 0u) { shared_best[lid / subgroup_size] = mine; }
    workgroupBarrier();
    if (lid == 0u) {
        for (var k = 1u; k < THREADS / subgroup_size; k++) {
            if (beats(shared_best[k], mine)) { mine = shared_best[k]; }
        }
        best[select(wid.x, p.groups, FINAL)] = mine;
    }
//#else
    shared_best[lid] = mine;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride && beats(shared_best[lid + stride], shared_best[lid])) {
            shared_best[lid] = shared_best[lid + stride];
        }
        workgroupBarrier();
    }
    if (lid == 0u) { best[select(wid.x, p.groups, FINAL)] = shared_best[0]; }
//#endif
}
