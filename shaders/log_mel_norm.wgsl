// The last step of Whisper's log-mel features (transformers' WhisperFeatureExtractor): every value
// clamped to at least (the window's largest - 8), then (x + 4) / 4, in place. Each workgroup first
// reduces log_mel.wgsl's row maxima to the window's largest itself (frames values: a few thousand
// reads, instead of a dispatch of its own), then rewrites its PER_THREAD x 256 values.
// Bindings: 0 p (uniform Params), 1 row_max (read, f32 [frames]),
//           2 y (read_write, f32 [count]: the log10 mel values, frames x n_mels).
// Defines: PER_THREAD (u32: the values a thread rewrites).
// Dispatch: (ceil(count / (256 PER_THREAD)), 1, 1) workgroups of 256 threads.
struct Params { frames: u32, count: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> row_max: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

var<workgroup> partial: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var m = -3.0e38;
    for (var i = lid; i < p.frames; i += 256u) { m = max(m, row_max[i]); }
    partial[lid] = m;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
        if (lid < s) { partial[lid] = max(partial[lid], partial[lid + s]); }
        workgroupBarrier();
    }
    let lowest = partial[0] - 8.0;
    let first = wid.x * 256u * PER_THREAD + lid;
    for (var j = 0u; j < PER_THREAD; j++) {
        let i = first + j * 256u;
        if (i < p.count) { y[i] = (max(y[i], lowest) + 4.0) / 4.0; }
    }
}
