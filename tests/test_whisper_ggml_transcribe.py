"""Transcription from whisper.cpp's model files (py_engine/speech/whisper_ggml.py): the Whisper fixture
(tests/fixtures/whisper-f16) written as a ggml file by tools/make_ggml_whisper.py gives transformers'
tokens and segments, as its HF folder does (tests/test_whisper.py's cases); its settings are the
folder's (the hub's forced ids and suppressed <|startoftranscript|> aside); its vocabulary-built
tokenizer encodes and decodes as the folder's tokenizer.json; the CLI transcribes with it; files the
engine cannot run are refused naming the file and the type."""

import asyncio
import dataclasses
import json
import struct
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from gpu_harness import device
from test_whisper import CLIPS, REFERENCE, SPEECH, as_reference, first_window_only, given_features, windows

from py_engine.errors import ModelFileError
from py_engine.formats.ggml_whisper import read_ggml_whisper
from py_engine.models.whisper import whisper_configs, whisper_shapes
from py_engine.speech.transcriber import load_transcriber
from py_engine.speech.whisper_ggml import check_types, read_ggml_whisper_files, settings, special_ids
from py_engine.speech.whisper_model import read_whisper_files

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "fixtures" / "whisper-f16"
sys.path.insert(0, str(ROOT / "tools"))
from make_ggml_whisper import dequantize, quantize, write_ggml  # noqa: E402

TEXTS = ["Hello world, it's a test.", "  spaces   and\nnewlines\t", "émigré naïve 日本語 😀", "I'll we've 123 4567"]


@pytest.fixture(scope="module")
def ggml_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("ggml") / "ggml-whisper-f16.bin"
    write_ggml(MODEL, path)
    return path


@pytest.fixture(scope="module")
def transcriber(ggml_file):
    loaded = asyncio.run(load_transcriber(ggml_file, device(False)[0]))
    # The fixture's generation_config.json forces nothing after the start (the hub's force the task).
    loaded.settings = dataclasses.replace(loaded.settings, forced=())
    return loaded


def test_settings_and_tokenizer_are_the_folders(ggml_file):
    ggml, folder = read_ggml_whisper_files(ggml_file), read_whisper_files(MODEL)
    assert (ggml.encoder, ggml.decoder, ggml.geometry) == (folder.encoder, folder.decoder, folder.geometry)
    hub = {
        "suppress": tuple(sorted(folder.settings.suppress + (folder.settings.start,))),
        "forced": ((1, None), (2, 422)),
    }
    assert ggml.settings == dataclasses.replace(folder.settings, **hub)
    for text in TEXTS + [REFERENCE["cases"]["speech_prompt"]["prompt"]]:
        assert ggml.tokenizer.encode(text) == folder.tokenizer.encode(text), text
    ids = np.random.default_rng(0).integers(0, folder.geometry["vocab_size"], (50, 30)).tolist()
    for row in ids:
        for skip in (True, False):
            assert ggml.tokenizer.decode(row, skip) == folder.tokenizer.decode(row, skip)


# A detected language, a prompt, timestamps, translation (test_whisper runs the rest on the folder).
CASES = ["speech_detect", "speech_prompt", "speech_timestamps", "chirp_translate_timestamps"]


@pytest.mark.parametrize("name", CASES)
def test_segments_match_transformers(transcriber, name, monkeypatch):
    case = REFERENCE["cases"][name]
    audio = CLIPS[case["clip"]]
    if not first_window_only(case):
        monkeypatch.setattr(transcriber, "encode_window", given_features(transcriber, audio))
    got = windows(transcriber, audio.tolist(), case)
    assert as_reference(got) == case["segments"]
    assert transcriber.text([t for s in got for t in s.tokens]) == case["text"]
    if case["prompt"]:
        assert transcriber.prompt_ids(case["prompt"]) == case["prompt_ids"]


