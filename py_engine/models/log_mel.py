"""Whisper's log-mel front-end as graph ops: one 30-second window of 16 kHz PCM in, the log-mel features
the encoder reads out, as transformers' WhisperFeatureExtractor computes them.

How the Whisper graph calls it (H1, models/whisper.py):

    pcm = b.g.inputs["pcm"] = b.g.tensor("pcm", N_SAMPLES * 4, "input")   # or bert.input_tensor's like
    features = log_mel(b, pcm, n_mels)          # [FRAMES, n_mels] f32, time-major: row t = frame t
    # conv1 (kernel 3, padding 1) then reads `features` as FRAMES rows of n_mels channels:
    # conv1d(b, features, "model.encoder.conv1.weight", ..., in_len=FRAMES, pad=(1, 1), activation="gelu")

and the model's runner, once after upload (speech/log_mel.py, pure Python):

    write_tables(device, executor)              # the DFT basis and the mel filter bank, uploaded once
    device.write_buffer(executor.buffer("pcm"), 0, window_bytes(samples, start))   # each window

n_mels: config.json's num_mel_bins (80; large-v3's 128; at most MAX_MELS). A window of other than 30 s
(a tiny fixture's feature extractor with a shorter chunk_length: frames = 2 x max_source_positions)
is log_mel(b, pcm, n_mels, frames) over a pcm input of frames x HOP samples.

The steps (HF's _np_extract_fbank_features / _torch_extract_fbank_features):
- frames (shaders/log_mel_frames.wgsl): the window (N_SAMPLES samples, zero-padded by the caller)
  reflect-padded by N_FFT / 2 at both ends, frame t its N_FFT samples from t * HOP (a centred STFT);
  only the first FRAMES frames, since HF drops the last (N_SAMPLES / HOP + 1) one;
- the STFT as a matmul (the engine's linear op: shaders/matmul.wgsl) of the frames by a constant basis
  of 2 BINS rows of N_FFT (speech/log_mel.py dft_basis: the periodic Hann window times cos, then
  times -sin, of each of the BINS = N_FFT / 2 + 1 frequencies): each frame's real and imaginary parts;
- shaders/log_mel.wgsl: the power spectrum re^2 + im^2, its projection on the Slaney mel filter bank
  (a constant [n_mels, BINS]), log10 of it floored at 1e-10, and each frame's largest value;
- shaders/log_mel_norm.wgsl: the clamp to (the window's largest value - 8), then (x + 4) / 4.

The two constants are graph inputs (BASIS and FILTERS) that the runner writes once: the plan is
computed in pure Python at load (no numpy in the engine; speech/log_mel.py), not read from the model's
files. Every op here is sized for the window's frames whatever the graph's max_rows (fixed_rows), so
the graph's forwards may be of any rows (the encoder's 1,500 positions).
"""

from __future__ import annotations

from ..runtime.graph import Tensor, ceil_div
from ..runtime.linear_plan import linear_defines, linear_params
from .builder import GraphBuilder

SAMPLE_RATE = 16000
CHUNK_SECONDS = 30
N_SAMPLES = CHUNK_SECONDS * SAMPLE_RATE  # a window: 480,000 samples
N_FFT = 400
HOP = 160
FRAMES = N_SAMPLES // HOP  # 3,000: the STFT's N_SAMPLES / HOP + 1 frames but the last
BINS = N_FFT // 2 + 1  # 201 frequencies of a one-sided spectrum
MAX_MELS = 128  # log_mel.wgsl's workgroup: a thread a mel (Whisper: 80; large-v3: 128)
NORM_PER_THREAD = 8  # log_mel_norm.wgsl's PER_THREAD

BASIS = "log_mel_basis"  # the graph input [2 BINS, N_FFT] f32 (speech/log_mel.py dft_basis)
FILTERS = "log_mel_filters"  # the graph input [n_mels, BINS] f32 (speech/log_mel.py mel_filters)


def log_mel(b: GraphBuilder, pcm: Tensor, n_mels: int = 80, frames: int = FRAMES, out: Tensor | None = None) -> Tensor:
    """The log-mel features of the window in `pcm` (an input of frames x HOP f32: N_SAMPLES for
    Whisper's 30 s; a tiny fixture's feature extractor may have a shorter chunk_length): [frames,
    n_mels] f32, frame-major, written into `out` where given (e.g. a graph output), else a new
    activation."""
    if not 1 <= n_mels <= MAX_MELS:
        raise ValueError(f"log_mel: n_mels {n_mels} must be from 1 to {MAX_MELS}")
    if not 2 <= frames <= 65535:  # reflect padding needs N_FFT / 2 samples; a grid line a frame
        raise ValueError(f"log_mel: a window of {frames} frames (from 2 to 65535)")
    g, samples = b.g, frames * HOP
    stft_frames = b.act("stft_frames", N_FFT, frames)
    g.op(
        "log_mel_frames",
        {"pcm": pcm, "frames": stft_frames},
        {"n_samples": samples, "n_fft": N_FFT, "hop": HOP, "frames": frames},
        lambda rows: (ceil_div(N_FFT, 256), frames, 1),
        fixed_rows=frames,
    )
    basis = constant(b, BASIS, 2 * BINS * N_FFT * 4)
    spectrum = b.act("stft", 2 * BINS, frames)
    b._linear_op(
        {"x": stft_frames, "w": basis, "bias": b.dummy, "residual": b.dummy, "y": spectrum, "norm": b.dummy},
        linear_params(N_FFT, 2 * BINS, rows=frames),
        linear_defines(N_FFT, 2 * BINS, "f32", precision="exact", cpu=b.cpu),
        fixed_rows=frames,
    )
    y = out or b.act("log_mel", n_mels, frames)
    row_max = b.act("log_mel_row_max", 1, frames)
    g.op(
        "log_mel",
        {"spectrum": spectrum, "filters": constant(b, FILTERS, n_mels * BINS * 4), "y": y, "row_max": row_max},
        {"bins": BINS, "n_mels": n_mels, "frames": frames, "pad0": 0},
        lambda rows: (frames, 1, 1),
        fixed_rows=frames,
    )
    count = frames * n_mels
    g.op(
        "log_mel_norm",
        {"row_max": row_max, "y": y},
        {"frames": frames, "count": count, "pad0": 0, "pad1": 0},
        lambda rows: (ceil_div(count, 256 * NORM_PER_THREAD), 1, 1),
        {"PER_THREAD": NORM_PER_THREAD},
        fixed_rows=frames,
    )
    return y


def constant(b: GraphBuilder, name: str, nbytes: int) -> Tensor:
    """A graph input written once after upload (speech/log_mel.py write_tables), not per forward."""
    if name in b.g.inputs:
        if b.g.inputs[name].nbytes != nbytes:
            raise ValueError(f"{name}: one graph holds one log-mel front-end's constants")
        return b.g.inputs[name]
    b.g.inputs[name] = b.g.tensor(name, nbytes, "input")
    return b.g.inputs[name]
