"""Speech to text: `transcriber = await load_transcriber(model, device)`, then
`async for segment in transcriber.transcribe(audio): ...` (a Segment as each piece is decoded).

A Transcriber has model_id, sample_rate (16000) and transcribe(audio, *, language=None,
timestamps=False, prompt=None, max_tokens=None): audio is mono float PCM at sample_rate in [-1, 1],
a sequence of floats or an async iterable of array('f') chunks of any size (a long file streamed:
never whole in GPU memory); segments come as their window finishes; max_tokens bounds the whole
transcript's tokens. The families, each a graph file and the encoder-once, decoder-over-frozen-K/V
loop of seq2seq.py: Whisper (whisper_transcriber.py: 30-s windows that seek by timestamps,
languages detected or given, translation, a prompt) and Moonshine (moonshine_transcriber.py).
load_transcriber picks the family by config.json's architectures[0] (TRANSCRIBERS: the module of
this package and the loader in it, imported when asked for, so that no family's module loads
another's)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path

from ..errors import UnsupportedArchitectureError
from ..formats.ggml_whisper import MAGIC
from ..formats.json_file import read_json
from ..formats.source import open_source
from ..models.config import architecture_of


@dataclass
class Segment:
    """One piece of a transcript."""

    start: float  # seconds from the start of the audio
    end: float
    text: str
    tokens: list = field(default_factory=list)  # the model's ids for it (Whisper's timestamps included)


# config.json's architectures[0] -> (module of py_engine.speech, its loader: async (model, device, **options)).
TRANSCRIBERS = {
    "MoonshineForConditionalGeneration": ("moonshine_transcriber", "load_moonshine_transcriber"),
    "WhisperForConditionalGeneration": ("whisper_transcriber", "load_whisper_transcriber"),
}

# whisper.cpp's model file (formats/ggml_whisper.py) -> the module and loader that read it.
GGML_WHISPER = ("whisper_ggml", "load_ggml_transcriber")


def is_ggml_whisper(model) -> bool:
    """Whether `model` is a path to a file that starts with ggml's magic (whisper.cpp's format)."""
    if not isinstance(model, (str, Path)) or not Path(model).is_file():
        return False
    try:
        with open(model, "rb") as file:
            return file.read(4) == struct.pack("<I", MAGIC)
    except OSError:
        return False


async def load_transcriber(model, device, **options):
    """A Transcriber of `model` (an HF folder, or its ModelSource; or whisper.cpp's model file:
    whisper_ggml.py) on `device`; options: the family loader's (model_id, progress, f32, max_binding, ...)."""
    if is_ggml_whisper(model):
        module, loader = GGML_WHISPER
        return await getattr(import_module(f"{__package__}.{module}"), loader)(model, device, **options)
    source = open_source(model)
    config_path = source.small_dir() / "config.json"
    architecture = architecture_of(read_json(config_path), config_path)
    if architecture not in TRANSCRIBERS:
        raise UnsupportedArchitectureError(
            f"{config_path}: {architecture} does not transcribe (known: {', '.join(sorted(TRANSCRIBERS))})"
        )
    module, loader = TRANSCRIBERS[architecture]
    return await getattr(import_module(f"{__package__}.{module}"), loader)(source, device, **options)