def test_the_cli_transcribes_a_ggml_file(ggml_file, tmp_path):
    import wave

    clip = tmp_path / "speech.wav"
    with wave.open(str(clip), "wb") as out:
        out.setnchannels(1), out.setsampwidth(2), out.setframerate(16000)
        out.writeframes((np.clip(SPEECH, -1, 1) * 32767).astype("<i2").tobytes())
    case = REFERENCE["cases"]["speech_en"]
    args = ["transcribe", str(clip), "--model", str(ggml_file), "--language", "en"]
    args += ["--max-tokens", str(case["max_new_tokens"]), "--format", "text"]
    run = subprocess.run([sys.executable, "-m", "py_engine", *args], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == case["text"].strip()


WIDE = {"d_model": 64, "encoder_attention_heads": 2, "decoder_attention_heads": 2}
WIDE |= {"encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "dtype": "float32"}


def wide_folder(folder: Path, kind: str) -> Path:
    """The fixture's vocabulary and settings with random weights 64 wide (ggml's 32-element blocks fit
    its rows), every matrix whisper.cpp quantizes holding values `kind`'s blocks represent exactly."""
    folder.mkdir()
    for name in ("tokenizer.json", "generation_config.json"):
        (folder / name).write_bytes((MODEL / name).read_bytes())
    config = json.loads((MODEL / "config.json").read_text()) | WIDE
    (folder / "config.json").write_text(json.dumps(config))
    rng = np.random.default_rng(7)
    tensors = {}
    for name, shape in whisper_shapes(*whisper_configs(config, "config.json")).items():
        values = rng.standard_normal(shape).astype(np.float32) * (0.02 if name.endswith("bias") else 0.15)
        if name.endswith("layer_norm.weight"):
            values += 1
        if len(shape) == 2 and "positions" not in name:
            values = dequantize(quantize(values, kind), kind, shape)
        tensors[name] = values
    header, offset = {}, 0
    for name, values in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(values.shape), "data_offsets": [offset, offset + values.nbytes]}
        offset += values.nbytes
    raw = json.dumps(header).encode()
    body = b"".join(values.tobytes() for values in tensors.values())
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    return folder


def ids_of(model) -> list:
    """The first windows' segments' tokens for the speech clip, in English with timestamps."""
    dev = device(False)[0]

    async def run():
        transcriber = await load_transcriber(model, dev)
        out = []
        steps = transcriber.windows(SPEECH.tolist(), language="en", timestamps=True, window_tokens=12)
        async for segments in steps:
            out += [s.tokens for s in segments]
            if len(out) >= 2:  # two windows (the model's timestamps seek): enough to compare
                await steps.aclose()
                return out
        return out

    return asyncio.run(run())


@pytest.mark.slow  # two loads and windows a format: ~10 s each on lavapipe
@pytest.mark.parametrize("kind", ["q8_0", "q5_0"])
def test_quantized_files_transcribe_as_their_values(tmp_path, kind):
    """whisper.cpp's Q8_0 / Q5_0 matrices, read by the engine's block kernels: the ids of an HF folder
    holding the very values they stand for (f32 arithmetic on dequantized weights both ways)."""
    folder = wide_folder(tmp_path / "hf", kind)
    path = tmp_path / f"ggml-{kind}.bin"
    write_ggml(folder, path, quantized=kind)
    files = read_ggml_whisper_files(path)
    assert {info.dtype for info in files.tensors.values()} == {"F32", "F16", kind.upper()}
    fc1 = files.tensors["model.decoder.layers.0.fc1.weight"]
    with open(path, "rb") as file:
        file.seek(fc1.start)
        assert quantize(dequantize(file.read(fc1.nbytes), kind, fc1.shape), kind)  # a block layout of `kind`
    want = ids_of(folder)
    assert want and ids_of(path) == want


@pytest.mark.parametrize("dtype", ["Q8_1", "IQ4_NL", "Q2_K"])
def test_other_types_are_refused_by_name(ggml_file, dtype):
    model = read_ggml_whisper(ggml_file)
    name = "model.decoder.layers.0.fc1.weight"
    model.tensors[name] = dataclasses.replace(model.tensors[name], dtype=dtype)
    with pytest.raises(ModelFileError, match=f"'decoder.blocks.0.mlp.0.weight' is {dtype}, not supported") as caught:
        check_types(model)
    assert str(ggml_file) in str(caught.value)


def test_an_old_quantization_version_is_refused(tmp_path):
    folder = wide_folder(tmp_path / "hf", "q8_0")
    path = tmp_path / "old.bin"
    write_ggml(folder, path, quantized="q8_0")
    raw = bytearray(path.read_bytes())
    raw[44:48] = struct.pack("<i", 1007)  # ftype, after the magic and ten hyperparameters
    path.write_bytes(raw)
    with pytest.raises(ModelFileError, match="quantization version 1 .ftype 1007.") as caught:
        read_ggml_whisper_files(path)
    assert str(path) in str(caught.value)


@pytest.mark.slow  # a server, a load and a transcription: ~10 s
def test_the_app_serves_a_ggml_file_for_transcriptions(ggml_file):
    """python -m app --model file.bin: a transcription model whose one file is served, and /v1/audio's."""
    openai = pytest.importorskip("openai")
    from test_audio_api import serving

    from app.models import ModelRegistry
    from app.server import create_app

    registry = ModelRegistry([ggml_file], include_cache=False)
    (served,) = registry.models()
    assert (served.kind, served.task, list(served.files)) == ("ggml", "transcription", [ggml_file.name])
    case = REFERENCE["cases"]["speech_detect"]
    clip = ROOT / REFERENCE["clips"]["speech"]
    with serving(create_app(registry)) as url:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)
        got = client.audio.transcriptions.create(
            model=served.id, file=("speech.wav", clip.read_bytes()), extra_body={"max_tokens": case["max_new_tokens"]}
        )
    assert got.text == case["text"].strip()


