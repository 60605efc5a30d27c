"""llama.cpp's pair on the desktop server: `python -m app --model X.gguf --mmproj Y.gguf` serves the
text GGUF and its vision projector as one model (the page loads both: /api/models names the
projector `mmproj`, and /models/<id>/ serves its file; tests/test_browser_pictures.py loads it in
Chromium), and /v1 answers a picture with it: the Gemma 3 pair (tests/fixtures/gemma3vl-gguf) gives
transformers' 16 greedy tokens of the folder it was converted from."""

import base64
import json
import urllib.request
from pathlib import Path

import pytest
from server_harness import app_server

from app.__main__ import parse_args
from app.models import ModelPathError, ModelRegistry

FIXTURES = Path(__file__).parent / "fixtures"
PAIR = FIXTURES / "gemma3vl-gguf"
TEXT, MMPROJ = PAIR / "gemma3vl-tiny-f32.gguf", PAIR / "mmproj-gemma3vl-tiny-f32.gguf"
GEMMA3 = FIXTURES / "gemma3vl-f32"  # the folder the pair was converted from: its reference


def test_mmproj_pairs_with_the_model_named_before_it():
    assert parse_args(["--model", "a.gguf", "--mmproj", "m.gguf"]).model == [("a.gguf", "m.gguf")]
    args = parse_args(["--model", "a.gguf", "b.gguf", "--mmproj", "m.gguf", "--model", "c"])
    assert args.model == ["a.gguf", ("b.gguf", "m.gguf"), "c"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mmproj", "m.gguf", "--model", "a.gguf"], "--mmproj goes after the --model it belongs to"),
        (["--model", "a.gguf", "--mmproj", "m.gguf", "--mmproj", "n.gguf"], "a.gguf already has an --mmproj"),
    ],
)
def test_a_stray_mmproj_is_refused(argv, message, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err


def test_the_pair_is_one_model_of_two_files():
    (model,) = ModelRegistry([(TEXT, MMPROJ)], include_cache=False).models()
    listed = model.to_json()
    assert (listed["id"], listed["kind"], listed["mmproj"]) == ("gemma3vl-tiny-f32", "gguf", MMPROJ.name)
    assert listed["files"] == {TEXT.name: TEXT.stat().st_size, MMPROJ.name: MMPROJ.stat().st_size}
    assert set(listed["hashes"]) == set(listed["files"])
    assert model.file(MMPROJ.name) == MMPROJ.resolve() and model.mmproj_path() == MMPROJ.resolve()
    alone = ModelRegistry([TEXT], include_cache=False).models()[0]
    assert "mmproj" not in alone.to_json() and alone.mmproj_path() is None


@pytest.mark.parametrize(
    ("pair", "message"),
    [
        ((GEMMA3, MMPROJ), "--mmproj goes with a .gguf text model, not a folder"),
        ((TEXT, PAIR / "missing.gguf"), "--mmproj expects llama.cpp's vision projector .gguf file"),
        ((TEXT, GEMMA3 / "config.json"), "--mmproj expects llama.cpp's vision projector .gguf file"),
        ((TEXT, TEXT), "the projector's file name is the text model's"),
    ],
)
def test_a_bad_pair_is_refused_at_start(pair, message):
    with pytest.raises(ModelPathError, match=message):
        ModelRegistry([pair], include_cache=False)


def test_the_server_serves_the_pair_and_answers_a_picture_with_it():
    reference = json.loads((GEMMA3 / "reference.json").read_text())
    prompt = reference["prompts"]["one_image"]
    png = (GEMMA3 / reference["images"][prompt["images"][0]]["file"]).read_bytes()
    content = [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}},
        prompt["messages"][0]["content"][1],
    ]
    body = {"model": "gemma3vl-tiny-f32", "messages": [{"role": "user", "content": content}], "max_tokens": 16}
    body |= {"temperature": 0, "precision": "exact"}  # as the reference ran
    with app_server("--no-default", "--model", str(TEXT), "--mmproj", str(MMPROJ)) as (url, _):
        with urllib.request.urlopen(f"{url}/api/models") as response:
            (listed,) = json.loads(response.read())
        with urllib.request.urlopen(f"{url}/models/{listed['id']}/{listed['mmproj']}") as response:
            assert response.read() == MMPROJ.read_bytes()
        post = urllib.request.Request(
            f"{url}/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(post, timeout=600) as response:
            answer = json.loads(response.read())
    from py_engine.tokenizer import Tokenizer

    want = Tokenizer.from_model_dir(GEMMA3).decode(prompt["greedy"], skip_special_tokens=True)
    assert answer["choices"][0]["message"]["content"] == want
    assert answer["usage"]["prompt_tokens"] == len(prompt["input_ids"])
