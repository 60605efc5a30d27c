// The draw from the top-k candidates, on the GPU: py_engine/decode/sampling.py's choose() in f32, so that
// a sampled token feeds the next forward without the host. Candidates come in the sampling order
// (logit descending, ties → lower id) with the row's log-sum-exp of logits / temperature
// (topk_merge.wgsl); probabilities are exp(logit * inv_temperature - lse). top_k keeps the whole
// tie at its cut; top_p then the shortest prefix reaching top_p of the kept mass; the token is
// drawn by inverse CDF at u * (kept mass). Where the candidates cannot decide (the kept set runs
// past them, or u lands past their mass), it writes sample_full.wgsl's Params for the exact draw
// over the whole row; otherwise those Params say skip_draw and the token is written here.
// Bindings: 0 p (uniform Params; u is rewritten for every token),
//           1 result (read, TopResult: CANDIDATES Candidates and lse),
//           2 out (read_write, u32: [0] the token; [FULL_PARAMS_AT ..] sample_full's Params, 11
//             words, which the caller copies into sample_full's uniform before dispatching it).
// Dispatch: (1, 1, 1), one thread (CANDIDATES = 64: a few hundred operations).
// Defines (py_engine/decode/row_draw.py): CANDIDATES; FULL_PARAMS_AT (where in out sample_full's Params start).
struct Params { vocab: u32, logits_base: u32, inv_temperature: f32, top_k: u32, top_p: f32, u: f32 }
struct Candidate { value: f32, id: u32 }
struct TopResult { top: array<Candidate, CANDIDATES>, lse: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> result: TopResult;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const LAST_BELOW_ONE = 0.99999994;  // the largest f32 below 1

fn probability(i: u32) -> f32 {
    return safe_exp(result.top[i].value * p.inv_temperature - result.lse);
}

// sample_full's Params (its field order): the whole row's draw, or none (skip_draw).
fn full_draw(top_k: u32, top_p: f32, u: f32, skip_candidates: bool, skip_draw: bool) {
    let last = min(CANDIDATES, p.vocab) - 1u;
    let at = FULL_PARAMS_AT;
    out[at] = p.vocab;
    out[at + 1u] = p.logits_base;
    out[at + 2u] = bitcast<u32>(p.inv_temperature);
    out[at + 3u] = bitcast<u32>(result.lse);
    out[at + 4u] = top_k;
    out[at + 5u] = bitcast<u32>(top_p);
    out[at + 6u] = select(0u, 1u, skip_candidates);
    out[at + 7u] = bitcast<u32>(result.top[last].value);
    out[at + 8u] = result.top[last].id;
    out[at + 9u] = bitcast<u32>(u);
    out[at + 10u] = select(0u, 1u, skip_draw);
}

fn decided(token: u32) {
    out[0] = token;
    full_draw(p.vocab, 1.0, 0.0, false, true);
}

@compute @workgroup_size(1)
fn main() {
    let n = min(CANDIDATES, p.vocab);
    var keep = n;
    var complete = n == p.vocab;  // the candidates are the whole row
    if (p.top_k > 0u && p.top_k < p.vocab) {
        let kth = p.top_k - 1u;
        if (kth >= n) { full_draw(p.top_k, p.top_p, p.u, false, false); return; }
        keep = kth + 1u;
        while (keep < n && result.top[keep].value == result.top[kth].value) { keep++; }
        if (keep == n && n < p.vocab) { full_draw(p.top_k, p.top_p, p.u, false, false); return; }  // the tie may go on
        complete = true;
    }
    var mass = 1.0;  // the kept set's: the candidates' sum when they hold all of it, else the row's
    if (complete) {
        mass = 0.0;
        for (var i = 0u; i < keep; i++) { mass += probability(i); }
    }
    if (p.top_p < 1.0) {
        let need = p.top_p * mass;
        var running = 0.0;
        var k = 0u;
        while (k < keep && (k == 0u || running < need)) {
            running += probability(k);
            k++;
        }
        if (running < need && !complete) { full_draw(p.vocab, p.top_p, p.u, false, false); return; }
        keep = k;
        mass = running;
        complete = true;
    }
    let goal = p.u * mass;
    var running = 0.0;
    for (var i = 0u; i < keep; i++) {
        running += probability(i);
        if (goal < running) { decided(result.top[i].id); return; }
    }
    if (complete) { decided(result.top[keep - 1u].id); return; }  // rounding at the top of the range
    let tail_u = clamp((goal - running) / (mass - running), 0.0, LAST_BELOW_ONE);
    full_draw(p.vocab, 1.0, tail_u, true, false);
}
