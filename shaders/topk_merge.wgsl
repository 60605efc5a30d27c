// Top-k, pass 2 of 2. One workgroup merges the LISTS sorted lists of pass 1 into the row's first
// CANDIDATES tokens in the sampling order (logit descending, ties → lower id), and combines the
// tiles' stats into lse = log Σ exp(logit * inv_temperature) over the whole row.
// Thread t owns lists t, t + THREADS, ... and offers the best head among them; each of the CANDIDATES
// rounds takes the workgroup's best offer and advances the winning list.
// Bindings: 0 lists (read, Candidate [LISTS * CANDIDATES]), 1 stats (read, TileStats [LISTS]),
//           2 result (read_write, TopResult).
// Dispatch: (1, 1, 1), THREADS threads.
// Defines (py_engine/decode/row_draw.py): CANDIDATES, LISTS (the tiles of topk_chunks.wgsl),
//   SAMPLING_THREADS = THREADS (threads per workgroup, a power of two). SUBGROUPS (kernels.py,
//   from the device): each round's best offer by subgroup shuffles, then across the subgroups'
//   (2 barriers a round instead of 10; the order is total, so the candidates are the
//   workgroup-memory tree's).
struct Candidate { value: f32, id: u32 }
struct TileStats { max_scaled: f32, sum_exp: f32 }
struct TopResult { top: array<Candidate, CANDIDATES>, lse: f32 }

@group(0) @binding(0) var<storage, read> lists: array<Candidate>;
@group(0) @binding(1) var<storage, read> stats: array<TileStats>;
@group(0) @binding(2) var<storage, read_write> result: TopResult;

const THREADS = SAMPLING_THREADS;  // threads per workgroup (define, row_draw.THREADS)
const LISTS_PER_THREAD = (LISTS + THREADS - 1u) / THREADS;
const NO_ID = 0xffffffffu;

var<workgroup> offer_value: array<f32, THREADS>;
var<workgroup> offer_id: array<u32, THREADS>;
var<workgroup> offer_list: array<u32, THREADS>;
var<workgroup> stat_max: array<f32, THREADS>;
var<workgroup> stat_sum: array<f32, THREADS>;

var<private> cursor: array<u32, LISTS_PER_THREAD>;

struct Offer { value: f32, id: u32, list: u32 }

// The sampling order: higher logit first, ties → lower id; NO_ID (no token) comes after every token.
fn beats(a: Candidate, b: Candidate) -> bool {
    return a.id != NO_ID && (b.id == NO_ID || a.value > b.value || (a.value == b.value && a.id < b.id));
}

// Empty tiles (all -inf) have sum 0 and no meaningful max.
fn combine(a: TileStats, b: TileStats) -> TileStats {
    if (a.sum_exp == 0.0) { return b; }
    if (b.sum_exp == 0.0) { return a; }
    let m = max(a.max_scaled, b.max_scaled);
    return TileStats(m, a.sum_exp * safe_exp(a.max_scaled - m) + b.sum_exp * safe_exp(b.max_scaled - m));
}

// The best head among this thread's lists; list = NO_ID once all of them are used up.
fn best_head(lid: u32) -> Offer {
    var best = Offer(0.0, NO_ID, NO_ID);
    for (var k = 0u; k < LISTS_PER_THREAD; k++) {
        let list = lid + k * THREADS;
        if (list < LISTS && cursor[k] < CANDIDATES) {
            let head = lists[list * CANDIDATES + cursor[k]];
            if (beats(head, Candidate(best.value, best.id))) {
                best = Offer(head.value, head.id, list);
            }
        }
    }
    return best;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32, @builtin(subgroup_invocation_id) subgroup_lane: u32,
//#endif
) {
    var stat = TileStats(0.0, 0.0);
    for (var list = lid; list < LISTS; list += THREADS) { stat = combine(stat, stats[list]); }
    stat_max[lid] = stat.max_scaled;
    stat_sum[lid] = stat.sum_exp;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            let c = combine(TileStats(stat_max[lid], stat_sum[lid]),
                            TileStats(stat_max[lid + stride], stat_sum[lid + stride]));
            stat_max[lid] = c.max_scaled;
            stat_sum[lid] = c.sum_exp;
        }
        workgroupBarrier();
    }
    if (lid == 0u) { result.lse = stat_max[0] + log(stat_sum[0]); }

    var mine = best_head(lid);
    for (var k = 0u; k < CANDIDATES; k++) {
//#if SUBGROUPS
        var best = mine;
        for (var o = 1u; o < subgroup_size; o <<= 1u) {
            let other = Offer(subgroupShuffleXor(best.value, o), subgroupShuffleXor(best.id, o), subgroupShuffleXor(best.list, o));
            if (beats(Candidate(other.value, other.id), Candidate(best.value, best.id))) { best = other; }
        }
        if (subgroup_lane == 0u) {
            let s = lid / subgroup_size;
            offer_value[s] = best.value;
            offer_id[s] = best.id;
            offer_list[s] = best.list;
        }
        workgroupBarrier();
        // Every thread takes the same winner from the subgroups' offers.
        var win = Offer(offer_value[0], offer_id[0], offer_list[0]);
        for (var s = 1u; s < THREADS / subgroup_size; s++) {
            if (beats(Candidate(offer_value[s], offer_id[s]), Candidate(win.value, win.id))) {
                win = Offer(offer_value[s], offer_id[s], offer_list[s]);
            }
        }
//#else
        offer_value[lid] = mine.value;
        offer_id[lid] = mine.id;
        offer_list[lid] = mine.list;
        workgroupBarrier();
        for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
            if (lid < stride) {
                let other = Candidate(offer_value[lid + stride], offer_id[lid + stride]);
                if (beats(other, Candidate(offer_value[lid], offer_id[lid]))) {
                    offer_value[lid] = other.value;
                    offer_id[lid] = other.id;
                    offer_list[lid] = offer_list[lid + stride];
                }
            }
            workgroupBarrier();
        }
        let win = Offer(offer_value[0], offer_id[0], offer_list[0]);
//#endif
        let winner_list = win.list;
        if (lid == 0u) { result.top[k] = Candidate(win.value, win.id); }
        if (winner_list != NO_ID && winner_list % THREADS == lid) {
            cursor[winner_list / THREADS] += 1u;
            mine = best_head(lid);
        }
        workgroupBarrier();  // every thread has read the winner before the next round's offers overwrite it
    }
}
