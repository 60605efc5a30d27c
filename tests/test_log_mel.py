"""Whisper's log-mel front-end on the GPU (models/log_mel.py's ops over speech/log_mel.py's constants)
against transformers' WhisperFeatureExtractor (its numpy path here: the test environment has no torch)
on 30-s windows: a short tone mix, silence (the 1e-10 floor everywhere), a clipped signal, a chirp that
fills the whole window (the reflect padding at its end reads real samples), real speech (the clips of
tests/fixtures/speech/) and 128 mels (large-v3).
Also the pure-Python plan against transformers' own mel_filter_bank and window."""

import asyncio
from array import array
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.audio.wav import read_wav
from py_engine.gpu import Read
from py_engine.models.builder import GraphBuilder
from py_engine.models.config import ModelConfig
from py_engine.models.graph_options import GraphOptions
from py_engine.models.log_mel import FRAMES, HOP, N_SAMPLES, SAMPLE_RATE, log_mel
from py_engine.runtime.executor import Executor
from py_engine.runtime.kernels import KernelCache
from py_engine.speech.log_mel import dft_basis, hann_window, mel_filters, window_bytes, write_tables

transformers = pytest.importorskip("transformers")
from transformers import WhisperFeatureExtractor  # noqa: E402
from transformers.audio_utils import mel_filter_bank, window_function  # noqa: E402

CLIPS = sorted((Path(__file__).parent / "fixtures" / "speech").glob("*.wav"))  # real speech, 16 kHz mono

# f32 on the GPU against HF's float64 STFT, on the (x + 4) / 4 scale: at most 3.3e-5 measured on lavapipe
# (HF's own numpy and torch paths differ by up to 5e-5 on these signals).
TOLERANCE = 1e-4


@pytest.mark.parametrize("n_mels", [80, 128])
def test_mel_filter_bank_and_window_match_transformers(n_mels):
    ref = mel_filter_bank(
        num_frequency_bins=201,
        num_mel_filters=n_mels,
        min_frequency=0.0,
        max_frequency=8000.0,
        sampling_rate=16000,
        norm="slaney",
        mel_scale="slaney",
    )
    assert np.abs(np.array(mel_filters(n_mels)).T - ref).max() < 1e-6
    assert np.abs(np.array(hann_window()) - window_function(400, "hann")).max() < 1e-6


def test_dft_basis_is_the_windowed_one_sided_dft():
    frames = np.random.default_rng(0).standard_normal((4, 400))
    spectrum = frames @ np.array(dft_basis()).reshape(402, 400).T
    want = np.fft.rfft(frames * window_function(400, "hann"))
    np.testing.assert_allclose(spectrum[:, :201] + 1j * spectrum[:, 201:], want, atol=1e-9)


