"""What the vision tests share (test_vision_smolvlm_model, test_vision_mmproj, test_vision_gemma3,
test_vision_qwen3_5): a fixture folder and its transformers reference, the processor's tiles as the tower's
patch rows, a prompt's pictures from their PNGs or as data: URLs, the engine's logits and greedy ids for a
prompt whose pictures are encoded, a streamed answer, the OpenAI chat with image_url parts, a second question
about the same picture, and `generate`."""

import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from py_engine.api.completions import chat_chunks, collect
from py_engine.api.request import parse_chat
from py_engine.decode.answer_stream import AnswerStream
from py_engine.decode.token_choice import SamplingParams
from py_engine.vision.files import read_picture

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> tuple[Path, dict, dict, dict]:
    """tests/fixtures/`name`: the folder, its reference.json, reference.npz and config.json."""
    folder = FIXTURES / name
    reference = json.loads((folder / "reference.json").read_text())
    config = json.loads((folder / "config.json").read_text())
    return folder, reference, np.load(folder / "reference.npz"), config


def patch_rows(tile: np.ndarray, patch: int) -> bytes:
    """A [3, T, T] tile as the tower's patch rows (Conv2d order: channel, ky, kx)."""
    c, t, _ = tile.shape
    s = t // patch
    return np.ascontiguousarray(
        tile.reshape(c, s, patch, s, patch).transpose(1, 3, 0, 2, 4).reshape(s * s, -1)
    ).tobytes()


def pictures_of(folder: Path, reference: dict, prompt: dict) -> list:
    """A prompt's pictures, read from their PNGs."""
    return [read_picture(folder / reference["images"][i]["file"]) for i in prompt["images"]]


def data_url(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


async def answer(engine, ids: list[int], image_token: int, poke=None) -> tuple[np.ndarray, list[int]]:
    """The prompt's last logits and 16 greedy tokens, the pictures already encoded into image_embeds and
    placed (`poke(engine)` runs after place_images: a test's change to how they are placed)."""
    engine.reset()
    assert engine.place_images(0, ids, image_token) == ids.count(image_token)
    if poke is not None:
        poke(engine)
    logits = np.array(await engine.prompt_logits(ids), np.float32)
    engine.reset()
    return logits, [t async for t in engine.generate(ids, 16)]


async def streamed(model, ids: list[int], new_tokens: int, pictures: list) -> AnswerStream:
    """An AnswerStream for `ids` and `pictures`, run to its end."""
    stream = AnswerStream(model, ids, new_tokens, SamplingParams(), pictures=pictures)
    [piece async for piece in stream]
    return stream


def image_url_body(folder: Path, reference: dict, prompt: dict, model_name: str, **url) -> dict:
    """An OpenAI chat request asking the prompt with its pictures as image_url parts (data: URLs; `url`'s
    keys beside each url), greedy, 16 tokens."""
    urls = iter(data_url(folder / reference["images"][i]["file"]) for i in prompt["images"])
    content = [
        {"type": "image_url", "image_url": {"url": next(urls), **url}} if part["type"] == "image" else part
        for part in prompt["messages"][0]["content"]
    ]
    return {"model": model_name, "messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 16}


async def chat_answer(model, body: dict):
    """The answer the OpenAI layer ends `body` with."""
    ended = []
    await collect(chat_chunks(model, parse_chat(body), ended=lambda answer, dropped: ended.append(answer)))
    return ended[0]


def check_a_second_question(model, prompt: dict, picture) -> None:
    """The one-picture prompt, then a later turn's shape around the same picture: the prompt cache goes on
    past the picture it holds (not encoded again), and the answer is the one computed from scratch."""
    follow = prompt["input_ids"] + prompt["greedy"][:-1] + prompt["input_ids"][-4:]  # a later turn's shape
    first = asyncio.run(streamed(model, prompt["input_ids"], 4, [picture]))
    again = asyncio.run(streamed(model, follow, 4, [picture]))
    assert first.tokens == prompt["greedy"][:4] and again.encoded is None
    assert model.cache.reused >= len(prompt["input_ids"])
    model.cache.reset()
    assert asyncio.run(streamed(model, follow, 4, [picture])).tokens == again.tokens


def generate(*args: str) -> subprocess.CompletedProcess:
    """`python -m py_engine generate --max-new-tokens 16 --json` with `args`."""
    command = [sys.executable, "-m", "py_engine", "generate", "--max-new-tokens", "16", "--json", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def one_picture_chat(reference: dict, folder: Path) -> list[str]:
    """`generate`'s --chat, --image and --prompt for the one-picture prompt (its picture from `folder`)."""
    one = reference["prompts"]["one_image"]
    picture = str(folder / reference["images"][one["images"][0]]["file"])
    return ["--chat", "--image", picture, "--prompt", one["messages"][0]["content"][1]["text"]]


def generated(result: subprocess.CompletedProcess) -> list[int]:
    """The tokens `generate --json` printed last."""
    return json.loads(result.stdout.splitlines()[-1])["tokens"]


def copy_folder(folder: Path, to: Path) -> Path:
    """The folder's JSON files and model.safetensors in `to` (made)."""
    to.mkdir()
    for path in [*folder.glob("*.json"), folder / "model.safetensors"]:
        (to / path.name).write_bytes(path.read_bytes())
    return to
