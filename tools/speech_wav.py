"""16-bit mono WAV files for the speech fixtures (make_whisper_fixture.py, make_moonshine_fixture.py)."""

import wave
from pathlib import Path

import numpy as np

RATE = 16000  # the speech models' sample rate


def write_wav(path: Path, samples: np.ndarray) -> np.ndarray:
    """Write 16-bit PCM at RATE; returns what it holds as float32 (int16 / 32768, exact), transformers' input."""
    pcm = np.clip(np.round(samples * 32768), -32768, 32767).astype("<i2")
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.tobytes())
    return pcm.astype(np.float32) / 32768
