"""Qwen3.5's pictures on the GPU against transformers (tests/fixtures/qwen3_5vl-f32,
tools/make_qwen3_5_vision_fixture.py): the processor's pixels (smart_resize, BICUBIC, merge-block patch
order, the still frame repeated), the ViT with its 2D RoPE, resampled position embeddings and patch merger,
and the hybrid text tower with the picture embeddings spliced in at transformers' multimodal RoPE
positions (logits and 16 greedy tokens, one picture and two); the PNGs through AnswerStream, the prompt
cache, the OpenAI layer and the CLI; what the files may not say."""

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from test_vision_mmproj import ARRAY, BOOL, rewrite
from vision_ref import (
    answer,
    chat_answer,
    check_a_second_question,
    copy_folder,
    generate,
    generated,
    image_url_body,
    load,
    one_picture_chat,
    pictures_of,
    streamed,
)

from py_engine import session
from py_engine.engine import Engine
from py_engine.errors import ModelFileError, WispError
from py_engine.gpu.wgpu_host import open_wgpu_device
from py_engine.models.config import config_from_hf
from py_engine.models.qwen3_5_vision import qwen3_5_vision_config, qwen3_5_vision_tensors
from py_engine.runtime.picture_layout import picture_positions
from py_engine.vision.files import read_picture
from py_engine.vision.qwen3_5 import qwen3_5_plan, qwen3_5_settings, smart_resize

FIXTURE, REFERENCE, ARRAYS, CONFIG = load("qwen3_5vl-f32")
GGUF = Path(__file__).parent / "fixtures" / "qwen3_5vl-gguf"  # the same model by llama.cpp's converter
TEXT_GGUF, MMPROJ = GGUF / "qwen3_5vl-tiny-f32.gguf", GGUF / "mmproj-qwen3_5vl-tiny-f32.gguf"
PRE = json.loads((FIXTURE / "preprocessor_config.json").read_text())
IMAGE_TOKEN = REFERENCE["image_token_id"]
TEMPORAL = CONFIG["vision_config"]["temporal_patch_size"]


def pixel_rows(key: str) -> np.ndarray:
    """The processor's pixel values [patches, 3 x temporal x patch^2] of a picture (the fixture keeps one
    frame: the processor repeats a still picture's)."""
    frame = ARRAYS[key]
    return np.repeat(frame[:, :, None], TEMPORAL, axis=2).reshape(frame.shape[0], -1).astype(np.float32)


def tower_inputs(prompt: dict, frames: int = TEMPORAL) -> list[tuple[bytes, tuple[int, int]]]:
    """The prompt's pictures as the tower's rows and grids; frames 1: one frame a row (llama.cpp's mmproj)."""
    keys = prompt["pixel_values"]
    rows = [pixel_rows(k) if frames == TEMPORAL else ARRAYS[k].reshape(len(ARRAYS[k]), -1) for k in keys]
    return [(r.astype(np.float32).tobytes(), (h, w)) for r, (_, h, w) in zip(rows, prompt["image_grid_thw"])]


