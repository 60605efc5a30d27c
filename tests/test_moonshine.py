"""Moonshine on the tiny random fixture (tests/fixtures/moonshine-f32, tools/make_moonshine_fixture.py)
against transformers: the encoder's output and the greedy ids of three clips (a chirp of no whole
number of strides, 0.1 s, 2.5 s of speech), exact precision; the front-end's lengths, the token limit,
and malformed files as typed errors naming the file."""

import asyncio
import json
import math
import shutil
import wave
from array import array
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.errors import ModelFileError
from py_engine.formats.safetensors import TensorInfo
from py_engine.gpu import Read
from py_engine.models.graph_options import DEFAULT_MAX_BINDING
from py_engine.models.moonshine import decoder_tensors
from py_engine.runtime.memory import ModelTooLargeError
from py_engine.speech.moonshine_config import MIN_SAMPLES, front_end_lengths, read_moonshine_config, tensor_shapes
from py_engine.speech.moonshine_generation import max_new_tokens, windows
from py_engine.speech.moonshine_model import (
    MoonshineFiles,
    encode_window,
    load_moonshine,
    plan_moonshine,
    read_moonshine_files,
)
from py_engine.speech.transcriber import load_transcriber

MODEL = Path(__file__).parent / "fixtures" / "moonshine-f32"
REFERENCE = json.loads((MODEL / "reference.json").read_text())
ARRAYS = np.load(MODEL / "reference.npz")


def pcm(name: str) -> np.ndarray:
    with wave.open(str(MODEL / REFERENCE["clips"][name]["file"])) as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768


@pytest.fixture(scope="module")
def model():
    return asyncio.run(load_moonshine(read_moonshine_files(MODEL), device(False)[0], window=3.0))


def argmax(tokens, logits) -> int:
    return max(range(len(logits)), key=logits.__getitem__)


async def greedy(model, start: int, limit: int) -> list[int]:
    return [start] + [token async for token in model.generate([start], argmax, limit)]


@pytest.mark.parametrize("name", sorted(REFERENCE["clips"]))
def test_clips_match_transformers(model, name):
    """The encoder's output within 1e-4, the first step's logits too, and every greedy id as
    transformers' generate."""
    clip = REFERENCE["clips"][name]
    audio = pcm(name)
    assert len(audio) == clip["samples"]
    frames = encode_window(model, audio.tolist())
    assert frames == clip["encoder_frames"] == front_end_lengths(len(audio))[-1]
    read = Read(model.encoder.buffer("encoder_hidden"), 0, frames * 36 * 4)
    hidden = np.frombuffer(asyncio.run(model.device.fetch(model.device.submit([read])[0])), np.float32)
    np.testing.assert_allclose(hidden.reshape(frames, -1), ARRAYS[f"{name}_encoder"], atol=1e-4)
    np.testing.assert_allclose(asyncio.run(model.logits_after([1], 0)), clip["first_logits"], atol=1e-4)
    assert asyncio.run(greedy(model, 1, max_new_tokens(len(audio)))) == clip["greedy"]


def test_front_end_lengths():
    """transformers' floor at each stride (MoonshinePreTrainedModel._get_feat_extract_output_lengths):
    1 s and 37 samples is 249, 81, 40 frames; the first encoder frame needs 895 samples."""
    assert front_end_lengths(16037) == (16037, 249, 81, 40)
    assert front_end_lengths(MIN_SAMPLES)[-1] == 1 and front_end_lengths(MIN_SAMPLES - 1)[-1] == 0
    assert front_end_lengths(100) == (100, 0, 0, 0)
    for clip in REFERENCE["clips"].values():
        assert max_new_tokens(clip["samples"]) == clip["max_new_tokens"]


def copy_with(tmp_path: Path, **changes) -> Path:
    """The fixture's config.json and model.safetensors in tmp_path, config keys changed (None: removed)."""
    for name in ("config.json", "model.safetensors"):
        shutil.copy(MODEL / name, tmp_path / name)
    config = json.loads((MODEL / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"decoder_num_attention_heads": 6}, "decoder_num_attention_heads should be"),
        ({"encoder_num_key_value_heads": 1}, "encoder_num_key_value_heads should be"),
        ({"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.75}}, "turns 9 of head_dim 12"),
        ({"rope_parameters": {"rope_type": "linear", "factor": 2.0}}, "only the default RoPE"),
        ({"decoder_hidden_act": "gelu"}, "decoder_hidden_act should be silu"),
        ({"hidden_size": 35}, "hidden_size should be"),
        ({"eos_token_id": 4000}, "not in the vocabulary"),
        ({"attention_bias": True}, "attention_bias should be false"),
        ({"architectures": ["WhisperForConditionalGeneration"]}, "MoonshineForConditionalGeneration"),
        ({"intermediate_size": 80}, "has shape [72, 36]"),
        ({"encoder_num_hidden_layers": 3}, "missing tensor 'model.encoder.layers.2."),
    ],
)
def test_malformed_files_are_named(tmp_path, changes, message):
    with pytest.raises(ModelFileError) as err:
        read_moonshine_files(copy_with(tmp_path, **changes))
    assert message in str(err.value) and "config.json" in str(err.value)


def test_hub_style_rope_keys(tmp_path):
    """The hub's configs (transformers 4.48) spell RoPE at the top level: the same model."""
    model = copy_with(tmp_path, rope_parameters=None, rope_theta=10000.0, partial_rotary_factor=0.9, rope_scaling=None)
    files = read_moonshine_files(model)
    assert files.config.rotary_dim == REFERENCE["rotary_dim"] == 10 and files.config.cfg.rope_theta == 10000.0
    assert read_moonshine_files(copy_with(tmp_path, rope_parameters=None)).config.rotary_dim == 10  # 0.9: the default


