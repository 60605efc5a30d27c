// A few query rows' causal multi-head attention over the KV cache (a decode token's: what
// attention.wgsl computes, with the same bindings, grid, split partials and ROPE_KV (its V norm
// and shared-KV layers too: attention_heads.wgsl) / RING / window / softcap), for devices whose
// subgroups are at least 32 invocations wide, a multiple of 32 (attention_grid.few_rows_kernel):
// no workgroup barrier between its keys. Each 32 consecutive invocations (a "warp": a subgroup, or
// part of a wider one) run their own online softmax over steps of STEP_KEYS keys (8, or 4 where a
// key row has more than 32 words), and the workgroup's warps merge once, after their last keys.
// A step: every lane loads its 16-byte words of the step's keys and values first (KEY_LANES lanes
// a key, then VALUE_WORDS lanes a value row), then the keys' scores (4 heads a vec4, summed over
// the key's lanes by shuffles), the step's max, the weights, and the values weighed by them (a
// lane owns one 16-byte word of the value row: 8 dimensions of f16, 4 of f32, for every head).
// attention.wgsl, whose tiles of 64 keys wait at 3 barriers each, took 32.4 us a layer for the
// 8B shape at 4,513 keys on an H200 (11.5 at 129); this kernel 19.1 (7.9): docs/attention-kernels.md.
// Without SUBGROUPS (tests on devices whose subgroups are narrower) the shuffles go through
// workgroup memory and barriers: the same lanes and arithmetic, bit for bit.
// Bindings: attention.wgsl's, the caches read and written as 16-byte words (kernels.py: a cache
// bound as array<vec4<u32>> gets K_F32 / V_F32, true for an f32 cache (4 elements a word), false
// for f16 or f16_packed (8, the same bytes)).
// Defines: GROUP_HEADS (<= 8; <= 4 when HEAD_DIM > 128), HEAD_DIM (a multiple of 16 for an f32 K,
// of 32 for f16, at most 256), WARPS (subgroups a workgroup: attention_grid.subgroup_warps),
// ROPE_KV, RING, SUBGROUPS (kernels.py).
// Dispatch: attention_grid.attention_grid: (n_heads / GROUP_HEADS, step.rows, splits) workgroups
//           of WARPS * 32 threads.
struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, q_stride: u32,
    capacity: u32, window: u32, scale: f32, softcap: f32,
    split_len: u32, splits: u32, rotary_dim: u32, has_qk_norm: u32,
    interleaved: u32, eps: f32, norm_offset: f32, partials_at: u32,
    q_head_stride: u32, tiled_split_len: u32, tiled_splits: u32, has_v_norm: u32,  // tiled_*: attention_tiled.wgsl's
    owns_kv: u32, pad0: u32, pad1: u32, pad2: u32,  // has_v_norm, owns_kv: ROPE_KV's (attention_heads.wgsl)
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> v_cache: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;
@group(0) @binding(6) var<storage, read> cos_sin: array<f32>;
@group(0) @binding(7) var<storage, read> q_norm: array<f32>;
@group(0) @binding(8) var<storage, read> k_norm: array<f32>;

