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

from py_engine.engine import Engine
from py_engine.errors import ModelFileError, WispError
from py_engine.gpu.wgpu_host import open_wgpu_device
from py_engine.models.gemma3_vision import gemma3_vision_config, gemma3_vision_tensors
from py_engine.runtime.picture_spans import prefill_chunks
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


@pytest.fixture(scope="module")
def engine(device):
    return asyncio.run(Engine.load(FIXTURE, device, context=96, precision="exact", image_rows=32, picture_spans=True))


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


def encode_pixels(device, encoder, engine, prompt: dict) -> None:
    """The processor's pixel values through the tower into the engine's image_embeds, in order."""
    for k, tile in enumerate(pixel_tiles(prompt)):
        device.write_buffer(encoder.patches, 0, patch_rows(tile, PATCH))
        device.submit(encoder.commands_into(engine.image_embeds, k * encoder.tokens))


async def answer(engine, ids: list[int], causal: bool = False) -> tuple[np.ndarray, list[int]]:
    """The prompt's last logits and 16 greedy tokens; causal: with every picture end zeroed after
    place_images, so that the picture tokens attend causally (as transformers without token_type_ids)."""
    engine.reset()
    assert engine.place_images(0, ids, IMAGE_TOKEN) == ids.count(IMAGE_TOKEN)
    if causal:
        engine.device.write_buffer(engine.executor.buffer("picture_ends"), 0, bytes(4 * engine.context))
    logits = np.array(await engine.prompt_logits(ids), np.float32)
    engine.reset()
    return logits, [t async for t in engine.generate(ids, 16)]


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_prompt_with_pictures(device, encoder, engine, name):
    """Transformers' logits (1e-3) and 16 greedy tokens: the picture rows spliced in after Gemma's
    sqrt(hidden) embedding scale, unscaled, and each picture's tokens attending to all of it."""
    prompt = REFERENCE["prompts"][name]
    encode_pixels(device, encoder, engine, prompt)
    logits, greedy = asyncio.run(answer(engine, prompt["input_ids"]))
    np.testing.assert_allclose(logits, np.array(prompt["logits"], np.float32), atol=1e-3)
    assert greedy == prompt["greedy"]


def test_the_picture_mask_matters(device, encoder, engine):
    """A causal mask over the picture tokens gives transformers' causal logits (without token_type_ids),
    which are 0.66 away from the bidirectional ones: the test above would fail with a causal mask."""
    prompt = REFERENCE["prompts"]["two_images"]
    encode_pixels(device, encoder, engine, prompt)
    logits, greedy = asyncio.run(answer(engine, prompt["input_ids"], causal=True))
    want, bidirectional = (np.array(prompt[k], np.float32) for k in ("causal_logits", "logits"))
    np.testing.assert_allclose(logits, want, atol=1e-3)
    assert np.abs(logits - bidirectional).max() > 0.5 and greedy != prompt["greedy"]


def test_a_picture_is_never_split_across_forwards(device, encoder):
    """Prefill forwards of 16 rows: each picture's 9 tokens go whole into one (prefill_chunks), and the
    answer is transformers' still."""
    prompt = REFERENCE["prompts"]["two_images"]
    ids = prompt["input_ids"]

    async def run():
        small = await Engine.load(
            FIXTURE, device, context=96, precision="exact", image_rows=32, picture_spans=True, max_rows=16
        )
        encode_pixels(device, encoder, small, prompt)
        return await answer(small, ids)

    logits, greedy = asyncio.run(run())
    np.testing.assert_allclose(logits, np.array(prompt["logits"], np.float32), atol=1e-3)
    assert greedy == prompt["greedy"]
    first = ids.index(IMAGE_TOKEN)
    spans = [(first, first + 9), (ids.index(IMAGE_TOKEN, first + 9), ids.index(IMAGE_TOKEN, first + 9) + 9)]
    sizes = prefill_chunks(0, len(ids), 16, spans)
    edges = {sum(sizes[:i]) for i in range(len(sizes))}
    assert sum(sizes) == len(ids) and max(sizes) <= 16 and not any(a < e < b for a, b in spans for e in edges)


def test_prefill_chunks():
    assert prefill_chunks(0, 1100, 512) == [512, 512, 76]  # no pictures: as before
    assert prefill_chunks(3, 30, 16, [(10, 20)]) == [7, 16, 7]
    assert prefill_chunks(0, 40, 16, [(2, 12), (14, 24)]) == [14, 16, 10]
    with pytest.raises(WispError, match="inside a picture"):
        prefill_chunks(12, 10, 16, [(10, 20)])
    with pytest.raises(WispError, match="does not fit"):
        prefill_chunks(0, 40, 16, [(2, 30)])
