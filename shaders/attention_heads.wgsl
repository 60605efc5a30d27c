// Not a kernel: the group-of-heads helpers of a decode token's attention (attention.wgsl,
// attention_subgroups.wgsl), which py_engine/runtime/kernels.py appends to kernels that call
// load_heads. They use the kernel's GROUP_HEADS, QV, THREADS, ROPE_KV and RING, its Step, Params p
// (with has_v_norm and owns_kv) and qkv, cos_sin, q_norm, k_norm bindings, and its
// workgroup arrays qg (the group's q: qg[v * head_dim + d][c] is dimension d of head 4v + c),
// new_k, new_v (ROPE_KV: the new key and value) and part (at least 128 vec4s: norm_head's sums).

// Dimension d of group head c (c == GROUP_HEADS: the new key, GROUP_HEADS + 1: the new value),
// for ROPE_KV's norms and rotation. One thread writes a dimension's vec4 at a time, so component
// writes never race.
const NEW_KEY: u32 = GROUP_HEADS;
const NEW_VALUE: u32 = GROUP_HEADS + 1u;

fn head_get(c: u32, d: u32) -> f32 {
    if (c == NEW_KEY) { return new_k[d]; }
    if (c == NEW_VALUE) { return new_v[d]; }
    return qg[(c / 4u) * p.head_dim + d][c % 4u];
}

fn head_set(c: u32, d: u32, value: f32) {
    if (c == NEW_KEY) {
        new_k[d] = value;
    } else if (c == NEW_VALUE) {
        new_v[d] = value;
    } else {
        qg[(c / 4u) * p.head_dim + d][c % 4u] = value;
    }
}

// ROPE_KV: group head c (or the new key) normalised by its norm weight (a model with q/k norms),
// or the new value by none (has_v_norm: Gemma 4): rope_kv.wgsl's operations in its order (its 128
// threads' sums, then their tree, then x * scale * weight, the value's weight 1), so a decode
// token's q, k and v equal a prefill's bit for bit. Ends with a barrier.
fn norm_head(lid: u32, c: u32) {
    let hd = p.head_dim;
    var sum = 0.0;
    for (var d = lid; d < hd && lid < 128u; d += 128u) {
        let v = head_get(c, d);
        sum += v * v;
    }
    if (lid < 128u) { part[lid].x = sum; }  // (attention.wgsl WIDE_HEADS: part holds only 128)
    workgroupBarrier();
    for (var stride = 64u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { part[lid].x += part[lid + stride].x; }
        workgroupBarrier();
    }
    let scale = inverseSqrt(part[0].x / f32(hd) + p.eps);
    workgroupBarrier();  // part[0] read by all before it is reused
    for (var d = lid; d < hd; d += THREADS) {
        var w = 1.0;  // a V norm has no weight
        if (c < GROUP_HEADS) { w = q_norm[d] + p.norm_offset; } else if (c == NEW_KEY) { w = k_norm[d] + p.norm_offset; }
        head_set(c, d, head_get(c, d) * scale * w);
    }
    workgroupBarrier();
}

// ROPE_KV: rotation `lid` (shaders/rope.wgsl; rotary_dim / 2 <= THREADS of them, one a thread) of
// group heads 0 .. heads - 1 (heads past GROUP_HEADS: the new key) by the angle whose (cos, sin)
// is cs. A thread's rotation touches only its own two dimensions of each head: no barrier
// between heads.
fn rotate_heads(lid: u32, heads: u32, cs: vec2<f32>) {
    if (lid < p.rotary_dim / 2u) {
        let ab = rope_pair(lid, p.rotary_dim, p.interleaved == 1u);
        for (var c = 0u; c < heads; c++) {
            let turned = rope_turn(vec2<f32>(head_get(c, ab.x), head_get(c, ab.y)), cs);
            head_set(c, ab.x, turned.x);
            head_set(c, ab.y, turned.y);
        }
    }
}

// ROPE_KV: the cache row (kv_head * capacity + position, RING: cache_row's) of the new key, which
// is read from new_k / new_v instead (this dispatch writes it to the caches; nothing here reads it
// there). A layer that appends nothing (owns_kv 0) has none: NO_ROW, which no row equals, and
// its current position's key and value are read from the cache like the others (the layer that
// owns the caches wrote them earlier in the forward).
const NO_ROW: u32 = 0xffffffffu;
var<private> new_row: u32;

// A workgroup's keys: split `split` of KV head kvh for the query at position q_pos. kv_base + a
// key position is its row (shaders/kv_ring.wgsl's ring_start); end is exclusive
// (first >= end: no key here); holds_new: ROPE_KV, the layer appends its own K/V (owns_kv) and the
// split holds the query's own key, which is not in the cache yet: the split reads it from
// workgroup memory where the cache would hold it, with the same arithmetic as the other keys, so
// a decode token's attention equals that of a forward of a few rows, where rope_kv cached it
// first. Sets ring_end and new_row.
struct Split { kv_base: u32, first: u32, end: u32, holds_new: bool }

// Whether split `split` holds any of the forward's keys: those past them are never read (the
// merges take min(splits, ceil(kv_len / split_len)); a full ring's keys fill all of its splits),
// so their workgroups return at once. A dispatch's splits are sized by the cache's capacity, and
// at a short depth most of them are empty.
fn split_in_use(split: u32) -> bool { return split * p.split_len < step.kv_len; }

