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
from PIL import Image
from test_vision_mmproj import U32, rewrite
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
    patch_rows,
    pictures_of,
    streamed,
)

from py_engine import session
from py_engine.decode.answer_stream import place_pictures
from py_engine.engine import Engine
from py_engine.errors import ModelFileError, WispError
from py_engine.gpu.wgpu_host import open_wgpu_device
from py_engine.models.gemma3_vision import gemma3_vision_config, gemma3_vision_tensors
from py_engine.runtime.picture_spans import prefill_chunks
from py_engine.vision.encoder import load_vision_encoder
from py_engine.vision.files import read_picture
from py_engine.vision.gemma3 import gemma3_plan, gemma3_settings
from py_engine.vision.pictures import picture_embeddings

FIXTURE, REFERENCE, ARRAYS, CONFIG = load("gemma3vl-f32")
GGUF = Path(__file__).parent / "fixtures" / "gemma3vl-gguf"  # the same model by llama.cpp's converter
IMAGE_TOKEN = REFERENCE["image_token_id"]
PATCH = CONFIG["vision_config"]["patch_size"]


def pixel_tiles(prompt: dict) -> list[np.ndarray]:
    return [ARRAYS[name][0].astype(np.float32) for name in prompt["pixel_values"]]


@pytest.fixture(scope="module")
def device():
    return asyncio.run(open_wgpu_device())


@pytest.fixture(scope="module")
def model(device):
    """The fixture as session.load gives it (its engine with picture_spans, its picture side), shared."""
    return asyncio.run(session.load(FIXTURE, device, context=128, precision="exact"))


@pytest.fixture(scope="module")
def encoder(model):
    return model.vision.encoder


@pytest.fixture(scope="module")
def engine(model):
    return model.engine


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_vision_tower_and_projector(encoder, name):
    prompt = REFERENCE["prompts"][name]
    got = np.array(asyncio.run(encoder.encode([patch_rows(t, PATCH) for t in pixel_tiles(prompt)])), np.float32)
    want = ARRAYS[prompt["image_features"]].reshape(got.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_fast_tower_stays_near_exact(device):
    """precision "fast" (what session.load gives the tower by default): its attention (36 patch rows:
    encoder_attention_tiled.wgsl) in f16 where the device has shader-f16; features within 1 % of
    transformers' largest, where exact keeps 1e-4."""
    fast = asyncio.run(load_vision_encoder(FIXTURE, device, precision="fast"))
    tiled = [op for op in fast.executor.graph.ops if op.kernel == "encoder_attention"]
    assert tiled and tiled[0].many_rows[0] < fast.rows
    assert tiled[0].defines["F16_MATH"] == device.caps.shader_f16
    prompt = REFERENCE["prompts"]["one_image"]
    got = np.array(asyncio.run(fast.encode([patch_rows(t, PATCH) for t in pixel_tiles(prompt)])), np.float32)
    want = ARRAYS[prompt["image_features"]].reshape(got.shape)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-2 * np.abs(want).max())


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


def causal(engine) -> None:
    """Every picture end zeroed after place_images, so that the picture tokens attend causally (as
    transformers without token_type_ids). The tests drive the engine directly: a session's prompt cache then
    holds nothing (fresh_cache)."""
    engine.device.write_buffer(engine.executor.buffer("picture_ends"), 0, bytes(4 * engine.context))


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_prompt_with_pictures(device, encoder, engine, name):
    """Transformers' logits (1e-3) and 16 greedy tokens: the picture rows spliced in after Gemma's
    sqrt(hidden) embedding scale, unscaled, and each picture's tokens attending to all of it."""
    prompt = REFERENCE["prompts"][name]
    encode_pixels(device, encoder, engine, prompt)
    logits, greedy = asyncio.run(answer(engine, prompt["input_ids"], IMAGE_TOKEN))
    np.testing.assert_allclose(logits, np.array(prompt["logits"], np.float32), atol=1e-3)
    assert greedy == prompt["greedy"]