const LANES: u32 = 32u;  // a warp: a subgroup, or a 32 of a wider one
const THREADS: u32 = WARPS * LANES;
const HD: u32 = HEAD_DIM;
const QV: u32 = (GROUP_HEADS + 3u) / 4u;  // vec4s of heads (1 or 2)
const K_ELEMS: u32 = 8u / (1u + u32(K_F32));  // elements a word
const V_ELEMS: u32 = 8u / (1u + u32(V_F32));
const K_WORDS: u32 = HD / K_ELEMS;  // words a key row
const VALUE_WORDS: u32 = HD / V_ELEMS;  // words a value row: a lane each
const KEY_LANES: u32 = 4u * (1u + u32(K_WORDS > 32u));  // lanes a key's score
const KEY_LOADS: u32 = K_WORDS / KEY_LANES;  // a lane's words of its key (<= 8)
const STEP_KEYS: u32 = LANES / KEY_LANES;
const VALUE_KEYS: u32 = LANES / VALUE_WORDS;  // keys one value load covers
const VALUE_LOADS: u32 = STEP_KEYS / VALUE_KEYS;  // a lane's value words a step (<= 8)
const_assert HD % (K_ELEMS * KEY_LANES) == 0u && HD % V_ELEMS == 0u;
const_assert THREADS >= 128u;  // norm_head's sums
// (attention_grid.subgroups_kernel_fits: the loads a lane issues are 1, 2, 4 or 8 named words)
const_assert VALUE_WORDS <= LANES && KEY_LOADS * VALUE_LOADS > 0u && (KEY_LOADS & (KEY_LOADS - 1u)) == 0u;
const_assert KEY_LOADS <= 8u && VALUE_LOADS <= 8u && (VALUE_LOADS & (VALUE_LOADS - 1u)) == 0u;
const_assert QV * HD <= 256u && WARPS / 2u * QV * HD <= 512u;

// The group's q (attention_heads.wgsl's qg: QV * HD vec4s) until the last key; then the
// subgroups' merge (their value sums, WARPS / 2 at a time).
var<workgroup> qg: array<vec4<f32>, 512>;
// ROPE_KV: norm_head's sums; without SUBGROUPS, the lanes' exchanges.
var<workgroup> part: array<vec4<f32>, max(THREADS, 128u)>;
var<workgroup> new_k: array<f32, 256>;  // ROPE_KV: the new key, normalised and rotated
var<workgroup> new_v: array<f32, 256>;  // ROPE_KV: the new value
var<workgroup> warp_max: array<Heads, WARPS>;
var<workgroup> warp_sum: array<Heads, WARPS>;

// Lane exchanges within a warp (lid: the invocation; its lane is lid % 32; subgroups hold
// consecutive invocations, as gemv.wgsl assumes). Called in uniform control flow only (without
// SUBGROUPS they wait at barriers).
var<private> subgroup_lane: u32;  // SUBGROUPS: the invocation's index in its subgroup
fn lanes_xor4(v: vec4<f32>, o: u32, lid: u32) -> vec4<f32> {
//#if SUBGROUPS
    return subgroupShuffleXor(v, o);
//#else
    part[lid] = v;
    workgroupBarrier();
    let r = part[lid ^ o];
    workgroupBarrier();
    return r;
//#endif
}

fn lanes_read4(v: vec4<f32>, lane: u32, lid: u32) -> vec4<f32> {
//#if SUBGROUPS
    return subgroupShuffle(v, subgroup_lane - subgroup_lane % LANES + lane);
//#else
    part[lid] = v;
    workgroupBarrier();
    let r = part[lid - lid % LANES + lane];
    workgroupBarrier();
    return r;
//#endif
}

fn lanes_xor(v: Heads, o: u32, lid: u32) -> Heads {
    var out = Heads(lanes_xor4(v.a, o, lid), vec4<f32>(0.0));
    if (QV > 1u) { out.b = lanes_xor4(v.b, o, lid); }
    return out;
}

fn lanes_read(v: Heads, lane: u32, lid: u32) -> Heads {
    var out = Heads(lanes_read4(v.a, lane, lid), vec4<f32>(0.0));
    if (QV > 1u) { out.b = lanes_read4(v.b, lane, lid); }
    return out;
}

// What the caches hold of a pair of the new key or value (their rounding).
fn stored(v: vec2<f32>, is_f32: bool) -> vec2<f32> {
    if (is_f32) { return v; }
    return unpack2x16float(pack2x16float(v));
}

// Element d of the new key (src 0) or value (1); past the row, its last.
fn new_elem(src: u32, d: u32) -> f32 {
    if (src == 0u) { return new_k[min(d, HD - 1u)]; }
    return new_v[min(d, HD - 1u)];
}

