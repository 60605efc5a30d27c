// Whisper's STFT frames (transformers' WhisperFeatureExtractor, a centred STFT): frame r is the n_fft
// samples of the window's PCM from r * hop - n_fft / 2, reflect-padded at both ends as numpy's and
// torch's "reflect" pad (the edge sample not repeated: index -i reads i, n_samples - 1 + i reads
// n_samples - 1 - i). The Hann window is folded into the DFT basis the frames are multiplied by
// (py_engine/models/log_mel.py), so a frame is the raw samples.
// Bindings: 0 p (uniform Params), 1 pcm (read, f32 [n_samples]),
//           2 frames (read_write, f32 [frames, n_fft]).
// Dispatch: (ceil(n_fft / 256), frames, 1) workgroups of 256 threads, one sample of one frame each.
struct Params { n_samples: u32, n_fft: u32, hop: u32, frames: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> pcm: array<f32>;
@group(0) @binding(2) var<storage, read_write> frames: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = gid.x;
    let r = gid.y;
    if (n >= p.n_fft || r >= p.frames) { return; }
    let last = i32(p.n_samples) - 1;
    var i = i32(r * p.hop + n) - i32(p.n_fft / 2u);
    if (i < 0) { i = -i; }
    if (i > last) { i = 2 * last - i; }
    frames[r * p.n_fft + n] = pcm[u32(i)];
}