def test_the_picture_mask_matters(device, encoder, engine):
    """A causal mask over the picture tokens gives transformers' causal logits (without token_type_ids),
    which are 0.66 away from the bidirectional ones: the test above would fail with a causal mask."""
    prompt = REFERENCE["prompts"]["two_images"]
    encode_pixels(device, encoder, engine, prompt)
    logits, greedy = asyncio.run(answer(engine, prompt["input_ids"], IMAGE_TOKEN, causal))
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
        return await answer(small, ids, IMAGE_TOKEN)

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


def fixture_settings(model):
    files = [json.loads((FIXTURE / f).read_text()) for f in ("preprocessor_config.json", "processor_config.json")]
    geometry = gemma3_vision_config(CONFIG, "config.json")[1]
    return gemma3_settings(*files, geometry, ("preprocessor_config.json", "processor_config.json"))


def test_settings_from_the_fixture_files(model):
    settings = fixture_settings(model)
    assert (settings.size, settings.image_seq_len, settings.resample, settings.do_convert_rgb) == (
        84,
        9,
        "bilinear",
        True,
    )
    assert model.vision.text.settings == settings and model.vision.image_token_id == IMAGE_TOKEN


@pytest.mark.parametrize("index", range(3))
def test_pixels_are_the_processors(device, model, encoder, index):
    """A PNG's RGBA8 bytes through the GPU's compositing, BILINEAR resize to 84 x 84, rescale and
    normalize: the processor's pixel values bit for bit (the patch rows the tower reads)."""
    picture = REFERENCE["images"][index]
    rgba = Image.open(FIXTURE / picture["file"]).convert("RGBA")
    settings = fixture_settings(model)
    plan = gemma3_plan(rgba.height, rgba.width, settings)
    asyncio.run(
        picture_embeddings(
            encoder, rgba.tobytes(), rgba.width, rgba.height, settings, model.engine.image_embeds, 0, plan
        )
    )
    raw = asyncio.run(device.read_buffer(encoder.patches, 0, 4 * encoder.rows * encoder.row_values))
    got = np.frombuffer(raw, np.float32).reshape(encoder.rows, encoder.row_values)
    want = np.frombuffer(patch_rows(ARRAYS[picture["pixel_values"]][0], PATCH), np.float32).reshape(got.shape)
    np.testing.assert_array_equal(got, want)


def test_prompt_text_is_the_processors(model):
    for prompt in REFERENCE["prompts"].values():
        pictures = pictures_of(FIXTURE, REFERENCE, prompt)
        rendered = model.tok.apply_chat_template(prompt["messages"])
        assert rendered == prompt["text"]
        text, plans = model.vision.expand(rendered, pictures)
        assert text == prompt["prompt"] and [p.num_image_tokens for p in plans] == [9] * len(pictures)
        assert model.tok.encode(text, add_special_tokens=False) == prompt["input_ids"]


def fresh_cache(model):
    model.cache.reset()  # the tests above drive the engine directly


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_pictures_from_their_pngs(model, name):
    """The PNGs through AnswerStream (picture_keys, encode on the GPU, place_images): transformers' tokens."""
    prompt = REFERENCE["prompts"][name]
    fresh_cache(model)
    pictures = pictures_of(FIXTURE, REFERENCE, prompt)
    assert asyncio.run(streamed(model, prompt["input_ids"], 16, pictures)).tokens == prompt["greedy"]


def test_openai_chat_with_image_url_parts(model):
    """image_url parts (data: URLs) in a user's message through the OpenAI layer: transformers' prompt ids
    and tokens."""
    prompt = REFERENCE["prompts"]["two_images"]
    fresh_cache(model)
    ended = asyncio.run(chat_answer(model, image_url_body(FIXTURE, REFERENCE, prompt, "gemma3vl")))
    assert ended.ids == prompt["input_ids"] and ended.tokens == prompt["greedy"]


