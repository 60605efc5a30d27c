// Per-head Q/K norm (optional), rotary embedding, and KV-cache append, fused in one pass over the
// fused QKV projection output. Row r of this forward is at absolute position step.pos + r, cached
// at row (step.pos + r) % capacity: capacity holds the context's positions, or is a sliding
// layer's ring (py_engine/runtime/kv_cache.py), where a position overwrites the one a ring's length before.
//   q heads: rotated in place in qkv.   k heads: normalised, rotated, written to k_cache.
//   v heads: written to v_cache, RMS-normalised first (without a weight) where has_v_norm = 1
//   (Gemma 4). A layer that reads another's caches (Gemma 4's shared-KV layers) dispatches only
//   its q heads: its qkv holds nothing else.
// RoPE (shaders/rope.wgsl) is split-half or interleaved pairs; only the first
// rotary_dim dims of a head rotate (partial rotary). cos/sin come precomputed per row, so they
// match the reference to the last bit instead of depending on the GPU's cos() accuracy.
// Bindings: 0 step (uniform Step), 1 p (uniform Params), 2 cos_sin (read, f32 [rows, rotary_dim/2, 2]),
//           3 q_norm (read, f32 [head_dim]), 4 k_norm (read, f32 [head_dim]),
//           5 qkv (read_write, f32 [rows, qkv_stride]; q heads, then k heads, then v heads; q head
//             h at h * q_head_stride: head_dim, or 2 * head_dim where each q head's output gate
//             follows it, Qwen3.5's),
//           6 k_cache (read_write, K words: [n_kv_heads, capacity, head_dim] elements),
//           7 v_cache (read_write, V words, same shape).
// The cache formats come from K_CACHE / V_CACHE (kernels.py; shaders/kv/): written in element
// pairs through k_store_pair / v_store_pair, so one code path serves f32, f16 and packed f16.
// K is f32 except on WebKit (packed f16, for memory): softmax amplifies rounding in q·k; V
// enters the output linearly, so f16 halves its memory and bandwidth at little cost.
// Dispatch: (n_heads + 2 * n_kv_heads, step.rows, 1) workgroups of 128 threads; head_dim ≤ 512
// (attention_grid.HEAD_DIM_MAX: Gemma 4's full layers) and even.
struct Params {
    n_heads: u32, n_kv_heads: u32, head_dim: u32, rotary_dim: u32,
    qkv_stride: u32, capacity: u32, has_qk_norm: u32, interleaved: u32,
    eps: f32, norm_offset: f32, q_head_stride: u32, has_v_norm: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> cos_sin: array<f32>;
@group(0) @binding(3) var<storage, read> q_norm: array<f32>;
@group(0) @binding(4) var<storage, read> k_norm: array<f32>;
@group(0) @binding(5) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<K>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<V>;

var<workgroup> head: array<f32, 512>;  // the head (2 KiB: its whole, for the norm then the rotation)
var<workgroup> partial: array<f32, 128>;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let row = wid.y;
    let hd = p.head_dim;
    var base = row * p.qkv_stride + h * p.q_head_stride;  // q head h; k and v heads follow the q heads
    if (h >= p.n_heads) { base = row * p.qkv_stride + p.n_heads * p.q_head_stride + (h - p.n_heads) * hd; }
    let cached_at = (step.pos + row) % p.capacity;  // the position's row (one modulo a workgroup)
    let is_q = h < p.n_heads;
    let is_v = h >= p.n_heads + p.n_kv_heads;

    var sum = 0.0;
    for (var d = lid; d < hd; d += 128u) {
        let v = qkv[base + d];
        head[d] = v;
        sum += v * v;
    }
    partial[lid] = sum;
    workgroupBarrier();
    // Uniform (is_v follows the workgroup): the barriers inside are reached by every thread or none.
    if ((!is_v && p.has_qk_norm == 1u) || (is_v && p.has_v_norm == 1u)) {
        for (var stride = 64u; stride > 0u; stride >>= 1u) {
            if (lid < stride) { partial[lid] += partial[lid + stride]; }
            workgroupBarrier();
        }
        let scale = inverseSqrt(partial[0] / f32(hd) + p.eps);
        for (var d = lid; d < hd; d += 128u) {
            var w = 1.0;  // a V norm has no weight
            if (is_q) { w = q_norm[d] + p.norm_offset; } else if (!is_v) { w = k_norm[d] + p.norm_offset; }
            head[d] = head[d] * scale * w;
        }
        workgroupBarrier();
    }

    if (!is_v) {
        let half = p.rotary_dim / 2u;
        for (var i = lid; i < half; i += 128u) {
            let ab = rope_pair(i, p.rotary_dim, p.interleaved == 1u);
            let cs = vec2<f32>(cos_sin[(row * half + i) * 2u], cos_sin[(row * half + i) * 2u + 1u]);
            let turned = rope_turn(vec2<f32>(head[ab.x], head[ab.y]), cs);
            head[ab.x] = turned.x;
            head[ab.y] = turned.y;
        }
    }
    workgroupBarrier();

    if (is_q) {
        for (var d = lid; d < hd; d += 128u) { qkv[base + d] = head[d]; }
    } else if (is_v) {
        let first_pair = ((h - p.n_heads - p.n_kv_heads) * p.capacity + cached_at) * hd / 2u;
        for (var e = lid; e < hd / 2u; e += 128u) {
            v_store_pair(first_pair + e, vec2<f32>(head[2u * e], head[2u * e + 1u]));
        }
    } else {
        let first_pair = ((h - p.n_heads) * p.capacity + cached_at) * hd / 2u;
        for (var e = lid; e < hd / 2u; e += 128u) {
            k_store_pair(first_pair + e, vec2<f32>(head[2u * e], head[2u * e + 1u]));
        }
    }
}