// Word i of the new key or value, as the caches store it (4 elements a word, or 8).
fn new_word(src: u32, i: u32, is_f32: bool) -> vec4<u32> {
    if (is_f32) {
        let d = 4u * i;
        return bitcast<vec4<u32>>(vec4<f32>(new_elem(src, d), new_elem(src, d + 1u), new_elem(src, d + 2u), new_elem(src, d + 3u)));
    }
    let d = 8u * i;
    return vec4<u32>(pack2x16float(vec2<f32>(new_elem(src, d), new_elem(src, d + 1u))),
                     pack2x16float(vec2<f32>(new_elem(src, d + 2u), new_elem(src, d + 3u))),
                     pack2x16float(vec2<f32>(new_elem(src, d + 4u), new_elem(src, d + 5u))),
                     pack2x16float(vec2<f32>(new_elem(src, d + 6u), new_elem(src, d + 7u))));
}

// Word i of cache row `row`'s key / value; the new row's from new_k / new_v (ROPE_KV). The
// cache is read first either way (as attention.wgsl's key_pair: the loads stay batched).
fn k_word(row: u32, i: u32) -> vec4<u32> {
    let cached = k_cache[row * K_WORDS + i];
    if (ROPE_KV && row == new_row) { return new_word(0u, i, K_F32); }
    return cached;
}

fn v_word(row: u32, i: u32) -> vec4<u32> {
    let cached = v_cache[row * VALUE_WORDS + i];
    if (ROPE_KV && row == new_row) { return new_word(1u, i, V_F32); }
    return cached;
}

// A word's elements: 4 (f32) in lo, or 8 (f16) in lo and hi.
struct Elems { lo: vec4<f32>, hi: vec4<f32> }

fn elems(w: vec4<u32>, is_f32: bool) -> Elems {
    if (is_f32) { return Elems(bitcast<vec4<f32>>(w), vec4<f32>(0.0)); }
    return Elems(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)), vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)));
}

// s + key word i (of its row) times the group's q, for every head.
fn key_dot(w: vec4<u32>, i: u32, s: Heads) -> Heads {
    let e = elems(w, K_F32);
    let d = i * K_ELEMS;
    var out = heads_fma(q_heads(d + 3u), e.lo.w, heads_fma(q_heads(d + 2u), e.lo.z,
              heads_fma(q_heads(d + 1u), e.lo.y, heads_fma(q_heads(d), e.lo.x, s))));
    if (!K_F32) {
        out = heads_fma(q_heads(d + 7u), e.hi.w, heads_fma(q_heads(d + 6u), e.hi.z,
              heads_fma(q_heads(d + 5u), e.hi.y, heads_fma(q_heads(d + 4u), e.hi.x, out))));
    }
    return out;
}

// A lane's value sums: its word's 8 (f32: 4) dimensions, each for every head. Named, not an
// array (drivers put function-scope arrays in slow local memory).
struct Acc { d0: Heads, d1: Heads, d2: Heads, d3: Heads, d4: Heads, d5: Heads, d6: Heads, d7: Heads }

fn heads_mul(x: Heads, f: Heads) -> Heads {
    var out = Heads(x.a * f.a, vec4<f32>(0.0));
    if (QV > 1u) { out.b = x.b * f.b; }
    return out;
}

fn acc_scale(a: Acc, f: Heads) -> Acc {
    var out = a;
    out.d0 = heads_mul(a.d0, f); out.d1 = heads_mul(a.d1, f); out.d2 = heads_mul(a.d2, f); out.d3 = heads_mul(a.d3, f);
    if (!V_F32) { out.d4 = heads_mul(a.d4, f); out.d5 = heads_mul(a.d5, f); out.d6 = heads_mul(a.d6, f); out.d7 = heads_mul(a.d7, f); }
    return out;
}

