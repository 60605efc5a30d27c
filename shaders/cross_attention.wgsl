// Cross-attention of a decoder's query rows over an encoder's frozen keys and values (Whisper,
// Moonshine: py_engine/speech/seq2seq.py computes them once a window): every row sees every frame,
// no mask, no cache append. Flash-decoding style: the frames are cut into splits of split_len, a
// workgroup per (head, row, split) runs an online softmax over its split in chunks of CHUNK frames
// (a chunk's scores held in workgroup memory: one max and one sum a chunk, not a barrier per key)
// and writes a partial (Σ exp(s - m) v, m, Σ exp(s - m)); cross_attention_merge.wgsl merges the
// splits. A decode token's row so spreads Whisper's 1,500 frames over several workgroups a head.
//   y[r, h, :] = softmax_f(scale q[r, h] . k[f, g]) . v[f, g]   over the frames f, g = h / kv_group
// The frames: p.frames, or, where frames_at is not NO_LENGTH, lengths[frames_at] (a window's own
// count, at most p.frames: Moonshine's encoder output follows the audio's length); splits past
// them return at once.
// Bindings: 0 p (uniform Params), 1 q (read, f32 [rows, q_stride]: head h at q_offset + h * head_dim),
//           2 k, 3 v (read, f32 [frames, kv_stride]: KV head g at g * head_dim), 4 lengths (read,
//           u32; with frames_at), 5 partials (read_write, f32 [rows, n_heads, splits, head_dim + 2]).
// Dispatch: (n_heads, rows, splits) workgroups of 64 threads; head_dim <= 256; split_len any (a
//           split's last chunk may be short). Workgroup storage 2.3 KiB.
struct Params {
    n_heads: u32, head_dim: u32, kv_group: u32, frames: u32,
    q_stride: u32, q_offset: u32, kv_stride: u32, scale: f32,
    split_len: u32, splits: u32, frames_at: u32, pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read> lengths: array<u32>;
@group(0) @binding(5) var<storage, read_write> partials: array<f32>;

const THREADS: u32 = 64u;
const CHUNK: u32 = 256u;  // frames whose scores are held at once
const SLOTS: u32 = 4u;  // output dimensions a thread: lid + THREADS * slot < head_dim <= 256
const NO_LENGTH: u32 = 0xffffffffu;
var<workgroup> qs: array<f32, 256>;  // the scaled query
var<workgroup> scores: array<f32, 256>;  // the chunk's scores, then its weights
var<workgroup> partial: array<f32, THREADS>;

// The maximum (is_max) or the sum of `mine` over the workgroup, in every thread.
fn reduce(lid: u32, mine: f32, is_max: bool) -> f32 {
    partial[lid] = mine;
    workgroupBarrier();
    for (var stride = THREADS / 2u; stride > 0u; stride >>= 1u) {
        if (lid < stride) {
            if (is_max) { partial[lid] = max(partial[lid], partial[lid + stride]); }
            else { partial[lid] += partial[lid + stride]; }
        }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();  // every thread has read partial before it is reused
    return total;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let row = wid.y;
    let split = wid.z;
    let hd = p.head_dim;
    var frames = p.frames;
    if (p.frames_at != NO_LENGTH) { frames = min(lengths[p.frames_at], p.frames); }
    let out = ((row * p.n_heads + h) * p.splits + split) * (hd + 2u);
    let first = split * p.split_len;
    if (first >= frames) {  // uniform: an empty split weighs nothing in the merge
        for (var d = lid; d < hd; d += THREADS) { partials[out + d] = 0.0; }
        if (lid == 0u) {
            partials[out + hd] = -3.0e38;
            partials[out + hd + 1u] = 0.0;
        }
        return;
    }
    let end = min(first + p.split_len, frames);
    let kv_at = (h / p.kv_group) * hd;
    for (var d = lid; d < hd; d += THREADS) { qs[d] = q[row * p.q_stride + p.q_offset + h * hd + d] * p.scale; }
    workgroupBarrier();

    var running_max = -3.0e38;
    var running_sum = 0.0;
    var acc = vec4<f32>(0.0);  // dimensions lid + THREADS * slot
    for (var start = first; start < end; start += CHUNK) {
        let count = min(CHUNK, end - start);
        var chunk_max = -3.0e38;
        for (var j = lid; j < count; j += THREADS) {
            let row_at = (start + j) * p.kv_stride + kv_at;
            var s = 0.0;
            for (var d = 0u; d < hd; d++) { s = fma(qs[d], k[row_at + d], s); }
            scores[j] = s;
            chunk_max = max(chunk_max, s);
        }
        let new_max = max(running_max, reduce(lid, chunk_max, true));
        var chunk_sum = 0.0;
        for (var j = lid; j < count; j += THREADS) {
            let weight = safe_exp(scores[j] - new_max);
            scores[j] = weight;
            chunk_sum += weight;
        }
        let total = reduce(lid, chunk_sum, false);  // its barriers order the weights' writes before the reads
        var chunk = vec4<f32>(0.0);
        for (var j = 0u; j < count; j++) {
            let row_at = (start + j) * p.kv_stride + kv_at;
            for (var slot = 0u; slot < SLOTS; slot++) {
                let d = lid + THREADS * slot;
                if (d < hd) { chunk[slot] = fma(scores[j], v[row_at + d], chunk[slot]); }
            }
        }
        let correction = safe_exp(running_max - new_max);  // the first chunk: -3e38 - max -> 0
        running_sum = running_sum * correction + total;
        acc = acc * correction + chunk;
        running_max = new_max;
        workgroupBarrier();  // scores are rewritten by the next chunk
    }
    for (var slot = 0u; slot < SLOTS; slot++) {
        let d = lid + THREADS * slot;
        if (d < hd) { partials[out + d] = acc[slot]; }
    }
    if (lid == 0u) {
        partials[out + hd] = running_max;
        partials[out + hd + 1u] = running_sum;
    }
}
