"""tests/fixtures/smolvlm-f32 (tools/make_vision_fixtures.py: transformers' SmolVLMProcessor and
SmolVLMForConditionalGeneration in float32) against Wisp, without transformers.

py_engine/vision/smolvlm.py, its settings read from the fixture's files: image_plan's grid, image count and
resize sizes are the processor's recorded ones for each test picture, and image_prompt in the chat template's
text (rendered and tokenized by Wisp's tokenizer) is the processor's prompt text and ids. Pillow following
the plan (convert, LANCZOS resizes, crops, rescale, normalize) reproduces the processor's pixel_values. Then
the reference itself: a numpy SigLIP tower, pixel shuffle and projection written from the weights reproduce
its image features, and a numpy Llama fed them in place of the <image> tokens its last logits."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from py_engine.formats.json_file import read_json
from py_engine.formats.safetensors import read_header
from py_engine.tokenizer.hf.tokenizer import Tokenizer
from py_engine.vision.smolvlm import (
    MODEL_FILE,
    PREPROCESSOR_FILE,
    PROCESSOR_FILE,
    TOKENIZER_CONFIG_FILE,
    ImageTokens,
    image_plan,
    image_prompt,
    image_tokens,
    smolvlm_settings,
)

FIXTURE = Path(__file__).parent / "fixtures" / "smolvlm-f32"
REF = json.loads((FIXTURE / "reference.json").read_text())
ARRAYS = np.load(FIXTURE / "reference.npz")
CONFIG = read_json(FIXTURE / MODEL_FILE)
# Each test picture alone with the fixture's settings, then the last picture without splitting.
CASES = [dict(ref, do_image_splitting=True) for ref in REF["images"]]
CASES.append(dict(REF["images"][REF["unsplit"]["image"]], **REF["unsplit"]))
CASE_IDS = [Path(ref["file"]).stem for ref in REF["images"]] + ["unsplit"]


def settings(**changes):
    files = [read_json(FIXTURE / name) for name in (PREPROCESSOR_FILE, PROCESSOR_FILE, MODEL_FILE)]
    return dataclasses.replace(smolvlm_settings(*files), **changes)


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_model_dir(FIXTURE)


def plan_of(case):
    return image_plan(case["height"], case["width"], settings(do_image_splitting=case["do_image_splitting"]))


def test_settings_from_the_fixture_files(tokenizer):
    s = settings()
    assert (s.longest_edge, s.tile, s.image_seq_len, s.resample) == (64, 32, 4, "lanczos")
    assert s.do_resize and s.do_image_splitting and s.do_convert_rgb and s.do_rescale and s.do_normalize
    assert s.image_mean == s.image_std == (0.5, 0.5, 0.5) and s.rescale_factor == pytest.approx(1 / 255)
    assert s.image_seq_len == REF["image_seq_len"]
    tokens = image_tokens(read_json(FIXTURE / TOKENIZER_CONFIG_FILE))
    assert tokens == ImageTokens("<fake_token_around_image>", "<image>", "<global-img>")
    image_id = tokenizer.token_to_id(tokens.image)
    assert image_id == REF["image_token_id"] == CONFIG["image_token_id"]
    assert tokenizer.vocab_size == REF["vocab_size"] == CONFIG["text_config"]["vocab_size"]


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_plan_is_the_processors(case):
    plan = plan_of(case)
    tile = plan.tile
    assert (plan.rows, plan.cols, plan.num_images) == (case["rows"], case["cols"], case["num_images"])
    assert list(plan.pixel_values_shape) == case["pixel_values_shape"]
    assert ARRAYS[case["pixel_values"]].shape == plan.pixel_values_shape
    mask = ARRAYS[case["pixel_attention_mask"]]
    assert mask.shape == (1, plan.num_images, tile, tile) and mask.all()
    # Every resize the processor ran, (height, width) in and out; one to the same size is a copy.
    steps = [(plan.original, plan.resized)]
    if plan.encoder is None:
        steps.append((plan.resized, (tile, tile)))
    else:
        steps.append((plan.resized, plan.encoder))
        if plan.split:
            steps.append((plan.encoder, (tile, tile)))
    assert [tuple(map(tuple, step)) for step in case["resizes"]] == steps


def one_image_messages():
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": REF["one_image_text"]}]}]


def expand(text, plans):
    """The chat template's text with each <image> placeholder replaced by image_prompt, in order."""
    tokens = image_tokens(read_json(FIXTURE / TOKENIZER_CONFIG_FILE))
    pieces = text.split(tokens.image)
    assert len(pieces) == len(plans) + 1
    out = pieces[0]
    for plan, piece in zip(plans, pieces[1:]):
        out += image_prompt(plan, settings(do_image_splitting=plan.encoder is not None), tokens) + piece
    return out


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_prompt_is_the_processors(case, tokenizer):
    text = tokenizer.apply_chat_template(one_image_messages(), add_generation_prompt=True)
    assert text == case["text"]
    plan = plan_of(case)
    prompt = expand(text, [plan])
    assert prompt == case["prompt"]
    ids = tokenizer.encode(prompt)
    assert ids == case["input_ids"]
    assert ids.count(REF["image_token_id"]) == plan.num_image_tokens


