// Rotary embedding in place over a forward's fused q|k|v rows, with no KV cache: a vision tower's 2D
// RoPE (Qwen3.5's ViT: each patch's angles are its row's and its column's, computed per picture on the
// host by py_engine/vision/qwen3_5_grid.py), or an encoder's 1D one (EmbeddingGemma: each packed text's
// positions from 0, embedding/runners.py), turning the q and k heads and leaving v as it is. The first
// rotary_dim dims of a head turn (all of them but for partial rotary: Moonshine's 32 of 36), in pairs
// split-half (HF rotate_half: dims i and i + rotary_dim / 2 by angle i) or, with the define INTERLEAVED,
// adjacent (dims 2i and 2i + 1 by angle i: Moonshine's encoder); shaders/rope.wgsl's rope_pair.
// Defines: QK_NORM: each head RMS-normalised first, times its weight + norm_offset (Gemma 3's q_norm
//          and k_norm, as (1 + w): rope_kv.wgsl's norm, for a forward that caches nothing).
//          INTERLEAVED: adjacent pairs (above).
// Bindings: 0 step (uniform Step), 1 p (uniform Params),
//           2 cos_sin (read, f32 [rows, rotary_dim / 2, 2]: each angle's cos, sin),
//           3 qkv (read_write, f32 [rows, p.stride]: q head h at h * head_dim, k head h at
//             p.k_offset + h * head_dim),
//           4 q_norm, 5 k_norm (read, f32 [head_dim]; QK_NORM only reads them).
// Dispatch: (p.n_heads + p.n_kv_heads, step.rows, 1) workgroups of 64 threads (q heads, then k heads),
//           a pair a thread at a time.
struct Params {
    n_heads: u32, head_dim: u32, stride: u32, k_offset: u32,
    n_kv_heads: u32, eps: f32, norm_offset: f32, rotary_dim: u32,
}

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> cos_sin: array<f32>;
@group(0) @binding(3) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(4) var<storage, read> q_norm: array<f32>;
@group(0) @binding(5) var<storage, read> k_norm: array<f32>;

var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.y;
    if (row >= step.rows) { return; }
    let h = wid.x;
    let head = select(h * p.head_dim, p.k_offset + (h - p.n_heads) * p.head_dim, h >= p.n_heads);
    let base = row * p.stride + head;
//#if QK_NORM
    var squares = 0.0;
    for (var d = lid; d < p.head_dim; d += 64u) { squares += qkv[base + d] * qkv[base + d]; }
    partial[lid] = squares;
    workgroupBarrier();
    for (var stride = 32u; stride > 0u; stride >>= 1u) {
        if (lid < stride) { partial[lid] += partial[lid + stride]; }
        workgroupBarrier();
    }
    let scale = inverseSqrt(partial[0] / f32(p.head_dim) + p.eps);
    for (var d = lid; d < p.head_dim; d += 64u) {
        var w = k_norm[d];
        if (h < p.n_heads) { w = q_norm[d]; }
        qkv[base + d] = qkv[base + d] * scale * (w + p.norm_offset);
    }
    storageBarrier();  // the pairs below are other threads' dims
//#endif
    let half = p.rotary_dim / 2u;
    for (var i = lid; i < half; i += 64u) {
        let pair = rope_pair(i, p.rotary_dim, INTERLEAVED);
        let at = 2u * (row * half + i);
        let turned = rope_turn(vec2<f32>(qkv[base + pair.x], qkv[base + pair.y]), vec2<f32>(cos_sin[at], cos_sin[at + 1u]));
        qkv[base + pair.x] = turned.x;
        qkv[base + pair.y] = turned.y;
    }
}
