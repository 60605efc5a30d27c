"""Gemma 3's pictures on the GPU against transformers (tests/fixtures/gemma3vl-f32,
tools/make_gemma3_vision_fixture.py): the SigLIP tower and Gemma3MultiModalProjector on the
processor's pixel values, the text tower with the picture embeddings spliced in unscaled and a
picture's tokens attending to each other both ways (logits and 16 greedy tokens, one picture and
two), the pictures from their PNGs through the GPU's resize, the CLI and the OpenAI layer."""

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from test_vision_smolvlm_model import patch_rows

from py_engine.errors import ModelFileError
from py_engine.gpu.wgpu_host import open_wgpu_device
from py_engine.models.gemma3_vision import gemma3_vision_config, gemma3_vision_tensors
from py_engine.vision.encoder import load_vision_encoder

FIXTURE = Path(__file__).parent / "fixtures" / "gemma3vl-f32"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())
ARRAYS = np.load(FIXTURE / "reference.npz")
CONFIG = json.loads((FIXTURE / "config.json").read_text())
IMAGE_TOKEN = REFERENCE["image_token_id"]
PATCH = CONFIG["vision_config"]["patch_size"]


def pixel_tiles(prompt: dict) -> list[np.ndarray]:
    return [ARRAYS[name][0].astype(np.float32) for name in prompt["pixel_values"]]


@pytest.fixture(scope="module")
def device():
    return asyncio.run(open_wgpu_device())


@pytest.fixture(scope="module")
def encoder(device):
    return asyncio.run(load_vision_encoder(FIXTURE, device))


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_vision_tower_and_projector(encoder, name):
    prompt = REFERENCE["prompts"][name]
    got = np.array(asyncio.run(encoder.encode([patch_rows(t, PATCH) for t in pixel_tiles(prompt)])), np.float32)
    want = ARRAYS[prompt["image_features"]].reshape(got.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@dataclass
class Info:
    shape: tuple
    path: str = "model.safetensors"


def test_the_tower_is_read_under_each_checkpoint_layout():
    """The hub's names, transformers 5.24's save and its modules' names read the same; one name twice is refused."""
    parts = ["embeddings.patch_embedding.weight", "post_layernorm.bias"]
    layouts = ["vision_tower.vision_model.", "vision_tower.", "model.vision_tower.", "model.vision_tower.vision_model."]
    for layout in layouts:
        tensors = {layout + part: Info((32, 3, 14, 14) if "patch" in part else (32,)) for part in parts}
        tensors |= {"multi_modal_projector.mm_input_projection_weight": Info((32, 64)), "lm_head.weight": Info((9, 64))}
        read = gemma3_vision_tensors(tensors)
        assert sorted(read) == [
            "model.multi_modal_projector.mm_input_projection_weight",
            "model.vision_tower.embeddings.patch_embedding.weight",
            "model.vision_tower.post_layernorm.bias",
        ]
        assert read["model.vision_tower.embeddings.patch_embedding.weight"].shape == (32, 588)
    twice = {"vision_tower.post_layernorm.bias": Info((32,)), "model.vision_tower.post_layernorm.bias": Info((32,))}
    with pytest.raises(ModelFileError, match="stored twice"):
        gemma3_vision_tensors(twice)


@pytest.mark.parametrize(
    "change,message",
    [
        ({"mm_tokens_per_image": 10}, "mm_tokens_per_image should be a square"),
        ({"mm_tokens_per_image": 4}, "more than 8"),
        ({"mm_tokens_per_image": 16}, "ratio of 4"),  # 6 patches a side do not pool into 4
        ({"vision_config": {**CONFIG["vision_config"], "patch_size": 16}}, "multiple of patch_size 16"),
    ],
)
def test_config_values_are_checked(change, message):
    with pytest.raises(ModelFileError, match=message):
        gemma3_vision_config({**CONFIG, **change}, "config.json")