def merged(prompt: dict) -> list[tuple[int, int]]:
    return [(h // 2, w // 2) for _, h, w in prompt["image_grid_thw"]]


@pytest.fixture(scope="module")
def device():
    return asyncio.run(open_wgpu_device())


@pytest.fixture(scope="module")
def model(device):
    """The fixture as session.load gives it (its engine, its picture side), shared."""
    return asyncio.run(session.load(FIXTURE, device, context=128, precision="exact"))


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_vision_tower_and_merger(model, name):
    prompt = REFERENCE["prompts"][name]
    got = np.array(asyncio.run(model.vision.encoder.encode(tower_inputs(prompt))), np.float32)
    want = ARRAYS[prompt["image_features"]]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def encode_pixels(device, encoder, engine, prompt: dict) -> None:
    """The processor's pixel values through the tower into the engine's image_embeds, a picture a submit,
    and their grids where the engine's multimodal RoPE reads them."""
    row = 0
    for rows, grid in tower_inputs(prompt, encoder.frames):
        device.write_buffer(encoder.patches, 0, rows)
        device.submit(encoder.commands_into(grid, engine.image_embeds, row))
        row += grid[0] * grid[1] // 4
    engine.picture_grids(merged(prompt))


def plain(engine) -> None:
    """The placed positions dropped after place_images (a test's poke: the engine then turns every token by
    its cache position, as a text-only prompt), which transformers' logits with plain position ids must match."""
    engine._pictures.positions = None


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_prompt_with_pictures(device, model, name):
    """Transformers' logits (1e-3) and 16 greedy tokens: the picture rows spliced in, each picture's tokens at
    (t, row, col) positions and the text after it, decode tokens included, from the largest one + 1."""
    prompt = REFERENCE["prompts"][name]
    encode_pixels(device, model.vision.encoder, model.engine, prompt)
    logits, greedy = asyncio.run(answer(model.engine, prompt["input_ids"], IMAGE_TOKEN))
    np.testing.assert_allclose(logits, np.array(prompt["logits"], np.float32), atol=1e-3)
    assert greedy == prompt["greedy"]


def test_plain_positions_give_other_logits(device, model):
    """With plain positions the engine gives transformers' logits for plain position ids, which are 0.47 away
    from the multimodal ones: the test above would fail with a text-only RoPE."""
    prompt = REFERENCE["prompts"]["two_images"]
    encode_pixels(device, model.vision.encoder, model.engine, prompt)
    logits, _ = asyncio.run(answer(model.engine, prompt["input_ids"], IMAGE_TOKEN, plain))
    want, multimodal = (np.array(prompt[k], np.float32) for k in ("plain_logits", "logits"))
    np.testing.assert_allclose(logits, want, atol=1e-3)
    assert np.abs(logits - multimodal).max() > 0.4


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_positions_are_transformers(name):
    prompt = REFERENCE["prompts"][name]
    ids = prompt["input_ids"]
    positions = picture_positions(0, ids, IMAGE_TOKEN, merged(prompt))
    assert [list(axis) for axis in zip(*positions.rows(0, len(ids)))] == prompt["positions"]
    assert positions.delta == prompt["rope_delta"]
    assert positions.rows(len(ids), 2) == [(len(ids) + prompt["rope_delta"] + k,) * 3 for k in range(2)]
    assert picture_positions(0, [1, 2, 3], IMAGE_TOKEN, []) is None  # a text-only prompt: plain positions
    with pytest.raises(WispError, match="more pictures than"):
        picture_positions(0, ids, IMAGE_TOKEN, merged(prompt)[:-1])


def test_prefill_in_small_forwards(device, model):
    """Forwards of 16 rows cut the pictures (Qwen's picture tokens attend causally): each row's position
    is still transformers'."""
    prompt = REFERENCE["prompts"]["two_images"]

    async def run():
        small = await Engine.load(FIXTURE, device, context=96, precision="exact", image_rows=32, max_rows=16)
        encode_pixels(device, model.vision.encoder, small, prompt)
        return await answer(small, prompt["input_ids"], IMAGE_TOKEN)

    logits, greedy = asyncio.run(run())
    np.testing.assert_allclose(logits, np.array(prompt["logits"], np.float32), atol=1e-3)
    assert greedy == prompt["greedy"]


@pytest.mark.parametrize("index", range(3))
def test_pixels_are_the_processors(device, model, index):
    """A PNG's RGBA8 bytes through the GPU's compositing, smart_resize'd BICUBIC resize, rescale, normalize
    and merge-block patch rows, the frame repeated: the processor's pixel values bit for bit."""
    picture = REFERENCE["images"][index]
    rgba = read_picture(FIXTURE / picture["file"])
    text = model.vision.text
    plan = text.plan(rgba.height, rgba.width)
    assert [1, *plan.grid] == picture["grid_thw"]
    asyncio.run(
        text.embed(
            model.vision.encoder, rgba.rgba, rgba.width, rgba.height, text.settings, model.engine.image_embeds, 0, plan
        )
    )
    encoder = model.vision.encoder
    raw = asyncio.run(device.read_buffer(encoder.patches, 0, 4 * plan.patches * encoder.row_values))
    np.testing.assert_array_equal(
        np.frombuffer(raw, np.float32).reshape(plan.patches, -1), pixel_rows(picture["pixel_values"])
    )


def test_prompt_text_is_the_processors(model):
    for prompt in REFERENCE["prompts"].values():
        pictures = pictures_of(FIXTURE, REFERENCE, prompt)
        rendered = model.tok.apply_chat_template(prompt["messages"])
        assert rendered == prompt["text"]
        text, plans = model.vision.expand(rendered, pictures)
        assert text == prompt["prompt"] and [list(p.merged) for p in plans] == [list(g) for g in merged(prompt)]
        assert model.tok.encode(text, add_special_tokens=False) == prompt["input_ids"]


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_pictures_from_their_pngs(model, name):
    """The PNGs through AnswerStream (picture_keys, encode on the GPU with the grids, place_images)."""
    prompt = REFERENCE["prompts"][name]
    model.cache.reset()  # the tests above drive the engine directly
    pictures = pictures_of(FIXTURE, REFERENCE, prompt)
    assert asyncio.run(streamed(model, prompt["input_ids"], 16, pictures)).tokens == prompt["greedy"]


def test_openai_chat_with_image_url_parts(model):
    prompt = REFERENCE["prompts"]["two_images"]
    model.cache.reset()
    ended = asyncio.run(chat_answer(model, image_url_body(FIXTURE, REFERENCE, prompt, "qwen3_5vl")))
    assert ended.ids == prompt["input_ids"] and ended.tokens == prompt["greedy"]


def test_a_second_question_about_the_same_picture_reuses_it(model):
    """The prompt cache goes on past a picture it holds: the later turn's text and answer take the positions
    after the picture's, and the answer is the one computed from scratch."""
    prompt = REFERENCE["prompts"]["one_image"]
    model.cache.reset()
    picture = read_picture(FIXTURE / REFERENCE["images"][prompt["images"][0]]["file"])
    check_a_second_question(model, prompt, picture)


def test_cli_generate_with_a_picture():
    result = generate("--model", str(FIXTURE), *one_picture_chat(REFERENCE, FIXTURE))
    assert generated(result) == REFERENCE["prompts"]["one_image"]["greedy"], result.stderr


GEOMETRY = qwen3_5_vision_config(CONFIG, "config.json")[1]


def test_smart_resize_and_the_towers_bound():
    """The fixture's grids; transformers' smart_resize values; a picture past the tower's patches is
    resized to fit (max pixels lowered), and one too thin for it refused."""
    settings = qwen3_5_settings(PRE, GEOMETRY, "preprocessor_config.json")
    for picture in REFERENCE["images"]:
        assert [1, *qwen3_5_plan(picture["height"], picture["width"], settings, 80).grid] == picture["grid_thw"]
    assert smart_resize(1080, 1920, 32, 65536, 16777216) == (1088, 1920)
    assert smart_resize(20, 30, 28, 3136, 12845056) == (56, 84)
    assert smart_resize(4000, 3000, 32, 65536, 1 << 20) == (1152, 864)
    real = qwen3_5_settings(
        {**PRE, "size": {"shortest_edge": 65536, "longest_edge": 16777216}}, {**GEOMETRY, "max_patches": 4096}, "p"
    )
    assert (real.min_pixels, real.max_pixels) == (65536, 4096 * 256)
    assert qwen3_5_plan(3000, 4000, real, 4096).grid == (54, 72)  # 3,888 patches, not transformers' 46,875
    with pytest.raises(WispError, match="ratio passes 200"):
        qwen3_5_plan(10, 3000, real, 4096)


@pytest.mark.parametrize(
    "change,message",
    [
        ({"patch_size": 14}, "patch_size should be the vision tower's 16"),
        ({"merge_size": 4}, "merge_size should be the vision tower's spatial_merge_size 2"),
        ({"size": {"shortest_edge": 9000, "longest_edge": 4000}}, "shortest_edge"),
        ({"resample": 0}, "resample should be a PIL filter"),
        ({"image_std": [0.5, 0, 0.5]}, "none zero"),
        ({"do_resize": "yes"}, "do_resize should be true or false"),
    ],
)
def test_bad_processor_files_name_the_field(change, message):
    with pytest.raises(ModelFileError, match=message):
        qwen3_5_settings({**PRE, **change}, GEOMETRY, "preprocessor_config.json")


@pytest.mark.parametrize(
    "change,message",
    [
        ({"num_heads": 3}, "num_heads should be a divisor"),
        ({"in_channels": 4}, "in_channels should be 3"),
        ({"hidden_act": "relu"}, "hidden_act should be one of"),
        ({"rope_parameters": {"rope_type": "default"}}, "rope_type should be"),
    ],
)
def test_vision_config_values_are_checked(change, message):
    config = {**CONFIG, "vision_config": {**CONFIG["vision_config"], **change}}
    with pytest.raises(ModelFileError, match=message):
        qwen3_5_vision_config(config, "config.json")


def test_mrope_section_is_read_and_checked():
    assert config_from_hf(CONFIG, "config.json").mrope_section == (3, 3, 2)
    text = {**CONFIG["text_config"], "rope_parameters": {"rope_type": "default", "rope_theta": 1e4}}
    assert config_from_hf({**CONFIG, "text_config": text}, "c").mrope_section == (11, 11, 10)  # transformers' default
    text["rope_parameters"]["mrope_section"] = [3, 3]
    with pytest.raises(ModelFileError, match="mrope_section should be 3 counts"):
        config_from_hf({**CONFIG, "text_config": text}, "config.json")


def copy_fixture(tmp_path) -> Path:
    return copy_folder(FIXTURE, tmp_path / "qwen3_5vl")


def test_picture_token_ids_must_be_the_configs(tmp_path):
    copy = copy_fixture(tmp_path)
    (copy / "config.json").write_text(json.dumps({**CONFIG, "image_token_id": 5}))
    with pytest.raises(ModelFileError, match=r"image_token_id is 5, but the tokenizer's <\|image_pad\|> is 304"):
        session.read_model_files(copy)


def test_a_tensor_of_the_wrong_shape_is_refused_before_a_device(tmp_path):
    copy = copy_fixture(tmp_path)
    vision = {**CONFIG["vision_config"], "num_position_embeddings": 49}
    (copy / "config.json").write_text(json.dumps({**CONFIG, "vision_config": vision}))
    with pytest.raises(ModelFileError, match=r"pos_embed.weight' has shape \[36, 16\], config.json says \[49, 16\]"):
        session.read_model_files(copy)


def test_qwen3_5_27b_tower_plans_within_webgpu_limits():
    """Qwen3.5's tower at its real shapes (1152 wide, 27 blocks, 16 heads, 4304, patch 16, 48 x 48 position
    table, 5120-wide text; bf16, model.visual.* names): it plans with no device, 4096 patches a forward, and
    every tensor fits one 128 MiB binding."""
    from py_engine.formats.safetensors import TensorInfo
    from py_engine.models.graph_options import GraphOptions
    from py_engine.models.qwen3_5_vision import expected_shapes
    from py_engine.runtime.loader import vision_plan

    vision = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "out_hidden_size": 5120}
    cfg, geometry = qwen3_5_vision_config({"vision_config": vision}, "config.json")
    assert (geometry["max_patches"], geometry["tokens"], geometry["side"]) == (4096, 1024, 48)
    shapes = expected_shapes(cfg, geometry)
    shapes["model.visual.patch_embed.proj.weight"] = (1152, 3, 2, 16, 16)  # as stored: Conv3d
    infos = {n: TensorInfo(n, "BF16", s, 0, 2 * int(np.prod(s)), "model.safetensors") for n, s in shapes.items()}
    options = GraphOptions(max_rows=4096, kv_capacity=4096, precision="exact")
    graph, _ = vision_plan(cfg, geometry, qwen3_5_vision_tensors(infos), "Qwen3.5", options)
    assert graph.outputs["image_features"].nbytes == 1024 * 5120 * 4
    assert max(t.nbytes for t in graph.tensors) <= 128 << 20


@pytest.fixture(scope="module")
def gguf_pair(device):
    """tools/make_qwen3_5_vision_gguf.py's text GGUF and mmproj GGUF, loaded as llama.cpp takes them."""
    return asyncio.run(session.load(TEXT_GGUF, device, mmproj=MMPROJ, context=128, precision="exact"))


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_gguf_and_mmproj_answer_as_the_folder(device, gguf_pair, name):
    """llama.cpp's files (the Conv3d split a frame a matrix, qwen35.rope.dimension_sections, the value heads
    tiled): transformers' prompt ids, its tower output, logits within 1e-3 and 16 greedy ids for the
    processor's pixels."""
    model, prompt = gguf_pair, REFERENCE["prompts"][name]
    assert model.tok.apply_chat_template(prompt["messages"]) == prompt["text"]
    assert model.tok.encode(prompt["prompt"], add_special_tokens=False) == prompt["input_ids"]
    encoder = model.vision.encoder
    assert encoder.frames == 1
    got = np.array(asyncio.run(encoder.encode(tower_inputs(prompt, frames=1))), np.float32)
    want = ARRAYS[prompt["image_features"]]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    model.cache.reset()
    encode_pixels(device, encoder, model.engine, prompt)
    logits, greedy = asyncio.run(answer(model.engine, prompt["input_ids"], IMAGE_TOKEN))
    np.testing.assert_allclose(logits, np.array(prompt["logits"], np.float32), atol=1e-3)
    assert greedy == prompt["greedy"]


def test_gguf_pictures_take_llama_cpps_bounds(gguf_pair):
    """The mmproj names no pixel bounds: llama.cpp's for Qwen-VL (8 to 4096 tokens, the tower's 1024 here), so
    the tiny pictures grow more than the folder's processor makes them; from their PNGs they still answer."""
    model, prompt = gguf_pair, REFERENCE["prompts"]["two_images"]
    settings = model.vision.text.settings
    assert (settings.min_pixels, settings.max_pixels) == (8 * 32 * 32, 4096 * 16 * 16)
    pictures = pictures_of(FIXTURE, REFERENCE, prompt)
    text, plans = model.vision.expand(model.tok.apply_chat_template(prompt["messages"]), pictures)
    assert [p.grid for p in plans] == [(8, 6), (4, 12)]
    ids = model.tok.encode(text, add_special_tokens=False)
    model.cache.reset()
    assert len(asyncio.run(streamed(model, ids, 4, pictures)).tokens) == 4


@pytest.mark.parametrize(
    "change,message",
    [
        ({"keys": {"clip.vision.is_deepstack_layers": ([True, False], ARRAY)}}, "deepstack"),
        ({"keys": {"clip.use_gelu": (False, BOOL)}}, "clip.use_gelu is not true"),
        ({"tensors": {"v.patch_embd.weight.1": None}}, "missing tensor 'v.patch_embd.weight.1'"),
        ({"rename": {"mm.2.weight": "mm.1.weight"}}, "missing tensor 'mm.2.weight'"),
        ({"tensors": {"v.position_embd.weight": np.zeros((49, 16), np.float32)}}, "has shape"),
    ],
)
def test_bad_qwen_mmproj_is_refused_before_a_device(tmp_path, change, message):
    bad = rewrite(MMPROJ, tmp_path / "bad.gguf", **change)
    with pytest.raises(ModelFileError, match=message):
        session.read_model_files(TEXT_GGUF, mmproj=bad)
