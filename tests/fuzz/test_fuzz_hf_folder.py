"""Fuzzing Hugging Face model folders: config.json, generation_config.json, the shard index and
the safetensors headers of the tiny fixtures (one folder per architecture, the hybrids' second
layer patterns, a sharded one and two multimodal text towers), mutated one file at a time and read
as loading reads them before a device is opened (hf_folders.load)."""

import pytest
from harness import fuzz
from hf_folders import FIXTURES, loader, mutate_folder, read_folder, scratch_dir, text_tower_folder

ARCHS = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "qwen3_5", "lfm2")


def folder_seeds() -> list[dict]:
    seeds = [read_folder(FIXTURES / f"{arch}-f32") for arch in ARCHS]
    seeds += [read_folder(FIXTURES / f"{arch}-f32" / "pattern") for arch in ("qwen3_5", "lfm2")]
    seeds.append(read_folder(FIXTURES / "qwen2-bf16"))  # sharded: model.safetensors.index.json
    seeds.append(text_tower_folder(seeds[ARCHS.index("gemma3")], "Gemma3ForConditionalGeneration"))
    seeds.append(text_tower_folder(seeds[ARCHS.index("qwen3_5")], "Qwen3_5ForConditionalGeneration"))
    return seeds


@pytest.fixture(scope="module")
def seeds():
    return folder_seeds()


@pytest.fixture
def load(tmp_path):
    with scratch_dir(tmp_path) as directory:
        yield loader(directory / "model")


def test_seeds_load(seeds, load):
    for folder in seeds:
        load(folder)


def test_fuzz_hf_folder(seeds, load):
    counts = fuzz("hf_folder", seeds, mutate_folder, load)
    assert counts["accepted"] > 0 and counts["typed_errors"] > 0
