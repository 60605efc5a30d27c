"""Validation at the boundary (issue 16) for Hugging Face folders, safetensors and MLX: each bad
model below is a fixture with one thing broken, and must be refused with a ModelFileError naming
the file and the field (or tensor) before anything plans from it; through the CLI, with exactly
one `error:` line, exit code 2, and no GPU device opened."""

import dataclasses
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import py_engine.gpu
from py_engine.cli import main
from py_engine.errors import ModelFileError, UnsupportedArchitectureError
from py_engine.formats.model_files import read_model
from py_engine.formats.source import open_source
from py_engine.models import graph_generator
from py_engine.models.builder import GraphBuilder
from py_engine.models.config_check import check_config
from py_engine.models.graph_options import GraphOptions
from py_engine.models.tensor_check import global_shapes, layer_shapes
from py_engine.session import read_model_files

FIXTURES = Path(__file__).parent / "fixtures"
ARCHS = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "qwen3_5", "lfm2")


def copy(tmp_path: Path, arch: str) -> Path:
    model = tmp_path / arch
    shutil.copytree(FIXTURES / f"{arch}-f32", model, ignore=shutil.ignore_patterns("pattern", "reference.json"))
    return model


def edit_config(model: Path, edit) -> None:
    path = model / "config.json"
    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config, allow_nan=True))