@pytest.mark.parametrize("name", list(REF["prompts"]))
def test_model_prompts(name, tokenizer):
    ref = REF["prompts"][name]
    cases = [CASES[i] for i in ref["images"]]
    assert tokenizer.apply_chat_template(ref["messages"], add_generation_prompt=True) == ref["text"]
    plans = [plan_of(case) for case in cases]
    assert expand(ref["text"], plans) == ref["prompt"]
    assert tokenizer.encode(ref["prompt"]) == ref["input_ids"]
    images = sum(plan.num_images for plan in plans)
    tokens = ref["input_ids"].count(REF["image_token_id"])
    assert tokens == images * REF["image_seq_len"]
    assert ref["pixel_values"] == [case["pixel_values"] for case in cases]
    assert ref["pixel_values_shape"] == [1, images, 3, 32, 32]
    assert ref["vision_hidden_shape"] == [images, 16, 32] and ref["image_features_shape"] == [tokens, 64]
    assert len(ref["logits"]) == REF["vocab_size"] and len(ref["greedy"]) == 16


def pillow_pixel_values(path, plan, s):
    """The processor's pixels, by Pillow along the plan: RGB (transparency composited onto white), each
    resize with the one filter on the 8-bit result of the one before, tiles cropped row-major then the
    global view, x * (1/255) in float64 rounded to float32, then (x - mean) / std in float32."""
    picture = Image.open(path)
    if "A" in picture.getbands() or picture.info.get("transparency") is not None:
        white = Image.new("RGBA", picture.size, (255, 255, 255, 255))
        picture = Image.alpha_composite(white, picture.convert("RGBA"))
    picture = picture.convert("RGB")
    lanczos = Image.Resampling.LANCZOS

    def resize(image, size):
        return image.resize((size[1], size[0]), lanczos)  # Pillow's sizes are (width, height)

    resized = resize(picture, plan.resized)
    if plan.encoder is None:
        views = [resize(resized, (plan.tile, plan.tile))]
    else:
        encoder = resize(resized, plan.encoder)
        views = [encoder.crop((left, top, right, bottom)) for top, left, bottom, right in plan.tiles]
        views.append(resize(encoder, (plan.tile, plan.tile)) if plan.split else encoder)
    pixels = np.stack([np.asarray(view).transpose(2, 0, 1) for view in views])[None]
    x = (pixels.astype(np.float64) * s.rescale_factor).astype(np.float32)
    mean = np.array(s.image_mean, np.float32)[:, None, None]
    std = np.array(s.image_std, np.float32)[:, None, None]
    return (x - mean) / std


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_pillow_reproduces_pixel_values(case):
    plan = plan_of(case)
    got = pillow_pixel_values(FIXTURE / case["file"], plan, settings())
    want = ARRAYS[case["pixel_values"]]
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    # One 8-bit level (1/255 before normalize; std 0.5 doubles it) would be a rounding difference between
    # Pillow versions; with the generating Pillow they are the same bits.
    assert np.abs(got - want).max() <= 2 / 255 + 1e-6


# ---- the reference, recomputed in numpy from config.json and model.safetensors ----


