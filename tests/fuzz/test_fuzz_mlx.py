"""Fuzzing MLX 4-bit folders (formats/mlx.py): fixtures quantized as mlx-lm lays them out (every
matrix whose row length is a multiple of the group: a uint32 `weight` of packed nibbles, f16 or
bf16 `scales` and `biases`; `quantization: {bits, group_size}` in config.json), written as
headers only, then mutated and read as hf_folders.load reads a folder."""

import json

import pytest
from harness import fuzz
from hf_folders import FIXTURES, as_text, encode_header, loader, mutate_folder, read_folder, scratch_dir

FIXTURE_GROUPS = (("qwen3-f32", 64, "BF16"), ("llama-f32", 32, "F16"), ("gemma3-f32", 32, "BF16"))
FIXTURE_GROUPS += (("phi3-f32", 32, "F16"), ("qwen3_5-f32", 32, "F16"), ("lfm2-f32", 64, "BF16"))
BYTES = {"F32": 4, "F16": 2, "BF16": 2, "U32": 4}


def quantized_header(header: dict, group: int, scale_dtype: str) -> dict:
    """The header of the same model MLX-quantized: shapes and dtypes only (offsets laid end to end)."""
    entries = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        shape = entry["shape"]
        if len(shape) == 2 and shape[1] % group == 0 and name.endswith(".weight"):
            n, k, base = shape[0], shape[1], name[: -len(".weight")]
            entries[name] = ("U32", [n, k // 8])
            entries[base + ".scales"] = entries[base + ".biases"] = (scale_dtype, [n, k // group])
        else:
            entries[name] = (entry["dtype"], shape)
    out, at = {}, 0
    for name, (dtype, shape) in entries.items():
        size = BYTES[dtype] * shape[0] * (shape[1] if len(shape) > 1 else 1) * (shape[2] if len(shape) > 2 else 1)
        out[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + size]}
        at += size
    return out


def mlx_folder(fixture: str, group: int, scale_dtype: str) -> dict:
    folder = read_folder(FIXTURES / fixture)
    config = json.loads(folder["files"]["config.json"])
    config["quantization"] = {"group_size": group, "bits": 4}
    folder["files"]["config.json"] = as_text(json.dumps(config).encode())
    head, _ = folder["shards"]["model.safetensors"]
    header = quantized_header(json.loads(head.encode("latin-1")[8:]), group, scale_dtype)
    new = encode_header(header)
    data = max(entry["data_offsets"][1] for entry in header.values())
    folder["shards"]["model.safetensors"] = [as_text(new), len(new) + data]
    return folder


@pytest.fixture(scope="module")
def seeds():
    return [mlx_folder(*spec) for spec in FIXTURE_GROUPS]


@pytest.fixture
def load(tmp_path):
    with scratch_dir(tmp_path) as directory:
        yield loader(directory / "model")


def test_seeds_load(seeds, load):
    for folder in seeds:
        assert "U32" in folder["shards"]["model.safetensors"][0]
        load(folder)


def test_fuzz_mlx(seeds, load):
    counts = fuzz("mlx", seeds, mutate_folder, load)
    assert counts["accepted"] > 0 and counts["typed_errors"] > 0