def test_a_second_question_about_the_same_picture_reuses_it(model):
    """The prompt cache goes on past a picture it holds (its tokens, computed with the picture mask), and
    the answer is the one computed from scratch."""
    prompt = REFERENCE["prompts"]["one_image"]
    fresh_cache(model)
    check_a_second_question(model, prompt, read_picture(FIXTURE / REFERENCE["images"][0]["file"]))


def test_cli_generate_with_a_picture():
    result = generate("--model", str(FIXTURE), *one_picture_chat(REFERENCE, FIXTURE))
    assert generated(result) == REFERENCE["prompts"]["one_image"]["greedy"], result.stderr


PRE = json.loads((FIXTURE / "preprocessor_config.json").read_text())
PROC = json.loads((FIXTURE / "processor_config.json").read_text())


@pytest.mark.parametrize(
    "pre,proc,message",
    [
        ({"size": {"height": 96, "width": 96}}, {}, "size is 96 x 96"),
        ({"do_pan_and_scan": True}, {}, "pan-and-scan"),
        ({"resample": 0}, {}, "resample should be a PIL filter Wisp resizes with"),
        ({}, {"image_seq_length": 16}, "image_seq_length is 16"),
        ({"image_std": [0.5, 0, 0.5]}, {}, "none zero"),
        ({"do_normalize": "yes"}, {}, "do_normalize should be true, false or null"),
        ({"image_mean": None}, {}, "image_mean should be given where do_normalize is true"),
    ],
)
def test_bad_processor_files_name_the_field(pre, proc, message):
    geometry = gemma3_vision_config(CONFIG, "config.json")[1]
    with pytest.raises(ModelFileError, match=message):
        gemma3_settings({**PRE, **pre}, {**PROC, **proc}, geometry, ("preprocessor_config.json", "p.json"))


def test_null_flags_read_as_transformers_reads_them():
    """The processor's default for do_convert_rgb (true); the image processor's None, false, for the others."""
    geometry = gemma3_vision_config(CONFIG, "config.json")[1]
    nulls = {"do_convert_rgb": None, "do_normalize": None, "image_mean": None, "resample": None}
    settings = gemma3_settings({**PRE, **nulls}, PROC, geometry, ("preprocessor_config.json", "p.json"))
    assert (settings.do_convert_rgb, settings.do_normalize, settings.resample) == (True, False, "bilinear")


def test_picture_token_ids_must_be_the_configs(tmp_path):
    copy = copy_folder(FIXTURE, tmp_path / "gemma3vl")
    (copy / "config.json").write_text(json.dumps({**CONFIG, "image_token_index": 5}))
    with pytest.raises(ModelFileError, match="image_token_index is 5, but the tokenizer's <image_soft_token> is 334"):
        session.read_model_files(copy)


@pytest.fixture(scope="module")
def gguf_pair(device):
    """tools/make_gemma3_vision_gguf.py's text GGUF and mmproj GGUF, loaded as llama.cpp takes them."""
    text, mmproj = GGUF / "gemma3vl-tiny-f32.gguf", GGUF / "mmproj-gemma3vl-tiny-f32.gguf"
    return asyncio.run(session.load(text, device, mmproj=mmproj, context=128, precision="exact"))


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_gguf_and_mmproj_answer_as_the_folder(gguf_pair, name):
    """llama.cpp's files (the projection kept f16 by its converter, the soft norm's 1 added): transformers'
    prompt ids, its tower output within the f16 projection's rounding, logits within 1e-3, 16 greedy ids."""
    model, prompt = gguf_pair, REFERENCE["prompts"][name]
    pictures = pictures_of(FIXTURE, REFERENCE, prompt)
    text, _ = model.vision.expand(model.tok.apply_chat_template(prompt["messages"]), pictures)
    ids = model.tok.encode(text, add_special_tokens=False)
    assert ids == prompt["input_ids"]
    encoder = model.vision.encoder
    got = np.array(asyncio.run(encoder.encode([patch_rows(t, PATCH) for t in pixel_tiles(prompt)])), np.float32)
    want = ARRAYS[prompt["image_features"]].reshape(got.shape)
    np.testing.assert_allclose(got, want, atol=2e-3 * np.abs(want).max())

    async def run():
        model.cache.reset()
        await place_pictures(model, ids, pictures)
        logits = np.array(await model.engine.prompt_logits(ids), np.float32)
        model.cache.reset()
        return logits, (await streamed(model, ids, 16, pictures)).tokens

    logits, greedy = asyncio.run(run())
    np.testing.assert_allclose(logits, np.array(prompt["logits"], np.float32), atol=1e-3)
    assert greedy == prompt["greedy"]


