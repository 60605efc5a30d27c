"""The constants of Whisper's log-mel front-end (models/log_mel.py's graph ops), computed in pure Python
at load (no numpy in the engine) and written once into the graph's inputs: the DFT basis with the Hann
window folded in, and the Slaney mel filter bank, as transformers' WhisperFeatureExtractor makes them
(audio_utils.window_function, mel_filter_bank with norm and mel_scale "slaney", 0 to 8 kHz).

    write_tables(device, executor)            # once, after the graph is uploaded
    device.write_buffer(executor.buffer("pcm"), 0, window_bytes(samples, start))   # each 30-s window

Everything is computed in float64 and rounded once to float32 where it is stored.
"""

from __future__ import annotations

import math
from array import array
from functools import lru_cache

from ..models.log_mel import BASIS, BINS, FILTERS, N_FFT, N_SAMPLES, SAMPLE_RATE

MEL_MAX_HZ = 8000.0  # WhisperFeatureExtractor's max_frequency (min_frequency 0)

# The Slaney mel scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic above.
_LOG_HZ, _LOG_MEL, _LOG_STEP = 1000.0, 15.0, math.log(6.4) / 27.0


def hertz_to_mel(hz: float) -> float:
    return _LOG_MEL + math.log(hz / _LOG_HZ) / _LOG_STEP if hz >= _LOG_HZ else 3.0 * hz / 200.0


def mel_to_hertz(mel: float) -> float:
    return _LOG_HZ * math.exp(_LOG_STEP * (mel - _LOG_MEL)) if mel >= _LOG_MEL else 200.0 * mel / 3.0


def linspace(start: float, stop: float, num: int) -> list[float]:
    """numpy.linspace's values (endpoint included): start + i * step, the last exactly stop."""
    step = (stop - start) / (num - 1)
    return [start + i * step for i in range(num - 1)] + [stop]


def mel_filters(n_mels: int, bins: int = BINS, sample_rate: int = SAMPLE_RATE) -> list[list[float]]:
    """[n_mels][bins]: the triangular filters over the STFT's bins (0 to sample_rate / 2 Hz), their
    corners n_mels + 2 points evenly spaced in mels from 0 to MEL_MAX_HZ, each divided by its width
    in Hz over 2 (Slaney's area normalisation). transformers' mel_filter_bank, transposed."""
    corners = [mel_to_hertz(m) for m in linspace(0.0, hertz_to_mel(MEL_MAX_HZ), n_mels + 2)]
    freqs = linspace(0.0, float(sample_rate // 2), bins)
    filters = []
    for m in range(n_mels):
        lo, mid, hi = corners[m : m + 3]
        scale = 2.0 / (hi - lo)
        filters.append([max(0.0, min((f - lo) / (mid - lo), (hi - f) / (hi - mid))) * scale for f in freqs])
    return filters


def hann_window(length: int = N_FFT) -> list[float]:
    """The periodic Hann window (numpy.hanning(length + 1) without its last point)."""
    return [0.5 - 0.5 * math.cos(2.0 * math.pi * n / length) for n in range(length)]


def dft_basis(n_fft: int = N_FFT) -> list[float]:
    """[2 (n_fft / 2 + 1), n_fft] flat: row k < n_fft / 2 + 1 is window * cos(2 pi k n / n_fft), row
    n_fft / 2 + 1 + k window * -sin(...), so a frame times it is its windowed one-sided DFT, the real
    parts then the imaginary parts. The angle is taken of k n mod n_fft, exact in float64."""
    window = hann_window(n_fft)
    cos = [math.cos(2.0 * math.pi * j / n_fft) for j in range(n_fft)]
    sin = [-math.sin(2.0 * math.pi * j / n_fft) for j in range(n_fft)]
    bins = n_fft // 2 + 1
    rows = []
    for table in (cos, sin):
        for k in range(bins):
            rows += [window[n] * table[k * n % n_fft] for n in range(n_fft)]
    return rows


@lru_cache(maxsize=2)
def tables(n_mels: int) -> dict[str, bytes]:
    """The front-end's graph inputs (models/log_mel.py BASIS and FILTERS) as float32 bytes."""
    filters = [w for row in mel_filters(n_mels) for w in row]
    return {BASIS: array("f", dft_basis()).tobytes(), FILTERS: array("f", filters).tobytes()}


def write_tables(device, executor) -> None:
    """Write the constants into a graph that holds models/log_mel.py's ops (its n_mels read from the
    size of its FILTERS input)."""
    n_mels = executor.graph.inputs[FILTERS].nbytes // (4 * BINS)
    for name, data in tables(n_mels).items():
        device.write_buffer(executor.buffer(name), 0, data)


def window_bytes(samples, start: int = 0, length: int = N_SAMPLES) -> bytes:
    """The window of `samples` (mono float PCM at 16 kHz: an array('f') or a sequence of floats) from
    sample `start`, as float32 bytes zero-padded to `length` samples (HF pads with 0.0 and truncates;
    Whisper's window: 30 s)."""
    piece = samples[start : start + length]
    if not (isinstance(piece, array) and piece.typecode == "f"):
        piece = array("f", piece)
    data = piece.tobytes()
    return data + bytes(4 * length - len(data))
