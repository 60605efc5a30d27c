"""whisper.cpp's model files (the legacy ggml format, not GGUF) read by py_engine/formats/ggml_whisper.py:
a tiny random Whisper (multilingual vocabulary size, width 8) written as whisper.cpp's converter writes
it (tools/make_ggml_whisper.py) reads back under transformers' names with transformers' shapes and
the same values (float16 where the converter rounds them), its mel filters, vocabulary bytes and
special ids where whisper.cpp puts them; damaged files are refused with the file named."""

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from py_engine.errors import ModelFileError
from py_engine.formats.ggml_whisper import MAGIC, ggml_name, hf_name, read_ggml_whisper
from py_engine.models.whisper import whisper_configs, whisper_shapes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from make_ggml_whisper import byte_decoder, write_ggml  # noqa: E402

CONFIG = {
    "vocab_size": 51865,
    "num_mel_bins": 80,
    "d_model": 8,
    "encoder_layers": 1,
    "decoder_layers": 2,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 32,
    "decoder_ffn_dim": 32,
    "max_source_positions": 1500,
    "max_target_positions": 5,
}
TOKENS = [b"!", b" the", "é".encode(), b"\xff\xfe", b""]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A random HF Whisper folder in float32, its tokenizer.json with TOKENS as GPT-2 byte strings."""
    folder = tmp_path_factory.mktemp("whisper")
    rng = np.random.default_rng(0)
    shapes = whisper_shapes(*whisper_configs(CONFIG, "config.json"))
    arrays = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    header, offset = {}, 0
    for name, array in arrays.items():
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    raw = json.dumps(header).encode()
    body = b"".join(a.tobytes() for a in arrays.values())
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + body)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    encode = {b: c for c, b in byte_decoder().items()}
    vocab = {"".join(encode[b] for b in token): i for i, token in enumerate(TOKENS)}
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab}}))
    return folder, arrays


@pytest.fixture(scope="module")
def ggml_file(folder, tmp_path_factory):
    path = tmp_path_factory.mktemp("ggml") / "ggml-tiny.bin"
    write_ggml(folder[0], path)
    return path


def values(info) -> np.ndarray:
    with open(info.path, "rb") as file:
        file.seek(info.start)
        raw = file.read(info.nbytes)
    return np.frombuffer(raw, {"F32": np.float32, "F16": np.float16}[info.dtype]).reshape(info.shape)


def test_tensors_read_back_under_transformers_names(folder, ggml_file):
    _, arrays = folder
    model = read_ggml_whisper(ggml_file)
    assert model.config() == CONFIG and model.hparams["ftype"] == 1 and model.multilingual
    assert list(model.tensors) == list(arrays)  # every tensor, in the converter's (safetensors') order
    for name, info in model.tensors.items():
        assert info.shape == arrays[name].shape and hf_name(info.name) == name and ggml_name(name) == info.name
        rounded = arrays[name].astype(np.float16) if info.dtype == "F16" else arrays[name]
        assert np.array_equal(values(info), rounded), name
    kinds = {name: info.dtype for name, info in model.tensors.items()}
    assert kinds["model.encoder.conv1.weight"] == kinds["model.decoder.embed_tokens.weight"] == "F16"
    assert kinds["model.encoder.conv1.bias"] == kinds["model.decoder.embed_positions.weight"] == "F32"
    assert model.tensors["model.encoder.conv1.bias"].shape == (8,)  # stored as [8, 1]


def test_mel_filters_vocabulary_and_special_ids(ggml_file):
    from py_engine.speech.log_mel import mel_filters

    model = read_ggml_whisper(ggml_file)
    assert model.vocab == TOKENS
    assert np.array_equal(values(model.mel_filters), np.asarray(mel_filters(80), np.float32))
    ids = model.special_ids()
    assert (ids["eos_token_id"], ids["decoder_start_token_id"], ids["no_timestamps_token_id"]) == (50257, 50258, 50363)
    assert (ids["transcribe"], ids["timestamp_begin"], ids["prev_sot_token_id"]) == (50359, 50364, 50361)
    assert (
        ids["lang_to_id"]["<|en|>"] == 50259 and ids["lang_to_id"]["<|su|>"] == 50357 and len(ids["lang_to_id"]) == 99
    )


def test_names_outside_whisper_map_to_nothing():
    assert hf_name("encoder.blocks.0.cross_attn.query.weight") is None  # the encoder has no cross-attention
    assert hf_name("decoder.blocks.x.mlp.0.weight") is None and hf_name("decoder.proj.weight") is None
    assert (
        ggml_name("proj_out.weight") is None and ggml_name("model.encoder.layers.0.encoder_attn.q_proj.weight") is None
    )


def damaged(ggml_file, tmp_path, edit) -> Path:
    raw = bytearray(ggml_file.read_bytes())
    path = tmp_path / "damaged.bin"
    path.write_bytes(edit(raw))
    return path


TENSORS_AT = 4 + 44 + 8 + 80 * 201 * 4 + 4 + sum(4 + len(t) for t in TOKENS)  # the first tensor's header


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda raw: b"GGUF" + raw[4:], "a GGUF file, not whisper.cpp's"),
        (lambda raw: b"ggml" + raw[4:], "no ggml magic"),  # a big-endian file
        (lambda raw: raw[:-3], "run past the end of the file"),
        (lambda raw: raw[:30], "truncated"),
        (lambda raw: raw[:16] + struct.pack("<i", 3) + raw[20:], "n_audio_state 8 is not a multiple"),
        (lambda raw: raw[: TENSORS_AT + 12] + struct.pack("<i", 9) + raw[TENSORS_AT + 16 :], "has shape"),
        (lambda raw: raw[: TENSORS_AT + 4] + struct.pack("<i", 999) + raw[TENSORS_AT + 8 :], "a tensor header"),
        (lambda raw: raw + raw[TENSORS_AT : TENSORS_AT + 200], "appears twice|run past|truncated"),
    ],
)
def test_damaged_files_are_refused_naming_the_file(ggml_file, tmp_path, edit, problem):
    path = damaged(ggml_file, tmp_path, edit)
    with pytest.raises(ModelFileError, match=problem) as caught:
        read_ggml_whisper(path)
    assert str(path) in str(caught.value)


def test_a_missing_tensor_is_named(folder, tmp_path):
    source, _ = folder
    path = tmp_path / "cut.bin"
    write_ggml(source, path)
    first = read_ggml_whisper(path).tensors["model.decoder.layers.1.fc2.bias"]
    raw = path.read_bytes()
    header = 12 + 4 * 1 + len(first.name)  # n_dims, name length, type; one dim; the name
    path.write_bytes(raw[: first.start - header] + raw[first.start + first.nbytes :])
    with pytest.raises(ModelFileError, match="missing, 'model.decoder.layers.1.fc2.bias'"):
        read_ggml_whisper(path)


def test_the_magic_is_ggml():
    assert struct.pack("<I", MAGIC) == b"lmgg"  # "ggml" as a little-endian int32
