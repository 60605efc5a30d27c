// Whisper's log-mel rows from the STFT (transformers' WhisperFeatureExtractor): for frame r, the power
// spectrum |X_k|^2 = re^2 + im^2 of its `bins` frequencies, projected onto the mel filter bank, floored
// at 1e-10 and taken log10. The clamp to (the window's largest value - 8) and the (x + 4) / 4 follow
// in log_mel_norm.wgsl, which needs every frame's: each row's largest value goes to row_max.
// Bindings: 0 p (uniform Params),
//           1 spectrum (read, f32 [frames, 2 bins]: the bins' real parts, then their imaginary parts),
//           2 filters (read, f32 [n_mels, bins]: the Slaney mel filter bank, a mel's weights a row),
//           3 y (read_write, f32 [frames, n_mels]: time-major), 4 row_max (read_write, f32 [frames]).
// Dispatch: (frames, 1, 1) workgroups of 128 threads, one frame each; n_mels <= 128, bins <= MAX_BINS.
struct Params { bins: u32, n_mels: u32, frames: u32, pad0: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> spectrum: array<f32>;
@group(0) @binding(2) var<storage, read> filters: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> row_max: array<f32>;

const THREADS: u32 = 128u;
const MAX_BINS: u32 = 256u;  // n_fft 400's 201 bins (Whisper's every size)
const LOG10_2: f32 = 0.30102999566398120;  // WGSL has no log10: log2(x) * log10(2)
const LOWEST: f32 = -3.0e38;

var<workgroup> power: array<f32, MAX_BINS>;
var<workgroup> partial: array<f32, THREADS>;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = wid.x;
    if (r >= p.frames) { return; }
    let row = r * 2u * p.bins;
    for (var k = lid; k < p.bins; k += THREADS) {
        let re = spectrum[row + k];
        let im = spectrum[row + p.bins + k];
        power[k] = re * re + im * im;
    }
    workgroupBarrier();
    var v = LOWEST;
    if (lid < p.n_mels) {
        var mel = 0.0;
        let w = lid * p.bins;
        for (var k = 0u; k < p.bins; k++) { mel += filters[w + k] * power[k]; }
        v = log2(max(mel, 1e-10)) * LOG10_2;
        y[r * p.n_mels + lid] = v;
    }
    partial[lid] = v;
    workgroupBarrier();
    for (var s = THREADS / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { partial[lid] = max(partial[lid], partial[lid + s]); }
        workgroupBarrier();
    }
    if (lid == 0u) { row_max[r] = partial[0]; }
}