@pytest.fixture(scope="module")
def weights():
    path = FIXTURE / "model.safetensors"
    out = {}
    for name, info in read_header(path).items():
        assert info.dtype == "F32"
        out[name] = np.fromfile(path, np.float32, info.nbytes // 4, offset=info.start).reshape(info.shape)
    return {name: w.astype(np.float64) for name, w in out.items()}


def layer_norm(x, w, b, eps):
    x = x - x.mean(-1, keepdims=True)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def vision_tower(w, pixel_values):
    """SigLIP: patch conv as a matmul over (channel, row, column)-flattened patches, learned position
    embeddings at positions 0..15 (all patches real), pre-norm bidirectional layers, post layernorm."""
    vc = CONFIG["vision_config"]
    p, d, heads, eps = vc["patch_size"], vc["hidden_size"], vc["num_attention_heads"], vc["layer_norm_eps"]
    n, _, size, _ = pixel_values.shape
    side = size // p
    patches = pixel_values.reshape(n, 3, side, p, side, p).transpose(0, 2, 4, 1, 3, 5).reshape(n, side * side, -1)
    pre = "model.vision_model."
    x = patches @ w[pre + "embeddings.patch_embedding.weight"].reshape(d, -1).T
    x = x + w[pre + "embeddings.patch_embedding.bias"] + w[pre + "embeddings.position_embedding.weight"]
    for i in range(vc["num_hidden_layers"]):
        L = f"{pre}encoder.layers.{i}."  # noqa: N806

        def lin(name, v):
            return v @ w[L + name + ".weight"].T + w[L + name + ".bias"]  # noqa: B023

        h = layer_norm(x, w[L + "layer_norm1.weight"], w[L + "layer_norm1.bias"], eps)
        q, k, v = (lin(f"self_attn.{t}_proj", h).reshape(n, -1, heads, d // heads).transpose(0, 2, 1, 3) for t in "qkv")
        att = softmax(q @ k.transpose(0, 1, 3, 2) * (d // heads) ** -0.5) @ v
        x = x + lin("self_attn.out_proj", att.transpose(0, 2, 1, 3).reshape(n, -1, d))
        h = layer_norm(x, w[L + "layer_norm2.weight"], w[L + "layer_norm2.bias"], eps)
        x = x + lin("mlp.fc2", gelu_tanh(lin("mlp.fc1", h)))
    return layer_norm(x, w[pre + "post_layernorm.weight"], w[pre + "post_layernorm.bias"], eps)


def connector(w, hidden):
    """Pixel shuffle: output token (I, J) of the (side/s)^2 grid, row-major, is the s x s block of patches
    (I*s + m, J*s + k) concatenated in row-major (m, k) order; then the projection (no bias)."""
    s = CONFIG["scale_factor"]
    n, seq, d = hidden.shape
    side = int(seq**0.5)
    x = hidden.reshape(n, side // s, s, side // s, s, d).transpose(0, 1, 3, 2, 4, 5).reshape(n, -1, s * s * d)
    return x @ w["model.connector.modality_projection.proj.weight"].T


def text_model(w, embeds):
    """Llama: RMSNorm, rotate-half RoPE at positions 0..n-1 (image tokens count as ordinary positions),
    GQA causal attention, SiLU MLP, final norm, untied lm_head."""
    tc = CONFIG["text_config"]
    heads, kv, hd, eps = tc["num_attention_heads"], tc["num_key_value_heads"], tc["head_dim"], tc["rms_norm_eps"]
    n = embeds.shape[0]
    inv = 1 / tc["rope_parameters"]["rope_theta"] ** (np.arange(0, hd, 2) / hd)
    angles = np.arange(n)[:, None] * np.concatenate([inv, inv])[None]
    cos, sin = np.cos(angles)[:, None], np.sin(angles)[:, None]

    def rope(t):
        return t * cos + np.concatenate([-t[..., hd // 2 :], t[..., : hd // 2]], -1) * sin

    def rms(x, name):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w[name]

    mask = np.triu(np.full((n, n), -np.inf), 1)
    x = embeds
    for i in range(tc["num_hidden_layers"]):
        L = f"model.text_model.layers.{i}."  # noqa: N806
        h = rms(x, L + "input_layernorm.weight")
        q = rope((h @ w[L + "self_attn.q_proj.weight"].T).reshape(n, heads, hd))
        k = rope((h @ w[L + "self_attn.k_proj.weight"].T).reshape(n, kv, hd))
        v = (h @ w[L + "self_attn.v_proj.weight"].T).reshape(n, kv, hd)
        k, v = np.repeat(k, heads // kv, 1), np.repeat(v, heads // kv, 1)
        att = softmax(np.einsum("qhd,khd->hqk", q, k) * hd**-0.5 + mask)
        x = x + np.einsum("hqk,khd->qhd", att, v).reshape(n, -1) @ w[L + "self_attn.o_proj.weight"].T
        h = rms(x, L + "post_attention_layernorm.weight")
        gate, up = h @ w[L + "mlp.gate_proj.weight"].T, h @ w[L + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[L + "mlp.down_proj.weight"].T
    return rms(x, "model.text_model.norm.weight") @ w["lm_head.weight"].T


@pytest.mark.parametrize("name", list(REF["prompts"]))
def test_numpy_forward_reproduces_the_reference(name, weights):
    ref = REF["prompts"][name]
    pixel_values = np.concatenate([ARRAYS[key] for key in ref["pixel_values"]], axis=1)[0].astype(np.float64)
    hidden = vision_tower(weights, pixel_values)
    np.testing.assert_allclose(hidden, ARRAYS[ref["vision_hidden"]], atol=2e-5)
    features = connector(weights, hidden).reshape(-1, CONFIG["text_config"]["hidden_size"])
    np.testing.assert_allclose(features, ARRAYS[ref["image_features"]], atol=2e-5)
    ids = np.array(ref["input_ids"])
    embeds = weights["model.text_model.embed_tokens.weight"][ids]
    embeds[ids == REF["image_token_id"]] = features  # in order: tiles row-major, global view, next picture
    logits = text_model(weights, embeds)[-1]
    np.testing.assert_allclose(logits, ref["logits"], atol=1e-4)
    assert int(np.argmax(logits)) == ref["greedy"][0]