// a + value word w weighed by its key's weights pk.
fn acc_value(a: Acc, w: vec4<u32>, pk: Heads) -> Acc {
    let e = elems(w, V_F32);
    var out = a;
    out.d0 = heads_fma(pk, e.lo.x, a.d0); out.d1 = heads_fma(pk, e.lo.y, a.d1);
    out.d2 = heads_fma(pk, e.lo.z, a.d2); out.d3 = heads_fma(pk, e.lo.w, a.d3);
    if (!V_F32) {
        out.d4 = heads_fma(pk, e.hi.x, a.d4); out.d5 = heads_fma(pk, e.hi.y, a.d5);
        out.d6 = heads_fma(pk, e.hi.z, a.d6); out.d7 = heads_fma(pk, e.hi.w, a.d7);
    }
    return out;
}

// a plus lane (lid ^ o)'s a.
fn acc_add_xor(a: Acc, o: u32, lid: u32) -> Acc {
    var out = a;
    out.d0 = heads_add(a.d0, lanes_xor(a.d0, o, lid)); out.d1 = heads_add(a.d1, lanes_xor(a.d1, o, lid));
    out.d2 = heads_add(a.d2, lanes_xor(a.d2, o, lid)); out.d3 = heads_add(a.d3, lanes_xor(a.d3, o, lid));
    if (!V_F32) {
        out.d4 = heads_add(a.d4, lanes_xor(a.d4, o, lid)); out.d5 = heads_add(a.d5, lanes_xor(a.d5, o, lid));
        out.d6 = heads_add(a.d6, lanes_xor(a.d6, o, lid)); out.d7 = heads_add(a.d7, lanes_xor(a.d7, o, lid));
    }
    return out;
}

// The merge's slot of head vector v (0: heads 0-3, 1: 4-7) of dimension d, for subgroup slot s.
fn merge_at(s: u32, v: u32, d: u32) -> u32 { return (s * QV + v) * HD + d; }

fn merge_store(at: u32, x: Heads) {
    qg[at] = x.a;
    if (QV > 1u) { qg[at + HD] = x.b; }
}