def edit_header(model: Path, edit) -> None:
    """Rewrite model.safetensors' JSON header (the data stays where its offsets say)."""
    path = model / "model.safetensors"
    raw = path.read_bytes()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + size])
    data = raw[8 + size :]
    edit(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def setter(key, value):
    return lambda config: config.__setitem__(key, value)


def in_rope(key, value):
    return lambda config: config["rope_parameters"].__setitem__(key, value)


# (arch, config edit, words the message must hold)
CONFIGS = {
    "kv heads 0": ("llama", setter("num_key_value_heads", 0), "num_key_value_heads"),
    "kv heads not dividing": ("llama", setter("num_key_value_heads", 3), "num_key_value_heads"),
    "heads 0": ("llama", setter("num_attention_heads", 0), "num_attention_heads"),
    "heads not dividing hidden": ("phi3", setter("num_attention_heads", 5), "hidden_size"),
    "eps NaN": ("llama", setter("rms_norm_eps", float("nan")), "rms_norm_eps"),
    "eps Infinity": ("lfm2", setter("norm_eps", float("inf")), "rms_norm_eps"),
    "eps negative": ("qwen3", setter("rms_norm_eps", -1e-6), "rms_norm_eps"),
    "hidden a list": ("llama", setter("hidden_size", [64]), "hidden_size"),
    "vocab Infinity": ("llama", setter("vocab_size", float("inf")), "vocab_size"),
    "vocab a string": ("qwen2", setter("vocab_size", "384"), "vocab_size"),
    "layers huge": ("llama", setter("num_hidden_layers", 10**12), "num_hidden_layers"),
    "head_dim too big": ("qwen3", setter("head_dim", 514), "head_dim must be an integer from 2 to 512"),
    "head_dim odd": ("qwen3", setter("head_dim", 23), "head_dim"),
    "theta 0": ("qwen3", in_rope("rope_theta", 0), "rope_theta"),
    "theta huge": ("qwen3", in_rope("rope_theta", 1e300), "rope_theta"),
    "theta a dict": ("qwen3", in_rope("rope_theta", {}), "rope_theta"),
    "rope type unknown": ("qwen3", in_rope("rope_type", "dynamic"), "rope_type"),
    "rope_parameters a list": ("qwen3", setter("rope_parameters", [1]), "rope_parameters"),
    "llama3 factor 0": ("llama", in_rope("factor", 0), "factor"),
    "llama3 factor 400 digits": ("llama", in_rope("factor", 10**400), "rope_scaling.factor"),
    "longrope max position null": ("phi3", in_rope("max_position_embeddings", None), "max_position_embeddings"),
    "pre-attn scalar tiny": ("gemma2", setter("query_pre_attn_scalar", 1e-300), "query_pre_attn_scalar"),
    "llama3 factors equal": ("llama", in_rope("high_freq_factor", 1.0), "high_freq_factor"),
    "llama3 no original": ("llama", in_rope("original_max_position_embeddings", None), "original_max_position"),
    "longrope short": ("phi3", in_rope("long_factor", [1.0]), "long_factor"),
    "longrope zero": ("phi3", in_rope("short_factor", [0.0, 1.0, 1.0, 1.0]), "short_factor"),
    "longrope strings": ("phi3", in_rope("short_factor", ["1"] * 4), "short_factor"),
    "longrope original 1": ("phi3", in_rope("original_max_position_embeddings", 1), "original_max_position"),
    "partial rotary 0": ("phi3", in_rope("partial_rotary_factor", 0.0), "partial_rotary_factor"),
    "partial rotary 2": ("qwen3_5", in_rope("partial_rotary_factor", 2.0), "partial_rotary_factor"),
    "layer type unknown": ("gemma2", setter("layer_types", ["sliding_attention", "banana"]), "layer_types"),
    "layer types short": ("gemma2", setter("layer_types", ["full_attention"]), "layer_types"),
    "layer types of ints": ("gemma2", setter("layer_types", [1, 2]), "layer_types"),
    "conv layer in qwen3_5": ("qwen3_5", setter("layer_types", ["conv"] * 3), "layer_types"),
    "pattern 0": ("gemma3", lambda c: (c.pop("layer_types"), c.update(sliding_window_pattern=0)), "pattern"),
    "eos past vocab": ("llama", setter("eos_token_id", 384), "eos_token_id"),
    "eos a string": ("llama", setter("eos_token_id", "x"), "eos_token_id"),
    "bos negative": ("llama", setter("bos_token_id", -1), "bos_token_id"),
    "architectures a string": ("llama", setter("architectures", "LlamaForCausalLM"), "architectures"),
    "architectures of ints": ("llama", setter("architectures", [1]), "architectures"),
    "tie a string": ("qwen2", setter("tie_word_embeddings", "false"), "tie_word_embeddings"),
    "window negative": ("mistral", setter("sliding_window", -8), "sliding_window"),
    "pre-attn scalar 0": ("gemma2", setter("query_pre_attn_scalar", 0), "query_pre_attn_scalar"),
    "softcap negative": ("gemma2", setter("final_logit_softcapping", -1.0), "final_logit_softcapping"),
    "softcap NaN": ("gemma2", setter("attn_logit_softcapping", float("nan")), "attn_logit_softcapping"),
    "delta value heads": ("qwen3_5", setter("linear_num_value_heads", 5), "linear_num_value_heads"),
    "delta key heads 0": ("qwen3_5", setter("linear_num_key_heads", 0), "linear_num_key_heads"),
    "delta key dim": ("qwen3_5", setter("linear_key_head_dim", 200), "linear_key_head_dim"),
    "delta conv kernel": ("qwen3_5", setter("linear_conv_kernel_dim", 9), "linear_conv_kernel_dim"),
    "lfm2 conv kernel 5": ("lfm2", setter("conv_L_cache", 5), "conv_L_cache"),
    "lfm2 attention indices": ("lfm2", lambda c: c.update(layer_types=None, full_attn_idxs="1"), "full_attn_idxs"),
    "no text_config": ("gemma3", setter("architectures", ["Gemma3ForConditionalGeneration"]), "text_config"),
    "text_config a list": (
        "gemma3",
        lambda c: c.update(architectures=["Gemma3ForConditionalGeneration"], text_config=[1]),
        "text_config should be an object",
    ),
    "MLX not an object": ("qwen3", setter("quantization", "4bit"), "quantization"),
    "MLX bits 3": ("qwen3", setter("quantization", {"bits": 3, "group_size": 64}), "bits=3"),
    "MLX group a float": ("qwen3", setter("quantization", {"bits": 4, "group_size": 64.0}), "group_size"),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_bad_config_names_the_file_and_field(case, tmp_path):
    arch, edit, words = CONFIGS[case]
    model = copy(tmp_path, arch)
    edit_config(model, edit)
    with pytest.raises(ModelFileError) as err:
        read_model(open_source(model))
    assert str(model / "config.json") in str(err.value) and words in str(err.value)


def test_unsupported_architecture_is_refused_when_read(tmp_path):
    model = copy(tmp_path, "llama")
    edit_config(model, setter("architectures", ["FooForCausalLM"]))
    with pytest.raises(UnsupportedArchitectureError, match="FooForCausalLM.*LlamaForCausalLM"):
        read_model(open_source(model))


@pytest.mark.parametrize("text", [b"[" * 100_000 + b"]" * 100_000, b'{"vocab_size": ' + b"7" * 5000 + b"}", b"\xff{}"])
def test_hostile_json_is_a_model_file_error(text, tmp_path):
    model = copy(tmp_path, "llama")
    (model / "config.json").write_bytes(text)
    with pytest.raises(ModelFileError, match="config.json: malformed JSON"):
        read_model(open_source(model))


def test_a_gguf_config_is_checked_too():
    """check_config is format-blind: a config read from a GGUF file is named by that file."""
    cfg = read_model(open_source(FIXTURES / "llama-f32"))[0]
    with pytest.raises(ModelFileError, match=r"^m\.gguf: num_key_value_heads must be an integer from 1"):
        check_config(dataclasses.replace(cfg, num_kv_heads=0), "m.gguf")
    with pytest.raises(ModelFileError, match=r"^m\.gguf: rms_norm_eps"):
        check_config(dataclasses.replace(cfg, rms_norm_eps=float("nan")), "m.gguf")
    with pytest.raises(ModelFileError, match=r"^m\.gguf: rope_scaling.attention_factor"):
        longrope = {"rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [1.0] * 8}
        scaling = dict(longrope, original_max_position_embeddings=16, attention_factor="1")
        check_config(dataclasses.replace(cfg, rope_scaling=scaling), "m.gguf")


def shape_of(name, shape):
    return lambda header: header[name].update(shape=shape)


# (arch, header edit, words the message must hold)
HEADERS = {
    "1-D matrix": ("llama", shape_of("model.layers.0.self_attn.q_proj.weight", [4096]), "q_proj.weight"),
    "wrong rows": ("llama", shape_of("model.layers.0.self_attn.k_proj.weight", [64, 32]), "k_proj.weight"),
    "2-D norm": ("qwen3", shape_of("model.layers.1.self_attn.q_norm.weight", [4, 6]), "q_norm.weight"),
    "negative dim": ("llama", shape_of("model.norm.weight", [-64]), "model.norm.weight"),
    "zero-size tensor": ("llama", lambda h: h["model.norm.weight"].update(shape=[0], data_offsets=[0, 0]), "norm"),
    "huge dim of nothing": ("llama", lambda h: h["model.norm.weight"].update(shape=[2**40, 0]), "model.norm.weight"),
    "offsets strings": ("llama", lambda h: h["model.norm.weight"].update(data_offsets=["0", "4"]), "data_offsets"),
    "entry a list": ("llama", lambda h: h.__setitem__("model.norm.weight", [1]), "model.norm.weight"),
    "norm in I32": ("llama", lambda h: h["model.norm.weight"].update(dtype="I32"), "F32, F16 or BF16"),
    "ffn widths differ": ("phi3", shape_of("model.layers.0.mlp.gate_up_proj.weight", [112, 64]), "gate_up_proj"),
    "lfm2 conv width": ("lfm2", shape_of("model.layers.0.conv.conv.weight", [64, 1, 4]), "conv.conv.weight"),
    "delta conv rank": ("qwen3_5", shape_of("model.layers.0.linear_attn.conv1d.weight", [4]), "conv1d.weight"),
    "delta A_log": ("qwen3_5", shape_of("model.layers.0.linear_attn.A_log", [1, 6]), "A_log"),
    "embedding rows": ("gemma", shape_of("model.embed_tokens.weight", [383, 72]), "embed_tokens"),
}


@pytest.mark.parametrize("case", sorted(HEADERS))
def test_bad_tensor_names_the_tensor_and_file(case, tmp_path):
    arch, edit, words = HEADERS[case]
    model = copy(tmp_path, arch)
    edit_header(model, edit)
    with pytest.raises(ModelFileError) as err:
        read_model(open_source(model))
    assert str(model / "model.safetensors") in str(err.value) and words in str(err.value)


@pytest.mark.parametrize(
    "edit,words",
    [
        (lambda h: h.pop("model.layers.1.mlp.up_proj.weight"), "missing tensor 'model.layers.1.mlp.up_proj.weight'"),
        (lambda h: h["model.layers.0.mlp.down_proj.weight"].update(dtype="I32"), "weight type I32"),
    ],
)
def test_what_only_planning_sees_is_found_before_a_device(edit, words, tmp_path):
    """Presence and the matrices' formats: read_model_files plans the graph once, with no device."""
    model = copy(tmp_path, "qwen2")
    edit_header(model, edit)
    read_model(open_source(model))  # the index alone is fine
    with pytest.raises(ModelFileError, match=words):
        read_model_files(model, with_tokenizer=False)


def loop(path: Path) -> None:
    path.unlink(missing_ok=True)
    (path.parent / "loop-b").symlink_to(path)
    path.symlink_to(path.parent / "loop-b")


FILESYSTEM = {
    "config.json a directory": (lambda m: ((m / "config.json").unlink(), (m / "config.json").mkdir()), "config.json"),
    "config.json a loop": (lambda m: loop(m / "config.json"), "config.json"),
    "weights a directory": (
        lambda m: ((m / "model.safetensors").unlink(), (m / "model.safetensors").mkdir()),
        "no [*].safetensors weights",
    ),
    "weights a loop": (lambda m: loop(m / "model.safetensors"), "safetensors"),
    "generation_config eos": (lambda m: (m / "generation_config.json").write_text('{"eos_token_id": 999}'), "eos"),
}


@pytest.mark.parametrize("case", sorted(FILESYSTEM))
def test_bad_files_are_model_file_errors(case, tmp_path):
    breakage, words = FILESYSTEM[case]
    model = copy(tmp_path, "llama")
    breakage(model)
    with pytest.raises(ModelFileError, match=words):
        read_model_files(model, with_tokenizer=False)


def test_a_shard_that_is_a_directory(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(FIXTURES / "qwen2-bf16", model)  # sharded: the index names the shards
    shard = model / "model-00002-of-00002.safetensors"
    shard.unlink()
    shard.mkdir()
    with pytest.raises(ModelFileError, match=f"{shard}: not a regular file"):
        read_model(open_source(model))


def test_a_file_that_is_no_model(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelFileError, match="neither a GGUF file nor a model directory"):
        read_model(open_source(tmp_path / "config.json"))


@pytest.mark.parametrize("arch", ARCHS)
def test_every_tensor_the_graphs_read_has_a_shape_rule(arch):
    """Each name a graph generator looks up is one tensor_check knows: nothing planning indexes
    goes unchecked."""
    source = open_source(FIXTURES / f"{arch}-f32")
    cfg, tensors, _ = read_model(source)
    known, parts, looked_up = global_shapes(cfg), layer_shapes(cfg), set()

    def lookup(name):
        looked_up.add(name)
        return tensors[name]

    graph_generator(cfg.architecture)(GraphBuilder(cfg, lookup, GraphOptions(max_rows=8, kv_capacity=64)))
    for name in looked_up:
        assert name in known or name.split(".", 3)[3] in parts, name


# ---- through the CLI ----


@pytest.fixture
def no_device(monkeypatch):
    async def refuse(*args, **kwargs):
        raise AssertionError("the device was opened before the model was checked")

    monkeypatch.setattr(py_engine.gpu, "open_device", refuse)


CLI_CASES = {
    "kv heads 0": ("llama", lambda m: edit_config(m, setter("num_key_value_heads", 0)), "num_key_value_heads"),
    "eps NaN": ("qwen3_5", lambda m: edit_config(m, setter("rms_norm_eps", float("nan"))), "rms_norm_eps"),
    "1-D matrix": ("llama", lambda m: edit_header(m, HEADERS["1-D matrix"][1]), "q_proj.weight"),
    "missing tensor": ("llama", lambda m: edit_header(m, lambda h: h.pop("model.norm.weight")), "model.norm.weight"),
    "no tokenizer": ("llama", lambda m: None, "tokenizer.json"),
}


@pytest.mark.parametrize("command", ["generate", "chat"])
@pytest.mark.parametrize("case", sorted(CLI_CASES))
def test_cli_reports_a_bad_model_in_one_line_before_the_device(case, command, tmp_path, capsys, no_device):
    arch, breakage, words = CLI_CASES[case]
    model = copy(tmp_path, arch)
    breakage(model)
    args = ["--ids", "1,2"] + ([] if case == "no tokenizer" else ["--json"]) if command == "generate" else []
    assert main([command, "--model", str(model), *args]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert str(model) in lines[0] and words in lines[0]


def test_cli_bad_ids_before_the_device(capsys, no_device):
    assert main(["generate", "--model", str(FIXTURES / "llama-f32"), "--ids", "384", "--json"]) == 2
    assert capsys.readouterr().err.startswith("error: --ids: token ids must be in 0..383")


def test_cli_one_line_without_xdg_runtime_dir(tmp_path):
    """The case that started it: where a GPU driver opened first prints lines of its own."""
    model = copy(tmp_path, "llama")
    edit_config(model, setter("num_key_value_heads", 0))
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    command = [sys.executable, "-m", "py_engine", "generate", "--model", str(model), "--ids", "1", "--json"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: {model / 'config.json'}: num_key_value_heads")


# Speech models' fixtures: read by py_engine.speech's loaders (their own tests), not as chat models.
SPEECH_FIXTURES = ("moonshine-", "whisper-", "kani-", "nanocodec-")


def test_the_fixtures_pass():
    for model in [*FIXTURES.glob("*-*/config.json"), *FIXTURES.glob("*-f32/pattern/config.json")]:
        if not model.parent.name.startswith(SPEECH_FIXTURES):
            read_model_files(model.parent, with_tokenizer=False)


@pytest.mark.parametrize(
    "case,words",
    [
        ("no_tensor", "missing tensor 'model.vision_model.post_layernorm.weight'"),
        ("no_processor", "preprocessor_config.json"),
        ("bad_patch", "patch_size"),
    ],
)
def test_a_vision_model_is_checked_when_read(case, words, tmp_path):
    """A SmolVLM folder's picture side (processor files, vision tower tensors and config) is
    checked with the text tower, before any device: one ModelFileError naming the file."""
    model = copy(tmp_path, "smolvlm")
    if case == "no_tensor":
        edit_header(model, lambda header: header.pop("model.vision_model.post_layernorm.weight"))
    elif case == "no_processor":
        (model / "preprocessor_config.json").unlink()
    else:
        edit_config(model, lambda config: config["vision_config"].__setitem__("patch_size", 7))
    with pytest.raises(ModelFileError, match=words):
        read_model_files(model)