def test_long_audio_is_cut_at_quiet_places():
    """Windows of at most 30 s that put the audio back together, each cut (where more follows) in the
    quiet 0.1 s of its last 5 s; the same from a stream of odd chunks, or of one chunk, as from one array."""
    rng = np.random.default_rng(1)
    audio = (0.3 * rng.standard_normal(16000 * 70)).astype(np.float32)
    for quiet in (27.5, 55.0):  # seconds: one gap in each of the first two windows' last sixth
        audio[int(quiet * 16000) : int(quiet * 16000) + 1600] = 0
    window = 30 * 16000

    async def cut(source):
        return [(start, np.array(pcm)) async for start, pcm in windows(source, window)]

    async def stream():
        for at in range(0, len(audio), 12345):
            yield array("f", audio[at : at + 12345])

    whole = asyncio.run(cut(audio))
    assert [start for start, _ in whole] == [0, 27.5 * 16000 + 800, 55.0 * 16000 + 800]  # the quiet frames' middles
    assert all(len(pcm) <= window for _, pcm in whole)
    np.testing.assert_array_equal(np.concatenate([pcm for _, pcm in whole]), audio)
    streamed = asyncio.run(cut(stream()))
    assert [s for s, _ in streamed] == [s for s, _ in whole]

    async def one_chunk():
        yield array("f", audio)

    assert [s for s, _ in asyncio.run(cut(one_chunk()))] == [s for s, _ in whole]


@pytest.fixture(scope="module")
def transcriber():
    return asyncio.run(load_transcriber(MODEL, device(False)[0], window=3.0))


async def segments(transcriber, audio, **options):
    return [s async for s in transcriber.transcribe(audio, **options)]


@pytest.mark.parametrize("name", sorted(REFERENCE["clips"]))
def test_transcriber(transcriber, name):
    """load_transcriber picks Moonshine by its config; a clip within a window is one segment of
    transformers' text, from an array or a stream of chunks alike."""
    clip = REFERENCE["clips"][name]
    audio = pcm(name)
    got = asyncio.run(segments(transcriber, audio.tolist()))
    assert [(s.start, s.end, s.text, s.tokens) for s in got] == [
        (0.0, len(audio) / 16000, clip["text"], clip["greedy"][1:])
    ]

    async def stream():
        for at in range(0, len(audio), 1000):
            yield array("f", audio[at : at + 1000])

    assert asyncio.run(segments(transcriber, stream(), language="en")) == got
    assert transcriber.model_id == "moonshine-f32" and transcriber.sample_rate == 16000


def test_transcriber_limits(transcriber):
    """max_tokens cuts the transcript; audio too short for an encoder frame (and none) says nothing."""
    clip = REFERENCE["clips"]["speech"]
    (cut,) = asyncio.run(segments(transcriber, pcm("speech").tolist(), max_tokens=3))
    assert cut.text == transcriber.text(clip["greedy"][1:4])
    assert asyncio.run(segments(transcriber, [0.1] * (MIN_SAMPLES - 1))) == []
    assert asyncio.run(segments(transcriber, [])) == []


@pytest.mark.parametrize(
    "shape",
    [
        # UsefulSensors/moonshine-tiny's and -base's config.json (the hub's spelling: top-level RoPE keys).
        dict(hidden_size=288, intermediate_size=1152, layers=6, max_position_embeddings=194, partial_rotary_factor=0.9),
        dict(
            hidden_size=416, intermediate_size=1664, layers=8, max_position_embeddings=512, partial_rotary_factor=0.62
        ),
    ],
    ids=["tiny", "base"],
)
def test_real_shapes_plan_within_browser_limits(shape):
    """Tiny's and base's shapes with 30-s windows: 32 dims of each head turn, every tensor within a storage
    binding, every grid within 65,535 workgroups a dimension (the encoder's 1,248 frames at most)."""
    layers = shape.pop("layers")
    raw = json.loads((MODEL / "config.json").read_text()) | shape | {"vocab_size": 32768, "rope_parameters": None}
    raw |= {f"{side}_num_{kind}": n for side in ("encoder", "decoder") for kind, n in (("hidden_layers", layers),)}
    raw |= {
        f"{side}_num_{kind}": 8 for side in ("encoder", "decoder") for kind in ("attention_heads", "key_value_heads")
    }
    config = read_moonshine_config(raw, "config.json")
    tensors = {
        name: TensorInfo(name, "F32", dims, 0, 4 * math.prod(dims), "model.safetensors")
        for name, dims in tensor_shapes(config).items()
    }

    class Source:
        label = "moonshine"

    files = MoonshineFiles(Source, config, decoder_tensors(tensors, layers), None)
    planned = plan_moonshine(files, window=30.0)
    assert config.rotary_dim == 32 and planned.encoder.max_rows == front_end_lengths(480000)[-1] == 1248
    for graph in (planned.encoder, planned.decoder):
        assert max(t.nbytes for t in graph.tensors) <= DEFAULT_MAX_BINDING
        assert max(max(op.grid(graph.max_rows)) for op in graph.ops) <= 65535


def test_gpu_budget():
    """A budget below both graphs' footprint is refused before any upload (ModelTooLargeError)."""
    with pytest.raises(ModelTooLargeError, match="to transcribe"):
        asyncio.run(load_transcriber(MODEL, device(False)[0], window=3.0, gpu_budget=1 << 20))