class FrontEnd:
    """A graph of the front-end alone, its features a graph output, on the test session's device."""

    def __init__(self, n_mels: int, frames: int = FRAMES):
        self.device, _ = device()
        cfg = ModelConfig("WhisperFrontEnd", 0, 64, 64, 1, 1, 1, 64, 1e-5, 1e4)  # only the graph's shell
        b = GraphBuilder(cfg, None, GraphOptions(frames, frames, cpu=self.device.caps.cpu, precision="exact"))
        pcm = b.g.inputs["pcm"] = b.g.tensor("pcm", frames * HOP * 4, "input")
        out = b.g.outputs["features"] = b.g.tensor("features", frames * n_mels * 4, "output")
        assert log_mel(b, pcm, n_mels, frames, out=out) is out
        self.executor = Executor(self.device, KernelCache(self.device), b.g, None)
        write_tables(self.device, self.executor)
        self.n_mels, self.frames = n_mels, frames

    def __call__(self, samples: np.ndarray) -> np.ndarray:
        pcm = window_bytes(array_f32(samples), 0, self.frames * HOP)
        self.device.write_buffer(self.executor.buffer("pcm"), 0, pcm)
        read = Read(self.executor.buffer("features"), 0, self.frames * self.n_mels * 4)
        # A forward of the encoder's rows (half the frames): the front-end's ops keep theirs (fixed_rows).
        read = self.device.submit(self.executor.commands(self.frames // 2, 0) + [read])[0]
        raw = asyncio.run(self.device.fetch(read))
        return np.frombuffer(raw, np.float32).reshape(self.frames, self.n_mels)


def array_f32(samples: np.ndarray) -> array:
    return array("f", samples.astype(np.float32).tobytes())


_front_ends = {}


def front_end(n_mels: int, frames: int = FRAMES) -> FrontEnd:
    if (n_mels, frames) not in _front_ends:
        _front_ends[n_mels, frames] = FrontEnd(n_mels, frames)
    return _front_ends[n_mels, frames]


def reference(samples: np.ndarray, n_mels: int, chunk_length: int = 30) -> np.ndarray:
    """WhisperFeatureExtractor's features of a window of chunk_length seconds, time-major [frames, n_mels]."""
    extractor = WhisperFeatureExtractor(feature_size=n_mels, chunk_length=chunk_length)
    features = extractor(samples, sampling_rate=SAMPLE_RATE, return_tensors="np").input_features[0]
    assert features.shape == (n_mels, chunk_length * SAMPLE_RATE // HOP)
    return features.T


def seconds(duration: float) -> np.ndarray:
    return np.arange(int(duration * SAMPLE_RATE)) / SAMPLE_RATE


def tones() -> np.ndarray:
    t = seconds(2.5)
    noise = np.random.default_rng(1).standard_normal(t.size)
    return (0.3 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 3150 * t) + 0.01 * noise).astype(np.float32)


def clipped() -> np.ndarray:
    t = seconds(4.0)
    return np.clip(3.0 * np.sin(2 * np.pi * 220 * t), -1.0, 1.0).astype(np.float32)


def chirp() -> np.ndarray:
    """A sweep from 100 Hz to 7 kHz over the whole 30-s window, its amplitude swelling and fading."""
    t = seconds(30.0)
    phase = 2 * np.pi * (100 * t + (7000 - 100) / (2 * 30.0) * t * t)
    return (0.5 * np.sin(phase) * (0.6 + 0.4 * np.sin(2 * np.pi * 0.2 * t))).astype(np.float32)


SIGNALS = {"tones": tones, "silence": lambda: np.zeros(SAMPLE_RATE, np.float32), "clipped": clipped, "chirp": chirp}


@pytest.mark.parametrize("name", list(SIGNALS))
def test_features_match_whisper_feature_extractor(name):
    samples = SIGNALS[name]()
    got, want = front_end(80)(samples), reference(samples, 80)
    error = np.abs(got - want).max()
    print(f"log-mel {name}: max abs error {error:.2e}")
    assert error < TOLERANCE, f"{name}: max abs error {error:.2e}"
    if name == "silence":
        np.testing.assert_allclose(got, -1.5, atol=1e-6)  # log10(1e-10) = -10, (-10 + 4) / 4


@pytest.mark.parametrize("clip", CLIPS, ids=lambda p: p.stem)
def test_features_of_real_speech_match_whisper_feature_extractor(clip):
    wav = read_wav(clip.read_bytes(), clip.name)
    assert (wav.sample_rate, wav.channels) == (SAMPLE_RATE, 1)
    samples = np.frombuffer(wav.samples.tobytes(), np.float32)
    error = np.abs(front_end(80)(samples) - reference(samples, 80)).max()
    print(f"log-mel {clip.name}: max abs error {error:.2e}")
    assert error < TOLERANCE


def test_128_mels_match_whisper_feature_extractor():
    samples = tones()
    error = np.abs(front_end(128)(samples) - reference(samples, 128)).max()
    print(f"log-mel tones, 128 mels: max abs error {error:.2e}")
    assert error < TOLERANCE


def test_a_shorter_window_matches_a_feature_extractor_of_its_chunk_length():
    """A tiny fixture's window: 1 s (100 frames), cut from a longer signal (HF truncates), 16 mels."""
    samples = tones()
    error = np.abs(front_end(16, 100)(samples) - reference(samples, 16, chunk_length=1)).max()
    assert error < TOLERANCE


def test_window_bytes_pads_with_zeros_and_cuts_at_30_seconds():
    data = np.frombuffer(window_bytes(array("f", [0.5, -0.25])), np.float32)
    assert data.size == N_SAMPLES and list(data[:3]) == [0.5, -0.25, 0.0] and not data[2:].any()
    long = [float(i % 7) for i in range(N_SAMPLES + 5)]
    assert np.frombuffer(window_bytes(long, 5), np.float32)[-1] == float((N_SAMPLES + 4) % 7)
