"""Whisper on a tiny random model, tests/fixtures/whisper-f16 (tools/make_whisper_fixture.py), against
transformers' greedy generate: the same tokens and segments (start, end) for a given language, a detected
one, translation, a prompt, timestamps, and 40 s of long-form audio seeking window by window; the
encoder's output (through each decoder layer's cross-attention K and V) within 2e-4.

A 30-s window of audio of at most 30 s is transformers' own: those cases run from the PCM through the
engine's log-mel front-end. Where transformers seeks past the first window it slices the features of the
whole recording (whisper_transcriber.py says how the engine's own windows differ), so those cases give
each window transformers' features (its numpy feature extractor) and check the seek and the segments."""

import asyncio
import json
import math
import wave
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.errors import ModelFileError
from py_engine.formats.safetensors import TensorInfo
from py_engine.gpu import Read
from py_engine.models.graph_options import DEFAULT_MAX_BINDING
from py_engine.models.whisper import whisper_configs, whisper_shapes
from py_engine.runtime.memory import ModelTooLargeError
from py_engine.speech.transcriber import Segment, load_transcriber
from py_engine.speech.whisper_generation import init_tokens, needs_language
from py_engine.speech.whisper_model import WhisperFiles, plan_whisper, read_whisper_files

ROOT = Path(__file__).parent
MODEL = ROOT / "fixtures" / "whisper-f16"
REFERENCE = json.loads((MODEL / "reference.json").read_text())
RATE = 16000


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768


