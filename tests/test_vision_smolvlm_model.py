"""SmolVLM on the GPU against transformers (tests/fixtures/smolvlm-f32, tools/make_vision_fixtures.py):
the vision tower and connector on the processor's pixel values, the text tower with the picture
tokens spliced in (logits and 16 greedy tokens, one picture and two), and a picture from its PNG
through the GPU's resize, patches and tower."""

import asyncio
import base64
import json
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image
from vision_ref import answer, generate, generated, image_url_body, load, patch_rows

from py_engine import session
from py_engine.api import completions
from py_engine.api.completions import chat_chunks, collect
from py_engine.api.request import RequestError, parse_chat
from py_engine.decode.answer_stream import AnswerStream
from py_engine.decode.token_choice import SamplingParams
from py_engine.engine import Engine
from py_engine.errors import WispError
from py_engine.formats.source import open_source
from py_engine.gpu.wgpu_host import open_wgpu_device
from py_engine.runtime.memory import ModelTooLargeError
from py_engine.vision.encoder import load_vision_encoder
from py_engine.vision.files import read_picture
from py_engine.vision.pictures import picture_embeddings
from py_engine.vision.smolvlm import smolvlm_settings

FIXTURE, REFERENCE, ARRAYS, _ = load("smolvlm-f32")
IMAGE_TOKEN = REFERENCE["image_token_id"]


def pixel_tiles(prompt: dict) -> list[np.ndarray]:
    return [tile for name in prompt["pixel_values"] for tile in ARRAYS[name][0].astype(np.float32)]


@pytest.fixture(scope="module")
def loaded():
    async def load():
        device = await open_wgpu_device()
        encoder = await load_vision_encoder(FIXTURE, device)
        engine = await Engine.load(FIXTURE, device, context=96, precision="exact", image_rows=32)
        return device, encoder, engine

    return asyncio.run(load())


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_vision_tower_and_connector(loaded, name):
    _, encoder, _ = loaded
    prompt = REFERENCE["prompts"][name]
    patch = encoder.geometry["patch_size"]
    got = np.array(asyncio.run(encoder.encode([patch_rows(t, patch) for t in pixel_tiles(prompt)])), np.float32)
    want = ARRAYS[prompt["image_features"]]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_prompt_with_pictures(loaded, name):
    """The processor's pixel values through the tower into image_embeds, then the prompt."""
    device, encoder, engine = loaded
    prompt = REFERENCE["prompts"][name]
    patch = encoder.geometry["patch_size"]
    for k, tile in enumerate(pixel_tiles(prompt)):
        device.write_buffer(encoder.patches, 0, patch_rows(tile, patch))
        device.submit(encoder.commands_into(engine.image_embeds, k * encoder.tokens))
    logits, greedy = asyncio.run(answer(engine, prompt["input_ids"], IMAGE_TOKEN))
    want = np.array(prompt["logits"], np.float32)
    np.testing.assert_allclose(logits, want, atol=1e-3)
    assert greedy == prompt["greedy"]


@pytest.mark.parametrize("name", ["one_image", "two_images"])
def test_pictures_from_their_pngs(loaded, name):
    """The pictures' bytes (one RGB; an RGBA one and an RGB one) through the GPU's compositing,
    resizes, patches and tower: transformers' answer."""
    _, encoder, engine = loaded
    prompt = REFERENCE["prompts"][name]
    files = [
        json.loads((FIXTURE / f).read_text())
        for f in ("preprocessor_config.json", "processor_config.json", "config.json")
    ]
    settings = smolvlm_settings(*files)

    async def run():
        row = 0
        for index in prompt["images"]:
            rgba = Image.open(FIXTURE / REFERENCE["images"][index]["file"]).convert("RGBA")
            plan = await picture_embeddings(
                encoder, rgba.tobytes(), rgba.width, rgba.height, settings, engine.image_embeds, row
            )
            row += plan.num_image_tokens
        assert row == prompt["input_ids"].count(IMAGE_TOKEN)
        return await answer(engine, prompt["input_ids"], IMAGE_TOKEN)

    logits, greedy = asyncio.run(run())
    np.testing.assert_allclose(logits, np.array(prompt["logits"], np.float32), atol=1e-3)
    assert greedy == prompt["greedy"]