def vocabulary(n_vocab: int, n_bpe: int):
    return SimpleNamespace(vocab=[b""] * n_bpe, hparams={"n_vocab": n_vocab, "n_text_ctx": 448}, path="ggml.bin")


def test_ids_and_settings_of_the_real_vocabularies():
    """whisper.cpp's ids for English-only (tiny.en ... medium.en), multilingual and large-v3 vocabularies,
    and the hub's generation_config.json settings (whisper-base's suppress_tokens, as the hub has them)."""
    english = vocabulary(51864, 50256)
    ids = special_ids(english)
    assert (ids["eot"], ids["sot"], ids["translate"], ids["startofprev"], ids["timestamp_begin"]) == (
        50256, 50257, 50357, 50360, 50363,
    )  # fmt: skip
    got = settings(english, ids)
    assert (got.multilingual, got.lang_to_id, got.task_to_id, got.forced) == (False, {}, {}, ((1, 50362),))
    assert got.suppress[-6:] == (50257, 50357, 50358, 50359, 50360, 50361) and got.begin_suppress == (220, 50256)
    base = vocabulary(51865, 50257)
    got = settings(base, special_ids(base))
    hub = [50254, 50258, 50358, 50359, 50360, 50361, 50362]  # whisper-base's suppress_tokens end so
    assert (got.start, got.eos, got.no_timestamps, got.prev_sot) == (50258, 50257, 50363, 50361)
    assert got.suppress[-7:] == tuple(hub) and len(got.suppress) == 88 and got.forced == ((1, None), (2, 50359))
    assert (len(got.lang_to_id), got.lang_to_id["<|en|>"], got.lang_to_id["<|su|>"]) == (99, 50259, 50357)
    large = vocabulary(51866, 50257)
    got = settings(large, special_ids(large))
    assert (got.lang_to_id["<|yue|>"], got.task_to_id["transcribe"], got.timestamp_begin) == (50358, 50360, 50365)


def test_a_vocabulary_without_room_for_the_special_tokens_is_refused():
    with pytest.raises(ModelFileError, match="ggml.bin: n_vocab 1800 does not hold Whisper's special"):
        special_ids(vocabulary(1800, 320))