fn merge_load(at: u32) -> Heads {
    var out = Heads(qg[at], vec4<f32>(0.0));
    if (QV > 1u) { out.b = qg[at + HD]; }
    return out;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
//#if SUBGROUPS
        @builtin(subgroup_size) subgroup_size: u32, @builtin(subgroup_invocation_id) subgroup_id: u32,
//#endif
) {
//#if SUBGROUPS
    subgroup_lane = subgroup_id;
//#endif
    let first_head = wid.x * GROUP_HEADS;
    let row = wid.y;
    let group = p.n_heads / p.n_kv_heads;
    let kvh = first_head / group;
    let q_pos = step.pos + row;
    if (!split_in_use(wid.z)) { return; }  // uniform: the workgroup's split
    let span = split_keys(kvh, q_pos, wid.z);
    let kv_base = span.kv_base;
    let first = span.first;
    let end = span.end;
    let holds_new = span.holds_new;
    load_heads(row, first_head, kvh, holds_new, lid);  // as attention.wgsl (attention_heads.wgsl)
    if (ROPE_KV) {
        if (holds_new) {  // uniform across the workgroup
            for (var e = lid; e < HD / 2u; e += THREADS) {
                let k2 = stored(vec2<f32>(new_k[2u * e], new_k[2u * e + 1u]), K_F32);
                let v2 = stored(vec2<f32>(new_v[2u * e], new_v[2u * e + 1u]), V_F32);
                new_k[2u * e] = k2.x;
                new_k[2u * e + 1u] = k2.y;
                new_v[2u * e] = v2.x;
                new_v[2u * e + 1u] = v2.y;
            }
            workgroupBarrier();
            if (first_head % group == 0u) {  // the KV head's first group stores them
                for (var i = lid; i < K_WORDS; i += THREADS) { k_cache[new_row * K_WORDS + i] = new_word(0u, i, K_F32); }
                for (var i = lid; i < VALUE_WORDS; i += THREADS) { v_cache[new_row * VALUE_WORDS + i] = new_word(1u, i, V_F32); }
            }
        }
    }
    for (var i = lid; i < QV * HD; i += THREADS) { qg[i] = qg[i] * p.scale; }
    workgroupBarrier();

    let warp = lid / LANES;
    let lane = lid % LANES;
    let j = lane % KEY_LANES;  // this lane's words of its key: j, j + KEY_LANES, ...
    let word = lane % VALUE_WORDS;  // this lane's word of the value rows
    var run_max = heads_splat(-3.0e38);
    var run_sum = heads_splat(0.0);  // of the keys whose scores this lane's j == 0 holds
    let zero = heads_splat(0.0);
    var acc = Acc(zero, zero, zero, zero, zero, zero, zero, zero);
    // Steps of STEP_KEYS keys, subgroup w taking steps w, w + WARPS, ...: every subgroup loops
    // as often (uniform control flow for the exchanges); keys past `end` read the last key and
    // weigh exactly 0.
    var keys = 0u;
    if (end > first) { keys = end - first; }
    let rounds = (keys + WARPS * STEP_KEYS - 1u) / (WARPS * STEP_KEYS);
    let last = kv_base + end - 1u;
    for (var t = 0u; t < rounds; t++) {
        let base = first + (t * WARPS + warp) * STEP_KEYS;
        let key = base + lane / KEY_LANES;
        let live = key < end;
        let key_row = cache_row(min(kv_base + key, last));
        // Every load of the step before any use.
        let k0 = k_word(key_row, j);
        var k1 = vec4<u32>(); var k2 = vec4<u32>(); var k3 = vec4<u32>();
        var k4 = vec4<u32>(); var k5 = vec4<u32>(); var k6 = vec4<u32>(); var k7 = vec4<u32>();
        if (KEY_LOADS > 1u) { k1 = k_word(key_row, j + KEY_LANES); }
        if (KEY_LOADS > 2u) { k2 = k_word(key_row, j + 2u * KEY_LANES); k3 = k_word(key_row, j + 3u * KEY_LANES); }
        if (KEY_LOADS > 4u) {
            k4 = k_word(key_row, j + 4u * KEY_LANES); k5 = k_word(key_row, j + 5u * KEY_LANES);
            k6 = k_word(key_row, j + 6u * KEY_LANES); k7 = k_word(key_row, j + 7u * KEY_LANES);
        }
        let vk = base + lane / VALUE_WORDS;  // this lane's value keys: vk, vk + VALUE_KEYS, ...
        let v0 = v_word(cache_row(min(kv_base + vk, last)), word);
        var v1 = vec4<u32>(); var v2 = vec4<u32>(); var v3 = vec4<u32>();
        var v4 = vec4<u32>(); var v5 = vec4<u32>(); var v6 = vec4<u32>(); var v7 = vec4<u32>();
        if (VALUE_LOADS > 1u) { v1 = v_word(cache_row(min(kv_base + vk + VALUE_KEYS, last)), word); }
        if (VALUE_LOADS > 2u) {
            v2 = v_word(cache_row(min(kv_base + vk + 2u * VALUE_KEYS, last)), word);
            v3 = v_word(cache_row(min(kv_base + vk + 3u * VALUE_KEYS, last)), word);
        }
        if (VALUE_LOADS > 4u) {
            v4 = v_word(cache_row(min(kv_base + vk + 4u * VALUE_KEYS, last)), word);
            v5 = v_word(cache_row(min(kv_base + vk + 5u * VALUE_KEYS, last)), word);
            v6 = v_word(cache_row(min(kv_base + vk + 6u * VALUE_KEYS, last)), word);
            v7 = v_word(cache_row(min(kv_base + vk + 7u * VALUE_KEYS, last)), word);
        }
        var s = key_dot(k0, j, zero);
        if (KEY_LOADS > 1u) { s = key_dot(k1, j + KEY_LANES, s); }
        if (KEY_LOADS > 2u) { s = key_dot(k3, j + 3u * KEY_LANES, key_dot(k2, j + 2u * KEY_LANES, s)); }
        if (KEY_LOADS > 4u) {
            s = key_dot(k5, j + 5u * KEY_LANES, key_dot(k4, j + 4u * KEY_LANES, s));
            s = key_dot(k7, j + 7u * KEY_LANES, key_dot(k6, j + 6u * KEY_LANES, s));
        }
        // The key's score on each of its lanes, added as ((l0 + l1) + (l2 + l3)) on all of them.
        for (var o = 1u; o < KEY_LANES; o <<= 1u) {
            let other = lanes_xor(s, o, lid);
            if ((lane & o) == 0u) { s = heads_add(s, other); } else { s = heads_add(other, s); }
        }
        if (p.softcap > 0.0) {
            // tanh's argument clamped (Metal's fast-math tanh; attention.wgsl says why).
            s.a = tanh(clamp(s.a / p.softcap, vec4<f32>(-10.0), vec4<f32>(10.0))) * p.softcap;
            s.b = tanh(clamp(s.b / p.softcap, vec4<f32>(-10.0), vec4<f32>(10.0))) * p.softcap;
        }
        var top = heads_splat(-3.0e38);
        if (live) { top = s; }
        for (var o = KEY_LANES; o < LANES; o <<= 1u) { top = heads_max(top, lanes_xor(top, o, lid)); }
        let new_max = heads_max(run_max, top);
        let correction = heads_exp(heads_add(run_max, Heads(-new_max.a, -new_max.b)));  // first step: 0
        var weight = zero;  // keys past `end` weigh exactly 0
        if (live) { weight = heads_exp(heads_add(s, Heads(-new_max.a, -new_max.b))); }
        var counted = zero;
        if (j == 0u) { counted = weight; }
        run_sum = heads_rescale(run_sum, correction, counted);
        run_max = new_max;
        acc = acc_scale(acc, correction);
        let src = (lane / VALUE_WORDS) * KEY_LANES;  // the lane holding key vk's weights
        acc = acc_value(acc, v0, lanes_read(weight, src, lid));
        if (VALUE_LOADS > 1u) { acc = acc_value(acc, v1, lanes_read(weight, src + VALUE_KEYS * KEY_LANES, lid)); }
        if (VALUE_LOADS > 2u) {
            acc = acc_value(acc, v2, lanes_read(weight, src + 2u * VALUE_KEYS * KEY_LANES, lid));
            acc = acc_value(acc, v3, lanes_read(weight, src + 3u * VALUE_KEYS * KEY_LANES, lid));
        }
        if (VALUE_LOADS > 4u) {
            acc = acc_value(acc, v4, lanes_read(weight, src + 4u * VALUE_KEYS * KEY_LANES, lid));
            acc = acc_value(acc, v5, lanes_read(weight, src + 5u * VALUE_KEYS * KEY_LANES, lid));
            acc = acc_value(acc, v6, lanes_read(weight, src + 6u * VALUE_KEYS * KEY_LANES, lid));
            acc = acc_value(acc, v7, lanes_read(weight, src + 7u * VALUE_KEYS * KEY_LANES, lid));
        }
    }
    // The subgroup's sums: the lanes that held other keys of the same value word, and every
    // lane's counted weights.
    for (var o = VALUE_WORDS; o < LANES; o <<= 1u) { acc = acc_add_xor(acc, o, lid); }
    for (var o = 1u; o < LANES; o <<= 1u) { run_sum = heads_add(run_sum, lanes_xor(run_sum, o, lid)); }

    // The workgroup's: every subgroup's sums rescaled to the largest max, then added in a tree
    // of WARPS / 2, WARPS / 4, ... subgroups through qg (free: the scores are done).
    if (lane == 0u) { warp_max[warp] = run_max; }
    workgroupBarrier();
    var peak = warp_max[0];
    for (var w = 1u; w < WARPS; w++) { peak = heads_max(peak, warp_max[w]); }
    let f = heads_exp(heads_add(run_max, Heads(-peak.a, -peak.b)));
    acc = acc_scale(acc, f);
    if (lane == 0u) { warp_sum[warp] = heads_mul(run_sum, f); }
    let d = word * V_ELEMS;  // this lane's first dimension
    for (var half_w = WARPS / 2u; half_w > 0u; half_w >>= 1u) {
        if (warp >= half_w && warp < 2u * half_w && lane < VALUE_WORDS) {
            let s = warp - half_w;
            merge_store(merge_at(s, 0u, d), acc.d0); merge_store(merge_at(s, 0u, d + 1u), acc.d1);
            merge_store(merge_at(s, 0u, d + 2u), acc.d2); merge_store(merge_at(s, 0u, d + 3u), acc.d3);
            if (!V_F32) {
                merge_store(merge_at(s, 0u, d + 4u), acc.d4); merge_store(merge_at(s, 0u, d + 5u), acc.d5);
                merge_store(merge_at(s, 0u, d + 6u), acc.d6); merge_store(merge_at(s, 0u, d + 7u), acc.d7);
            }
        }
        workgroupBarrier();
        if (warp < half_w && lane < VALUE_WORDS) {
            acc.d0 = heads_add(acc.d0, merge_load(merge_at(warp, 0u, d)));
            acc.d1 = heads_add(acc.d1, merge_load(merge_at(warp, 0u, d + 1u)));
            acc.d2 = heads_add(acc.d2, merge_load(merge_at(warp, 0u, d + 2u)));
            acc.d3 = heads_add(acc.d3, merge_load(merge_at(warp, 0u, d + 3u)));
            if (!V_F32) {
                acc.d4 = heads_add(acc.d4, merge_load(merge_at(warp, 0u, d + 4u)));
                acc.d5 = heads_add(acc.d5, merge_load(merge_at(warp, 0u, d + 5u)));
                acc.d6 = heads_add(acc.d6, merge_load(merge_at(warp, 0u, d + 6u)));
                acc.d7 = heads_add(acc.d7, merge_load(merge_at(warp, 0u, d + 7u)));
            }
        }
        workgroupBarrier();
    }
    if (warp == 0u && lane < VALUE_WORDS) {
        var total = warp_sum[0];
        for (var w = 1u; w < WARPS; w++) { total = heads_add(total, warp_sum[w]); }
        for (var c = 0u; c < GROUP_HEADS; c++) {
            let out = p.partials_at + ((row * p.n_heads + first_head + c) * p.splits + wid.z) * (HD + 2u);
            var poison = 0.0;
//#if SUBGROUPS
            // NaN where a device's subgroups are no multiple of 32 (attention_grid chose it wrongly).
            if (subgroup_size % LANES != 0u) { poison = sqrt(-1.0 - f32(subgroup_size)); }
//#endif
            partials[out + d] = heads_at(acc.d0, c) + poison;
            partials[out + d + 1u] = heads_at(acc.d1, c);
            partials[out + d + 2u] = heads_at(acc.d2, c);
            partials[out + d + 3u] = heads_at(acc.d3, c);
            if (!V_F32) {
                partials[out + d + 4u] = heads_at(acc.d4, c);
                partials[out + d + 5u] = heads_at(acc.d5, c);
                partials[out + d + 6u] = heads_at(acc.d6, c);
                partials[out + d + 7u] = heads_at(acc.d7, c);
            }
            if (lane == 0u) {
                partials[out + HD] = heads_at(peak, c);
                partials[out + HD + 1u] = heads_at(total, c);
            }
        }
    }
}