def long_clip(speech: np.ndarray, chirp: np.ndarray) -> np.ndarray:
    """tools/make_whisper_fixture.py's long_clip: 40 s of (speech, 1 s silence, chirp, 0.5 s silence)."""
    unit = np.concatenate([speech, np.zeros(RATE, np.float32), chirp, np.zeros(RATE // 2, np.float32)])
    return np.tile(unit, -(-40 * RATE // len(unit)))[: 40 * RATE]


CHIRP, SPEECH = read_wav(MODEL / "audio/chirp.wav"), read_wav(ROOT.parent / REFERENCE["clips"]["speech"])
CLIPS = {"chirp": CHIRP, "speech": SPEECH, "long": long_clip(SPEECH, CHIRP)}


@pytest.fixture(scope="module")
def transcriber():
    return asyncio.run(load_transcriber(MODEL, device(False)[0]))


def first_window_only(case: dict) -> bool:
    """transformers decoded one window, from its own features of the audio padded to 30 s."""
    return case["frames"] == 3000 and len(case["segments"]) == 1 and case["segments"][0]["start"] == 0.0


def given_features(transcriber, audio: np.ndarray):
    """An encode_window that writes transformers' features of the recording, sliced at the window."""
    extractor = pytest.importorskip("transformers").WhisperFeatureExtractor(feature_size=80)
    long = {"truncation": False, "padding": "longest"} if len(audio) > 30 * RATE else {}
    features = extractor(audio, sampling_rate=RATE, return_tensors="np", **long).input_features[0].T

    def encode_window(samples, seek, frames):
        window = np.zeros((3000, features.shape[1]), np.float32)
        window[:frames] = features[seek : seek + frames]
        transcriber.model.encode({"features": window.tobytes()}, transcriber.rows, front=False)

    return encode_window


def windows(transcriber, audio, case: dict) -> list:
    args = case["args"]

    async def run():
        out = []
        async for segments in transcriber.windows(
            audio,
            language=args.get("language"),
            timestamps=args.get("return_timestamps", False),
            prompt=case["prompt"],
            task=args.get("task"),
            window_tokens=case["max_new_tokens"],
        ):
            out += segments
        return out

    return asyncio.run(run())


def as_reference(segments) -> list:
    return [{"start": s.start, "end": s.end, "tokens": s.tokens} for s in segments]


@pytest.mark.parametrize("name", [name for name, case in REFERENCE["cases"].items() if case["clip"] != "long"])
def test_segments_match_transformers(transcriber, name, monkeypatch):
    case = REFERENCE["cases"][name]
    audio = CLIPS[case["clip"]]
    if not first_window_only(case):
        monkeypatch.setattr(transcriber, "encode_window", given_features(transcriber, audio))
    got = windows(transcriber, audio.tolist(), case)
    assert as_reference(got) == case["segments"]
    assert transcriber.text([t for s in got for t in s.tokens]) == case["text"]


def test_prompt_tokens_are_transformers(transcriber):
    case = REFERENCE["cases"]["speech_prompt"]
    assert transcriber.prompt_ids(case["prompt"]) == case["prompt_ids"]


def test_encoder_output_through_the_cross_projections(transcriber):
    """The speech clip's window from its PCM (the front-end, then the encoder): each decoder layer's
    cross-attention K and V over the first frames, as transformers computes them."""
    ref = np.load(MODEL / "reference.npz")
    transcriber.encode_window(SPEECH, 0, 3000)
    dev = transcriber.model.device
    for layer in range(2):
        for part in "kv":
            want = ref[f"cross_{layer}_{part}"]
            buffer = transcriber.model.encoder.buffer(f"cross.{layer}.{part}")
            raw = asyncio.run(dev.fetch(dev.submit([Read(buffer, 0, want.size * 4)])[0]))
            got = np.frombuffer(raw, np.float32).reshape(want.shape)
            np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-4)


def test_long_form_from_a_stream_in_odd_chunks(transcriber, monkeypatch):
    """40 s (long-form: timestamps on, windows seeking to the last timestamp) as an async stream of
    7,777-sample chunks: transformers' segments and text."""
    case = REFERENCE["cases"]["long_timestamps"]
    audio = CLIPS["long"]
    monkeypatch.setattr(transcriber, "encode_window", given_features(transcriber, audio))

    async def chunks():
        for at in range(0, len(audio), 7777):
            yield audio[at : at + 7777]

    got = windows(transcriber, chunks(), case)
    assert as_reference(got) == case["segments"]
    assert transcriber.text([t for s in got for t in s.tokens]) == case["text"]


def test_transcribe_gives_segments_of_text(transcriber):
    """The public interface: a window's Segment of text, max_tokens bounding its generation."""
    case = REFERENCE["cases"]["speech_en"]

    async def run():
        return [s async for s in transcriber.transcribe(SPEECH, language="en", max_tokens=case["max_new_tokens"])]

    (segment,) = asyncio.run(run())
    assert isinstance(segment, Segment)
    assert (segment.start, segment.end, segment.text) == (0.0, 30.0, case["text"])


def test_malformed_folders_are_typed_errors(tmp_path):
    for name in ("config.json", "generation_config.json", "tokenizer.json", "model.safetensors"):
        (tmp_path / name).write_bytes((MODEL / name).read_bytes())
    config = json.loads((MODEL / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "max_source_positions": 1000}))
    with pytest.raises(ModelFileError, match="max_source_positions"):
        read_whisper_files(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "d_model": 48}))
    with pytest.raises(ModelFileError, match="shape"):
        read_whisper_files(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "generation_config.json").unlink()
    with pytest.raises(ModelFileError, match="generation_config.json"):
        read_whisper_files(tmp_path)


def test_a_budget_too_small_is_refused_before_upload(transcriber):
    need = transcriber.model.footprint
    assert need.weights < need.total
    with pytest.raises(ModelTooLargeError, match="to transcribe"):
        asyncio.run(load_transcriber(MODEL, device(False)[0], gpu_budget=need.total - 1))


@pytest.mark.parametrize(
    "shape",
    [  # openai/whisper-tiny's, -small's and -large-v3's config.json (d_model, layers, heads, mels, vocab)
        dict(d_model=384, layers=4, heads=6, ffn=1536, mels=80, vocab=51865),
        dict(d_model=768, layers=12, heads=12, ffn=3072, mels=80, vocab=51865),
        dict(d_model=1280, layers=32, heads=20, ffn=5120, mels=128, vocab=51866),
    ],
    ids=["tiny", "small", "large-v3"],
)
def test_real_shapes_plan_within_browser_limits(shape):
    """f16 checkpoints of the real sizes: every tensor within a storage binding (WebGPU's default
    128 MiB: the 51,865 x 1,280 embedding of large-v3 included), every grid within 65,535 a dimension."""
    raw = json.loads((MODEL / "config.json").read_text()) | {"d_model": shape["d_model"], "vocab_size": shape["vocab"]}
    raw |= {"num_mel_bins": shape["mels"]}
    for side in ("encoder", "decoder"):
        raw |= {f"{side}_layers": shape["layers"], f"{side}_attention_heads": shape["heads"]}
        raw |= {f"{side}_ffn_dim": shape["ffn"]}
    encoder, decoder, geometry = whisper_configs(raw, "config.json")
    tensors = {
        name: TensorInfo(name, "F16", dims, 0, 2 * math.prod(dims), "model.safetensors")
        for name, dims in whisper_shapes(encoder, decoder, geometry).items()
    }

    class Source:
        label = "whisper"

    files = WhisperFiles(Source, encoder, decoder, geometry, tensors, None, None)
    planned = plan_whisper(files)
    for graph in planned.graphs:
        assert max(t.nbytes for t in graph.tensors) <= DEFAULT_MAX_BINDING
        assert max(max(op.grid(graph.max_rows)) for op in graph.ops) <= 65535


def test_start_tokens_follow_forced_decoder_ids(transcriber):
    """The hub's configs force [[1, None], [2, <|transcribe|>]]: where neither a language nor a task is
    given, the detected language goes in the None's place and the task follows (transformers'
    _retrieve_init_tokens); a language or a task given sets the forced ids aside; an English-only
    model's forced <|notimestamps|> goes with timestamps."""
    settings = transcriber.settings
    sot, en, de, transcribe, translate, nots = 321, 322, 323, 422, 421, 426
    hub = type(settings)(**{**vars(settings), "forced": ((1, None), (2, transcribe))})
    assert needs_language(hub, None, None) and not needs_language(hub, en, None)
    assert init_tokens(hub, None, None, False, detected=de) == [sot, de, transcribe, nots]
    assert init_tokens(hub, None, None, True, detected=de) == [sot, de, transcribe]
    assert init_tokens(hub, en, None, False) == [sot, en, transcribe, nots]
    assert needs_language(hub, None, "translate")
    assert init_tokens(hub, None, "translate", False, detected=de) == [sot, de, translate, nots]
    # without forced ids (the fixture's config), a detected language brings no task, as transformers
    assert init_tokens(settings, None, None, False, detected=de) == [sot, de, nots]
    english = type(settings)(**{**vars(settings), "forced": ((1, nots),), "lang_to_id": {}, "multilingual": False})
    assert not needs_language(english, None, None)
    assert init_tokens(english, None, None, False) == [sot, nots]
    assert init_tokens(english, None, None, True) == [sot]
