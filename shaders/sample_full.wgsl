// Exact draw over the whole vocabulary, for what the top-k candidate list cannot decide (rare).
// Tokens are taken in the sampling order (logit descending, ties → lower id) and probabilities are
// exp(logit * inv_temperature - lse). The kept set is a prefix of that order:
//   top_k < vocab: every token whose logit is >= the top_k-th largest (ties kept, as HF's top-k);
//   top_p < 1:     then the shortest prefix holding >= top_p of the kept mass (HF's top-p).
// With skip_candidates = 1, tokens ranked at or before (last_value, last_id), the candidates that
// the caller already decided against, are left out. The token is drawn by inverse CDF in id order
// at u * (mass left): per-thread chunk sums, a prefix scan, then the owning thread scans its chunk.
// Cuts are found by 16-way bisection, one pass over the row per 4-bit digit: 8 over the logit's
// order key (and, for top_p, ceil(log2(vocab) / 4) more over the ids of tied logits).
// When nothing left has mass (u fell in the rounding gap above the candidates), the last candidate
// is chosen. skip_draw = 1: no draw at all (sample_pick.wgsl decided the token; this dispatch
// follows it on the GPU-fed decode path, its Params copied from sample_pick's output).
// Bindings: 0 p (uniform Params), 1 logits (read, f32 row starting at element p.logits_base),
//           2 chosen (read_write, u32 [1]).
// Dispatch: (1, 1, 1), THREADS threads.
// Defines: SAMPLING_THREADS (py_engine/decode/row_draw.py THREADS, a power of two >= 4): threads per
//   workgroup; its workgroup memory is 36 bytes a thread (lanes, partial).
struct Params {
    vocab: u32, logits_base: u32, inv_temperature: f32, lse: f32, top_k: u32, top_p: f32,
    skip_candidates: u32, last_value: f32, last_id: u32, u: f32, skip_draw: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> chosen: array<u32>;

const THREADS = SAMPLING_THREADS;  // threads per workgroup (define, row_draw.THREADS)
const NO_ID = 0xffffffffu;

var<workgroup> partial: array<f32, THREADS>;
var<workgroup> lanes: array<array<vec4<f32>, 4>, THREADS / 2u>;
var<workgroup> owner_plus_one: atomic<u32>;

// Monotone map of f32 onto u32, so a logit cut is an integer bisection; -0 and +0 share a key
// since they compare equal (and so tie, ties going by id) everywhere else.
fn order_key(v: f32) -> u32 {
    let b = select(bitcast<u32>(v), 0u, v == 0.0);
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// Whether token (key, id) comes strictly before the position bound = (key, id) in the sampling order.
fn precedes(key: u32, id: u32, bound: vec2<u32>) -> bool {
    return key > bound.x || (key == bound.x && id < bound.y);
}

fn probability(v: f32) -> f32 {
    return safe_exp(v * p.inv_temperature - p.lse);  // -inf logits: exactly 0
}

fn workgroup_sum(lid: u32, value: f32) -> f32 {
    partial[lid] = value;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { partial[lid] += partial[lid + stride]; }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();  // all have read the total before partial is reused
    return total;
}

// Count (by_count) or probability mass of the tokens preceding bound.
fn weight_before(lid: u32, bound: vec2<u32>, by_count: bool) -> f32 {
    var sum = 0.0;
    for (var i = lid; i < p.vocab; i += THREADS) {
        let v = logits[p.logits_base + i];
        if (precedes(order_key(v), i, bound)) { sum += select(probability(v), 1.0, by_count); }
    }
    return workgroup_sum(lid, sum);
}

// One 4-bit digit of a bisection: lane t (sums[t / 4][t % 4]) weighs the tokens preceding
// base with t << shift or-ed into its key (in_key; ids then unbounded) or into its id. base is
// zero below the digit, so a token either precedes every lane's bound (its bits above the digit
// already put it first), or none, or has the same bits above and compares by its digit d alone.
// Named accumulators, not arrays indexed in the loop, so that they stay in registers.
fn digit_weights(lid: u32, base: vec2<u32>, shift: u32, in_key: bool, by_count: bool) -> array<vec4<f32>, 4> {
    let above = ~((16u << shift) - 1u);  // the bits above the digit (none for the top digit)
    var everywhere = 0.0;
    var s0 = vec4<f32>(0.0);
    var s1 = vec4<f32>(0.0);
    var s2 = vec4<f32>(0.0);
    var s3 = vec4<f32>(0.0);
    for (var i = lid; i < p.vocab; i += THREADS) {
        let v = logits[p.logits_base + i];
        let w = select(probability(v), 1.0, by_count);
        let key = order_key(v);
        var first: bool;
        var same_above: bool;
        var digit: u32;
        if (in_key) {
            first = (key & above) > (base.x & above);
            same_above = (key & above) == (base.x & above);
            digit = (key >> shift) & 15u;
        } else {
            first = key > base.x || (key == base.x && (i & above) < (base.y & above));
            same_above = key == base.x && (i & above) == (base.y & above);
            digit = (i >> shift) & 15u;
        }
        if (first) {
            everywhere += w;
        } else if (same_above) {
            // A key digit d is at or past bound t when d >= t; an id digit is before it when d < t.
            let d = vec4<u32>(digit);
            let ww = vec4<f32>(w);
            let zero = vec4<f32>(0.0);
            let t0 = vec4<u32>(0u, 1u, 2u, 3u);
            let t1 = t0 + 4u;
            let t2 = t0 + 8u;
            let t3 = t0 + 12u;
            s0 += select(zero, ww, select((d < t0), (d >= t0), in_key));
            s1 += select(zero, ww, select((d < t1), (d >= t1), in_key));
            s2 += select(zero, ww, select((d < t2), (d >= t2), in_key));
            s3 += select(zero, ww, select((d < t3), (d >= t3), in_key));
        }
    }
    let sums = array<vec4<f32>, 4>(s0 + everywhere, s1 + everywhere, s2 + everywhere, s3 + everywhere);
    // Tree reduction: the upper half of the threads hands over first, so THREADS / 2 lanes suffice.
    if (lid >= THREADS / 2u) { lanes[lid - THREADS / 2u] = sums; }
    workgroupBarrier();
    if (lid < THREADS / 2u) {
        for (var q = 0u; q < 4u; q++) { lanes[lid][q] += sums[q]; }
    }
    workgroupBarrier();
    for (var stride = THREADS / 4u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            for (var q = 0u; q < 4u; q++) { lanes[lid][q] += lanes[lid + stride][q]; }
        }
        workgroupBarrier();
    }
    let total = lanes[0];
    workgroupBarrier();  // all have read the total before lanes are reused
    return total;
}

// The largest order key K whose tokens with key >= K weigh >= goal: the key of the token at
// which the running weight in the sampling order reaches goal. Eight 4-bit digits, top first.
fn key_cut(lid: u32, goal: f32, by_count: bool) -> u32 {
    var key = 0u;
    for (var digit = 8u; digit > 0u; digit--) {
        let shift = 4u * (digit - 1u);
        let w = digit_weights(lid, vec2<u32>(key, NO_ID), shift, true, by_count);
        var best = 0u;
        for (var t = 1u; t < 16u; t++) {
            if (w[t / 4u][t % 4u] >= goal) { best = t; }
        }
        key |= best << shift;
    }
    return key;
}

// Among tokens with order key `key`, the id at which the running mass reaches goal: the
// largest J whose predecessors (key, < J) still weigh < goal.
fn id_cut(lid: u32, key: u32, goal: f32) -> u32 {
    var id = 0u;
    for (var digit = (35u - countLeadingZeros(p.vocab)) / 4u; digit > 0u; digit--) {
        let shift = 4u * (digit - 1u);
        let w = digit_weights(lid, vec2<u32>(key, id), shift, false, false);
        var best = 0u;
        for (var t = 1u; t < 16u; t++) {
            if (w[t / 4u][t % 4u] < goal) { best = t; }
        }
        id |= best << shift;
    }
    return id;
}

// Whether token i (logit v) is in the draw: kept, and not one of the skipped candidates.
fn in_draw(v: f32, i: u32, kept: vec2<u32>) -> bool {
    let key = order_key(v);
    let candidate = precedes(key, i, vec2<u32>(order_key(p.last_value), p.last_id + 1u));
    return precedes(key, i, kept) && !(p.skip_candidates == 1u && candidate);
}

@compute @workgroup_size(THREADS)
fn main(@builtin(local_invocation_index) lid: u32) {
    if (p.skip_draw != 0u) { return; }  // uniform: every thread leaves
    // Not left to zero-initialisation: lavapipe under wgpu-native was seen to skip it.
    if (lid == 0u) { atomicStore(&owner_plus_one, 0u); }
    var kept = vec2<u32>(0u, 0u);  // precedes(kept): every token (key 0 is a NaN pattern)
    if (p.top_k < p.vocab) {
        kept = vec2<u32>(key_cut(lid, f32(p.top_k), true), NO_ID);
    }
    if (p.top_p < 1.0) {
        let goal = p.top_p * weight_before(lid, kept, false);
        let key = key_cut(lid, goal, false);
        kept = vec2<u32>(key, id_cut(lid, key, goal) + 1u);
    }

    let chunk = (p.vocab + THREADS - 1u) / THREADS;
    let start = min(lid * chunk, p.vocab);
    let end = min(start + chunk, p.vocab);
    var mine = 0.0;
    for (var i = start; i < end; i++) {
        let v = logits[p.logits_base + i];
        if (in_draw(v, i, kept)) { mine += probability(v); }
    }

    // Inclusive prefix scan (Hillis-Steele) of the chunk masses.
    partial[lid] = mine;
    workgroupBarrier();
    for (var offset = 1u; offset < THREADS; offset <<= 1u) {
        var add = 0.0;
        if (lid >= offset) { add = partial[lid - offset]; }
        workgroupBarrier();
        partial[lid] += add;
        workgroupBarrier();
    }
    var before_mine = 0.0;
    if (lid > 0u) { before_mine = partial[lid - 1u]; }
    let goal = p.u * partial[THREADS - 1u];

    // The owner is the last chunk with mass that starts at or before goal.
    if (mine > 0.0 && before_mine <= goal) { atomicMax(&owner_plus_one, lid + 1u); }
    workgroupBarrier();
    let owner_plus_one_now = atomicLoad(&owner_plus_one);
    if (lid == 0u && owner_plus_one_now == 0u) { chosen[0] = p.last_id; }
    if (owner_plus_one_now == lid + 1u) {
        let local_target = goal - before_mine;
        var run = 0.0;
        var pick = NO_ID;
        for (var i = start; i < end; i++) {
            let v = logits[p.logits_base + i];
            let q = probability(v);
            if (q > 0.0 && in_draw(v, i, kept)) {
                pick = i;
                run += q;
                if (run > local_target) { break; }
            }
        }
        chosen[0] = pick;
    }
}