fn split_keys(kvh: u32, q_pos: u32, split: u32) -> Split {
    let ring = ring_start(kvh);
    let kv_base = ring.x;
    let oldest = ring.y;
    var first = oldest + split * p.split_len;
    if (p.window > 0u && q_pos + 1u > p.window) { first = max(first, q_pos + 1u - p.window); }
    let split_end = oldest + (split + 1u) * p.split_len;
    let appends = ROPE_KV && p.owns_kv == 1u;
    new_row = NO_ROW;
    if (appends) { new_row = cache_row(kv_base + q_pos); }
    return Split(kv_base, first, min(q_pos + 1u, split_end), appends && first <= q_pos && q_pos < split_end);
}

// The group's q heads (row `row`, from first_head) into qg, zeros past GROUP_HEADS, and where the
// split holds the new key (ROPE_KV) the new key and value into new_k / new_v; ROPE_KV: the heads
// and the new key normalised (has_qk_norm) and rotated, the new value normalised (has_v_norm), as
// rope_kv.wgsl does. Ends with a barrier.
fn load_heads(row: u32, first_head: u32, kvh: u32, holds_new: bool, lid: u32) {
    let hd = p.head_dim;
    // ROPE_KV: this thread's rotation's (cos, sin), loaded with the q heads: one wait for both.
    var cs = vec2<f32>(1.0, 0.0);
    let half = p.rotary_dim / 2u;
    if (ROPE_KV && lid < half) { cs = vec2<f32>(cos_sin[(row * half + lid) * 2u], cos_sin[(row * half + lid) * 2u + 1u]); }
    for (var d = lid; d < hd; d += THREADS) {
        for (var v = 0u; v < QV; v++) {
            let at = row * p.q_stride + (first_head + 4u * v) * p.q_head_stride + d;
            var heads = vec4<f32>(0.0);
            if (4u * v < GROUP_HEADS) { heads.x = qkv[at]; }
            if (4u * v + 1u < GROUP_HEADS) { heads.y = qkv[at + p.q_head_stride]; }
            if (4u * v + 2u < GROUP_HEADS) { heads.z = qkv[at + 2u * p.q_head_stride]; }
            if (4u * v + 3u < GROUP_HEADS) { heads.w = qkv[at + 3u * p.q_head_stride]; }
            qg[v * hd + d] = heads;
        }
    }
    if (ROPE_KV && holds_new) {
        let k_at = row * p.q_stride + p.n_heads * p.q_head_stride + kvh * hd;
        let v_at = k_at + p.n_kv_heads * hd;
        for (var d = lid; d < hd; d += THREADS) { new_k[d] = qkv[k_at + d]; new_v[d] = qkv[v_at + d]; }
    }
    workgroupBarrier();
    if (ROPE_KV) {
        // The group's heads, and the new key after them where this split holds it.
        let heads = GROUP_HEADS + u32(holds_new);
        if (p.has_qk_norm == 1u) {  // uniform: the barriers inside are reached by every thread or none
            for (var c = 0u; c < heads; c++) { norm_head(lid, c); }
        }
        if (holds_new && p.has_v_norm == 1u) { norm_head(lid, NEW_VALUE); }  // uniform too
        rotate_heads(lid, heads, cs);
        workgroupBarrier();
    }
}

// A value for each head of the group: heads 0-3 in a, 4-7 in b (b unused when QV == 1, and
// its arithmetic folded away). Not an array: drivers put function-scope arrays in slow memory.
struct Heads { a: vec4<f32>, b: vec4<f32> }

fn heads_splat(x: f32) -> Heads { return Heads(vec4<f32>(x), vec4<f32>(x)); }

fn heads_add(x: Heads, y: Heads) -> Heads {
    var out = Heads(x.a + y.a, vec4<f32>(0.0));
    if (QV > 1u) { out.b = x.b + y.b; }
    return out;
}

fn heads_max(x: Heads, y: Heads) -> Heads {
    var out = Heads(max(x.a, y.a), vec4<f32>(-3.0e38));
    if (QV > 1u) { out.b = max(x.b, y.b); }
    return out;
}

// acc + w * x for each head.
fn heads_fma(w: Heads, x: f32, acc: Heads) -> Heads {
    var out = Heads(fma(w.a, vec4<f32>(x), acc.a), vec4<f32>(0.0));
    if (QV > 1u) { out.b = fma(w.b, vec4<f32>(x), acc.b); }
    return out;
}

// acc * correction + tile for each head (the online softmax's rescale).
fn heads_rescale(acc: Heads, correction: Heads, tile: Heads) -> Heads {
    var out = Heads(acc.a * correction.a + tile.a, vec4<f32>(0.0));
    if (QV > 1u) { out.b = acc.b * correction.b + tile.b; }
    return out;
}

fn heads_exp(x: Heads) -> Heads {
    var out = Heads(safe_exp4(x.a), vec4<f32>(0.0));
    if (QV > 1u) { out.b = safe_exp4(x.b); }
    return out;
}

// Group head c's value.
// (By a dot product with a one-hot vector, not an index: a dynamic index into a value held in
// registers can move it to slow local memory.)
fn heads_at(x: Heads, c: u32) -> f32 {
    let pick = vec4<f32>(vec4<u32>(0u, 1u, 2u, 3u) == vec4<u32>(c % 4u));
    if (c < 4u) { return dot(x.a, pick); }
    return dot(x.b, pick);
}

// The group's q at dimension d (qg's vec4s).
fn q_heads(d: u32) -> Heads {
    var out = Heads(qg[d], vec4<f32>(0.0));
    if (QV > 1u) { out.b = qg[p.head_dim + d]; }
    return out;
}

// safe_exp (shaders/safe_exp.wgsl) of each component.
fn safe_exp4(x: vec4<f32>) -> vec4<f32> { return vec4<f32>(safe_exp(x.x), safe_exp(x.y), safe_exp(x.z), safe_exp(x.w)); }