@pytest.mark.parametrize(
    "change,message",
    [
        ({"keys": {"clip.vision.projector.scale_factor": (3, U32)}}, "4 tokens a picture, Wisp needs more than 8"),
        ({"tensors": {"mm.soft_emb_norm.weight": None}}, "missing tensor 'mm.soft_emb_norm.weight'"),
        ({"rename": {"mm.input_projection.weight": "mm.model.fc.weight"}}, "missing tensor 'mm.input_projection"),
    ],
)
def test_bad_gemma3_mmproj_is_refused_before_a_device(tmp_path, change, message):
    bad = rewrite(GGUF / "mmproj-gemma3vl-tiny-f32.gguf", tmp_path / "bad.gguf", **change)
    with pytest.raises(ModelFileError, match=message):
        session.read_model_files(GGUF / "gemma3vl-tiny-f32.gguf", mmproj=bad)


def test_gemma3_4b_tower_plans_within_webgpu_limits():
    """google/gemma-3-4b-it's tower at its real shapes (SigLIP 1152 wide, 27 layers, 896 px / patch 14: 4096
    patches a forward; 256 tokens; bf16): it plans with no device and every tensor fits one 128 MiB binding."""
    from py_engine.formats.safetensors import TensorInfo
    from py_engine.models.graph_options import GraphOptions
    from py_engine.runtime.loader import vision_plan

    config = {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "mm_tokens_per_image": 256,
        "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304}
        | {"num_attention_heads": 16, "num_hidden_layers": 27, "patch_size": 14, "vision_use_head": False},
    }
    cfg, geometry = gemma3_vision_config(config, "config.json")
    assert (geometry["tokens"], geometry["pool"]) == (256, 4)
    ff = "mlp."
    shapes = {
        "embeddings.patch_embedding.weight": (1152, 3, 14, 14),
        "embeddings.patch_embedding.bias": (1152,),
        "embeddings.position_embedding.weight": (4096, 1152),
        "post_layernorm.weight": (1152,),
        "post_layernorm.bias": (1152,),
    }
    for i in range(27):
        layer = f"encoder.layers.{i}."
        for part, shape in [(f"self_attn.{n}_proj", (1152, 1152)) for n in ("q", "k", "v", "out")] + [
            (ff + "fc1", (4304, 1152)),
            (ff + "fc2", (1152, 4304)),
            ("layer_norm1", (1152,)),
            ("layer_norm2", (1152,)),
        ]:
            shapes[layer + part + ".weight"] = shape
            shapes[layer + part + ".bias"] = shape[:1]
    v = {"vision_tower.vision_model." + name: shape for name, shape in shapes.items()}  # the hub's names
    v["multi_modal_projector.mm_input_projection_weight"] = (1152, 2560)
    v["multi_modal_projector.mm_soft_emb_norm.weight"] = (1152,)
    infos = {n: TensorInfo(n, "BF16", s, 0, 2 * int(np.prod(s)), "model.safetensors") for n, s in v.items()}
    options = GraphOptions(max_rows=4096, kv_capacity=4096, precision="exact")
    graph, _ = vision_plan(cfg, geometry, gemma3_vision_tensors(infos), "gemma-3-4b-it", options)
    assert graph.outputs["image_features"].nbytes == 256 * 2560 * 4
    assert max(t.nbytes for t in graph.tensors) <= 128 << 20