def test_cli_generate_with_pictures():
    """`generate --image`: with --chat the picture goes before the text (the one-picture prompt);
    without, at the prompt's <image> placeholders (the two-picture prompt's rendered text)."""
    one, two = REFERENCE["prompts"]["one_image"], REFERENCE["prompts"]["two_images"]
    files = [str(FIXTURE / REFERENCE["images"][i]["file"]) for i in (*one["images"], *two["images"])]
    text = one["messages"][0]["content"][1]["text"]
    chat = generate("--model", str(FIXTURE), "--chat", "--image", files[0], "--prompt", text)
    assert generated(chat) == one["greedy"], chat.stderr
    raw = generate("--model", str(FIXTURE), "--image", files[1], "--image", files[2], "--prompt", two["text"])
    assert generated(raw) == two["greedy"], raw.stderr


def test_terminal_chat_with_a_picture():
    """`chat`'s /image attaches a picture to the next message: transformers' greedy answer to the
    one-picture prompt; a second turn keeps the picture in its prompt and computes only its new
    tokens (the picture's come from the prompt cache); a bad file is one error line."""
    from py_engine.tokenizer import Tokenizer

    one = REFERENCE["prompts"]["one_image"]
    picture = FIXTURE / REFERENCE["images"][one["images"][0]]["file"]
    text = one["messages"][0]["content"][1]["text"]
    stdin = f"/image {FIXTURE / 'missing.png'}\n/image {picture}\n{text}\nand this?\n"
    args = ("--model", FIXTURE, "--max-new-tokens", 16, "--temperature", 0, "--repetition-penalty", 1.0)
    result = subprocess.run(
        [sys.executable, "-m", "py_engine", "chat", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "missing.png" in errors[0], result.stderr
    tok = Tokenizer.from_model_dir(FIXTURE)
    assert result.stdout.splitlines()[0] == tok.decode(one["greedy"], skip_special_tokens=True)
    prefilled = [int(line.split("prefill ")[1].split()[0]) for line in result.stderr.splitlines() if "prefill" in line]
    assert len(prefilled) == 2 and prefilled[1] < one["input_ids"].count(IMAGE_TOKEN), result.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (("--prompt", "<image> and <image>"), "placeholder"),  # two placeholders, one picture
        (("--prompt", "no placeholder"), "placeholder"),
    ],
)
def test_cli_picture_count_must_match(args, message):
    result = generate("--model", str(FIXTURE), "--image", str(FIXTURE / "images" / "rgb_20x41.png"), *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_bad_picture_files(tmp_path):
    """Not a picture, cut short, animated: one clear error naming the file."""
    png = (FIXTURE / "images" / "rgb_20x41.png").read_bytes()
    (tmp_path / "text.png").write_text("not a picture")
    (tmp_path / "short.png").write_bytes(png[: len(png) // 2])
    frames = [Image.new("RGB", (4, 4), c) for c in ("red", "blue")]
    frames[0].save(tmp_path / "moves.gif", save_all=True, append_images=frames[1:])
    for name, words in (("text.png", "not a picture"), ("short.png", "not a picture"), ("moves.gif", "animated")):
        with pytest.raises(WispError, match=words) as caught:
            read_picture(tmp_path / name)
        assert name in str(caught.value)


def test_openai_chat_with_image_url_parts():
    """The OpenAI layer: image_url parts (data: URLs) in the user's message, transformers' tokens."""
    prompt = REFERENCE["prompts"]["two_images"]
    body = image_url_body(FIXTURE, REFERENCE, prompt, "smolvlm", detail="auto")
    ended = []

    async def run():
        device = await open_wgpu_device()
        model = await session.load(FIXTURE, device, context=128, precision="exact")
        await collect(chat_chunks(model, parse_chat(body), ended=lambda answer, dropped: ended.append(answer)))

    asyncio.run(run())
    assert ended[0].ids == prompt["input_ids"]
    assert ended[0].tokens == prompt["greedy"]


def test_openai_refuses_pictures_it_cannot_read():
    body = {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}
    request = parse_chat(body)
    with pytest.raises(RequestError, match="text-only"):
        completions._pictures(SimpleNamespace(vision=None), request)
    with pytest.raises(RequestError, match="data: URLs"):
        completions._pictures(SimpleNamespace(vision=object()), request)
    bad = {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    with pytest.raises(RequestError, match="only text parts"):
        parse_chat({"model": "m", "messages": [bad]})
    with pytest.raises(RequestError, match="not a picture"):
        request.pictures = ["data:image/png;base64," + base64.b64encode(b"nope").decode()]
        completions._pictures(SimpleNamespace(vision=object()), request)


def test_the_budget_counts_the_vision_tower():
    """gpu_budget: the tower's bytes come off the text engine's share; a budget the tower alone
    passes is refused before any upload."""
    tower = session.vision_footprint(open_source(FIXTURE), 1 << 40)
    assert tower > 0

    async def run(budget):
        device = await open_wgpu_device()
        return await session.load(FIXTURE, device, context=64, gpu_budget=budget, precision="exact")

    with pytest.raises(ModelTooLargeError, match="vision tower alone"):
        asyncio.run(run(tower))
    model = asyncio.run(run(tower + 64 * 1024 * 1024))
    assert model.vision is not None


def test_a_second_question_about_the_same_picture_reuses_it():
    """The prompt cache keys a picture's tokens by its picture: the same picture in a later prompt
    is neither encoded nor prefilled again, a different one is; the answers are a fresh model's."""
    prompt = REFERENCE["prompts"]["one_image"]
    files = [FIXTURE / REFERENCE["images"][i]["file"] for i in (0, 2)]

    async def run():
        device = await open_wgpu_device()
        model = await session.load(FIXTURE, device, context=128, precision="exact")
        same, other = read_picture(files[0]), read_picture(files[1])
        first = AnswerStream(model, prompt["input_ids"], 16, SamplingParams(), pictures=[same])
        [t async for t in first]
        assert first.tokens == prompt["greedy"]
        assert first.encoded is not None
        follow = prompt["input_ids"] + first.tokens[:-1] + prompt["input_ids"][-4:]  # a later turn's shape
        again = AnswerStream(model, follow, 4, SamplingParams(), pictures=[same, same])
        with pytest.raises(WispError, match="picture tokens"):  # two pictures for one picture's tokens
            [t async for t in again]
        again = AnswerStream(model, follow, 4, SamplingParams(), pictures=[same])
        [t async for t in again]
        assert again.encoded is None and model.cache.reused >= len(prompt["input_ids"]) + 8
        fresh = await session.load(FIXTURE, device, context=128, precision="exact")
        check = AnswerStream(fresh, follow, 4, SamplingParams(), pictures=[same])
        [t async for t in check]
        assert again.tokens == check.tokens
        ids = other_ids(fresh, other)
        changed = AnswerStream(model, ids, 4, SamplingParams(), pictures=[other])
        [t async for t in changed]
        assert changed.encoded is not None and model.cache.reused <= ids.index(model.vision.image_token_id)

    asyncio.run(run())


def other_ids(model, picture) -> list[int]:
    """The one-picture prompt's text around another picture's tokens."""
    message = REFERENCE["prompts"]["one_image"]["messages"][0]
    text, _ = model.vision.expand(model.tok.apply_chat_template([message]), [picture])
    return model.tok.encode(text, add_special_tokens=False)
