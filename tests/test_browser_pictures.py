"""Pictures on the chat page, end to end in headless Chromium (SwiftShader): the tiny random SmolVLM
(tests/fixtures/smolvlm-f32) served by `python -m app --model`, loaded by the page, a picture given
with the composer's button (and then pasted, and dropped), decoded by the worker's JavaScript
(worker/pictures.js) and encoded on the GPU: the answer's token ids are transformers' greedy ones
(reference.json; the fixture's tokenizer writes gibberish, so ids are compared). Then Gemma 3
(tests/fixtures/gemma3vl-f32: its picture tokens attend to their whole picture) loaded from the
picker and asked about an attached picture, asked about two by the page's OpenAI module
(static/openai.js, data: URLs), and llama.cpp's pairs of both (tests/fixtures/gemma3vl-gguf and
smolvlm-gguf, served with `--mmproj`) loaded by that module: transformers' tokens each time. Then Qwen3.5
(tests/fixtures/qwen3_5vl-f32: its picture tokens at multimodal RoPE positions, a DeltaNet hybrid) the same
three ways (its pair tests/fixtures/qwen3_5vl-gguf) and once more past its picture in the prompt cache. The
decoder on its own, in a worker without Pyodide: Pillow's RGBA bytes exactly for the fixture's PNGs (RGB and RGBA) and an
animated GIF's first frame, and one clear error for what is not a picture, is too large or is not a
picture URL. One page (one Pyodide boot) serves the module; a screenshot lands in tests/artifacts/
(gitignored)."""

import base64
import io
import json
import re

import pytest
from browser_harness import ROOT, app_server, check_protocol, launch, record_protocol
from test_browser_pictures_page import drop, file_arg, paste

playwright_api = pytest.importorskip("playwright.sync_api")
Image = pytest.importorskip("PIL.Image")
pytestmark = [pytest.mark.browser, pytest.mark.slow]
expect = playwright_api.expect

FIXTURE = ROOT / "tests" / "fixtures" / "smolvlm-f32"
IMAGES = FIXTURE / "images"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())
ONE = REFERENCE["prompts"]["one_image"]  # rgb_45x71.png, then "What is in this image?"
QUESTION = ONE["messages"][0]["content"][1]["text"]
GEMMA3 = ROOT / "tests" / "fixtures" / "gemma3vl-f32"  # served as "gemma3vl-f32"
QWEN = ROOT / "tests" / "fixtures" / "qwen3_5vl-f32"  # served as "qwen3_5vl-f32"
# llama.cpp's files of the same models, each pair served as one model (--mmproj): "gemma3vl-tiny-f32",
# "smolvlm-tiny-f32" and "qwen3_5vl-tiny-f32"
PAIRS = {
    name: (
        ROOT / "tests" / "fixtures" / folder / f"{name}.gguf",
        ROOT / "tests" / "fixtures" / folder / f"mmproj-{name}.gguf",
    )
    for name, folder in (
        ("gemma3vl-tiny-f32", "gemma3vl-gguf"),
        ("smolvlm-tiny-f32", "smolvlm-gguf"),
        ("qwen3_5vl-tiny-f32", "qwen3_5vl-gguf"),
    )
}
ARTIFACTS = ROOT / "tests" / "artifacts"
# Greedy and as long as the reference: the page's sampling settings, before its scripts read them.
GREEDY = (
    'localStorage.setItem("wisp.sampling", JSON.stringify('
    f"{{temperature: 0, top_p: 1, repetition_penalty: 1, max_new_tokens: {len(ONE['greedy'])}}}))"
)
# worker/pictures.js in a module worker of its own (no Pyodide), on a device of gpu.js's: each data:
# URL decoded into {width, height, rgba: [bytes]} or {error: "name: message"}.
DECODE = """async (urls) => {
  const source = `
    import * as gpu from "${location.origin}/worker/gpu.js";
    import { decode } from "${location.origin}/worker/pictures.js";
    self.onmessage = async (ev) => {
      await gpu.requestDevice({});
      const out = [];
      for (const url of ev.data) {
        try {
          const got = await decode(url, 40000000, 16384);
          out.push({ width: got.width, height: got.height, rgba: Array.from(got.rgba) });
        } catch (err) { out.push({ error: err.name + ": " + err.message }); }
      }
      postMessage(out);
    };`;
  const worker = new Worker(URL.createObjectURL(new Blob([source], {type: "text/javascript"})), {type: "module"});
  const out = await new Promise((resolve, reject) => {
    worker.onmessage = (ev) => resolve(ev.data);
    worker.onerror = (ev) => reject(new Error(ev.message));
    worker.postMessage(urls);
  });
  worker.terminate();
  return out;
}"""


@pytest.fixture(scope="module")
def server():
    pairs = [arg for text, mmproj in PAIRS.values() for arg in ("--model", str(text), "--mmproj", str(mmproj))]
    with app_server("--no-default", "--model", str(FIXTURE), str(GEMMA3), str(QWEN), *pairs) as (url, _):
        yield url


@pytest.fixture(scope="module")
def traffic():
    return []


@pytest.fixture(scope="module")
def page(server, tmp_path_factory, traffic):
    """The chat page with the fixture loaded (through its Load button), greedy for 16 tokens."""
    with playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path_factory.mktemp("pictures"), viewport={"width": 1280, "height": 860})
        traffic.append(record_protocol(context))
        context.add_init_script(GREEDY)
        page = context.new_page()
        page.errors = []
        page.on("pageerror", lambda exc: page.errors.append(str(exc)))
        page.goto(server + "/")
        expect(page.get_by_test_id("model-select")).to_have_value("smolvlm-f32")
        page.get_by_test_id("load-button").click()
        expect(page.get_by_test_id("load-button")).to_contain_text("Loaded", timeout=300_000)
        ARTIFACTS.mkdir(exist_ok=True)
        yield page
        context.close()


def data_url(raw: bytes, kind: str = "image/png") -> str:
    return f"data:{kind};base64,{base64.b64encode(raw).decode()}"


def png(image) -> bytes:
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def animated_gif() -> bytes:
    frames = [Image.new("RGB", (9, 7), color) for color in ((200, 30, 60), (10, 220, 90))]
    frames[0].putpixel((3, 2), (0, 0, 255))
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return out.getvalue()


def test_the_decoder_gives_pillows_bytes(page):
    names = ["rgb_20x41.png", "rgb_45x71.png", "rgba_70x33.png"]
    gif = animated_gif()
    urls = [data_url((IMAGES / name).read_bytes()) for name in names] + [
        data_url(gif, "image/gif"),
        data_url(b"not a picture at all"),
        data_url(png(Image.new("RGB", (16_385, 1)))),
        "ftp://example.com/cat.png",
    ]
    got = page.evaluate(DECODE, urls)
    with Image.open(io.BytesIO(gif)) as first:  # Pillow opens an animation at its first frame
        wants = [Image.open(IMAGES / name) for name in names] + [first.copy()]
    for name, want, out in zip([*names, "animated.gif"], wants, got):
        assert "error" not in out, (name, out)
        assert (out["width"], out["height"]) == want.size, name
        assert bytes(out["rgba"]) == want.convert("RGBA").tobytes(), name  # straight alpha, bit for bit
    assert Image.open(IMAGES / "rgba_70x33.png").getextrema()[3][0] < 255  # the RGBA one is translucent
    bad, large, scheme = (out["error"] for out in got[len(wants) :])
    assert bad.startswith("PictureError: data:image/png;base64,") and "not a picture this browser can read" in bad
    assert "16385 x 1 pixels is larger than this engine reads (16384 a side, 40 megapixels)" in large
    assert scheme == "PictureError: ftp://example.com/cat.png: a picture's URL must be a data:, blob: or http(s) URL"


def test_chat_about_an_attached_picture(page, traffic):
    """The composer's button, the file dialog, the thumbnail, the question: transformers' tokens."""
    with page.expect_file_chooser() as chosen:
        page.get_by_test_id("attach-button").click()
    chosen.value.set_files(str(IMAGES / "rgb_45x71.png"))
    expect(page.get_by_test_id("attachment")).to_have_count(1)
    page.get_by_test_id("prompt-input").fill(QUESTION)
    page.get_by_test_id("prompt-input").press("Enter")
    expect(page.get_by_test_id("attachments")).to_be_hidden()  # the picture went with the message
    stats = page.get_by_test_id("stats")
    expect(stats).to_contain_text("1 picture: 20 tokens in", timeout=120_000)
    assert answer_tokens(traffic) == ONE["greedy"]
    picture = page.get_by_test_id("user-picture")
    expect(picture).to_have_count(1)
    assert picture.evaluate("(img) => [img.naturalWidth, img.naturalHeight]") == [45, 71]
    assert page.get_by_test_id("user-message").inner_text() == QUESTION
    page.screenshot(path=str(ARTIFACTS / "browser-pictures.png"), full_page=True)


def test_paste_and_drop_pictures(page, traffic):
    """A new chat: a pasted picture and a dropped one in the tray (one removed again), a file that is
    not a picture and a broken PNG refused; the pasted picture's answer is the same tokens."""
    page.locator("#new-chat").click()
    tray, banner = page.get_by_test_id("attachment"), page.get_by_test_id("error-banner")
    paste(page, file_arg(IMAGES / "rgb_45x71.png"))
    expect(tray).to_have_count(1)
    drop(page, file_arg(IMAGES / "rgba_70x33.png"))
    expect(tray).to_have_count(2)
    page.screenshot(path=str(ARTIFACTS / "browser-pictures-tray.png"))
    page.get_by_test_id("attachment-remove").nth(1).click()
    expect(tray).to_have_count(1)
    page.get_by_test_id("attach-input").set_input_files(str(FIXTURE / "config.json"))  # "All files" in the dialog
    expect(banner).to_contain_text("config.json is not a picture: attach a PNG, JPEG, WebP or GIF.")
    drop(page, file_arg(FIXTURE / "config.json", "image/png", "broken.png"))
    expect(banner).to_contain_text("broken.png is not a picture this browser can read")
    expect(tray).to_have_count(1)
    assert page.evaluate("document.body.dataset.phase") == "ready"  # no model load began

    page.get_by_test_id("prompt-input").fill(QUESTION)
    page.get_by_test_id("send-button").click()
    # reused where the first test sent the same picture in the same place (the prompt cache has it)
    expect(page.get_by_test_id("stats")).to_contain_text(
        re.compile(r"1 picture: 20 tokens (reused|in)"), timeout=120_000
    )
    assert answer_tokens(traffic) == ONE["greedy"]
    assert page.get_by_test_id("user-picture").count() == 1


def test_the_worker_refuses_what_is_not_a_picture(page):
    """An OpenAI request on the page's own worker whose image_url is not a picture: one `error` of
    kind "request" naming it, before any GPU work (the next answer still comes)."""
    error = page.evaluate(
        """async (url) => {
      const {sharedClient} = await import("/static/client.js");
      const gen = sharedClient().openai("chat.completions", {model: "smolvlm-f32", max_tokens: 1,
        messages: [{role: "user", content: [{type: "image_url", image_url: {url}}, {type: "text", text: "?"}]}]});
      try { await gen.done; return null; } catch (err) { return {kind: err.kind, message: err.message}; }
    }""",
        data_url(b"GIF89a, but no more"),
    )
    assert error["kind"] == "request", error
    assert "not a picture this browser can read (image/png, 19 bytes)" in error["message"], error


def test_gemma3_answers_an_attached_picture(page, traffic):
    """Gemma 3 from the picker (the chat's Switch), a picture from the file dialog: its 9 picture
    tokens between boi and eoi, transformers' tokens (the picture attending to itself both ways)."""
    ask_about_an_attached_picture(page, traffic, "gemma3vl-f32", GEMMA3, 9)


def ask_about_an_attached_picture(page, traffic, model: str, folder, picture_tokens: int) -> None:
    """`model` switched to from the picker in a new chat, its reference's one-picture prompt asked with
    the picture from the file dialog: transformers' tokens and prompt length."""
    reference = json.loads((folder / "reference.json").read_text())
    prompt = reference["prompts"]["one_image"]  # a picture, then a question
    page.locator("#new-chat").click()
    page.get_by_test_id("model-select").select_option(model)
    load = page.get_by_test_id("load-button")
    expect(load).to_contain_text("Switch")
    load.click()
    expect(load).to_contain_text("Loaded", timeout=300_000)
    page.get_by_test_id("attach-input").set_input_files(str(folder / reference["images"][prompt["images"][0]]["file"]))
    expect(page.get_by_test_id("attachment")).to_have_count(1)
    page.get_by_test_id("prompt-input").fill(prompt["messages"][0]["content"][1]["text"])
    page.get_by_test_id("prompt-input").press("Enter")
    expect(page.get_by_test_id("stats")).to_contain_text(f"1 picture: {picture_tokens} tokens in", timeout=120_000)
    assert answer_tokens(traffic) == prompt["greedy"]
    assert events(traffic, "response")[-1]["stats"]["prompt_tokens"] == len(prompt["input_ids"])


@pytest.mark.parametrize(
    ("model", "folder", "name"),
    [
        ("gemma3vl-f32", GEMMA3, "two_images"),
        ("gemma3vl-tiny-f32", GEMMA3, "one_image"),
        ("smolvlm-tiny-f32", FIXTURE, "one_image"),
    ],
    ids=["gemma3", "gemma3-gguf", "smolvlm-gguf"],
)
def test_the_openai_module(page, traffic, model, folder, name):
    """static/openai.js on the chat's worker, the reference prompt's pictures as data: URLs: Gemma 3's
    folder (loaded) with two pictures, then each GGUF + mmproj pair (the module loads it: the worker
    reads the projector beside the text GGUF) with one; the folder's transformers' tokens and prompt
    length."""
    ask_the_openai_module(page, traffic, model, folder, name)


def test_qwen3_5_answers_an_attached_picture(page, traffic):
    """Qwen3.5 from the picker: its 15 picture tokens (a 6 x 10 grid merged 2 x 2) turned by their
    (temporal, row, column) positions and the question and answer after them 10 behind their cache
    positions, in the prompt and in the worker's decode loop: transformers' tokens (plain positions give
    others from the 6th on, on the desktop)."""
    ask_about_an_attached_picture(page, traffic, "qwen3_5vl-f32", QWEN, 15)


def test_qwen3_5_goes_on_past_a_cached_picture(page, traffic):
    """The chat's prompt again through static/openai.js, its picture by data: URL: the prompt cache holds
    it (the same pixels, so the same key), only the last prompt token is computed, at its multimodal
    position, and the answer decoded after it is transformers' again."""
    ask_the_openai_module(page, traffic, "qwen3_5vl-f32", QWEN, "one_image")
    stats = events(traffic, "response")[-1]["stats"]
    assert (stats["prefilled_tokens"], stats["picture_tokens"]) == (1, 15)


@pytest.mark.parametrize(
    ("model", "name", "sized"),
    [("qwen3_5vl-f32", "two_images", False), ("qwen3_5vl-tiny-f32", "one_image", True)],
    ids=["qwen3_5", "qwen3_5-gguf"],
)
def test_qwen3_5_through_the_openai_module(page, traffic, model, name, sized):
    """Qwen3.5's folder (loaded) with two pictures (a prompt sharing 3 tokens with the cached one: the
    DeltaNet state restarts at 0, an empty restore), then its GGUF pair with one. The mmproj names no pixel
    bounds, so llama.cpp's would grow the fixture's picture (tests/test_vision_qwen3_5.py); the pair's is
    sent at the size the folder's processor resizes it to (Pillow's BICUBIC, as it does), which neither
    resizes again: transformers' tokens."""
    ask_the_openai_module(page, traffic, model, QWEN, name, sized)


def ask_the_openai_module(page, traffic, model: str, folder, name: str, sized: bool = False) -> None:
    """The reference prompt `name` of `folder` asked of `model` through static/openai.js (data: URLs;
    sized: each picture at its processor's size, reference.json's grid_thw): transformers' tokens and
    prompt length."""
    reference = json.loads((folder / "reference.json").read_text())
    prompt = reference["prompts"][name]
    pictures = iter(picture_bytes(folder, reference["images"][i], sized) for i in prompt["images"])
    content = [
        {"type": "image_url", "image_url": {"url": data_url(next(pictures))}} if part["type"] == "image" else part
        for part in prompt["messages"][0]["content"]
    ]
    body = {"model": model, "messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 16}
    usage = page.evaluate(
        """async (body) => {
      const {Wisp} = await import("/static/openai.js");
      return (await new Wisp().chat.completions.create(body)).usage;
    }""",
        body,
    )
    assert answer_tokens(traffic) == prompt["greedy"]
    assert usage["prompt_tokens"] == len(prompt["input_ids"])


def picture_bytes(folder, image: dict, sized: bool) -> bytes:
    """A reference picture's PNG; sized: resized as Qwen3.5's processor does, to its patch grid."""
    raw = (folder / image["file"]).read_bytes()
    if not sized:
        return raw
    _, rows, cols = image["grid_thw"]
    patch = json.loads((folder / "preprocessor_config.json").read_text())["patch_size"]
    with Image.open(io.BytesIO(raw)) as picture:
        return png(picture.convert("RGB").resize((cols * patch, rows * patch), Image.BICUBIC))


def test_traffic_fits_the_protocol_table(page, traffic):
    engine = [(to, data) for to, data in traffic[0] if isinstance(data, dict)]  # not the decoder test's lists
    seen = check_protocol(engine)
    assert {"load", "loaded", "openai", "chunk", "response", "error"} <= set(seen), seen
    loaded = events(traffic, "loaded")
    assert [event["model"] for event in loaded] == [
        "smolvlm-f32",
        "gemma3vl-f32",
        "gemma3vl-tiny-f32",
        "smolvlm-tiny-f32",
        "qwen3_5vl-f32",
        "qwen3_5vl-tiny-f32",
    ]
    assert all(event["vision"] for event in loaded)
    loads = [data["model"] for to, data in engine if to == "worker" and data.get("type") == "load"]
    pairs = {model["id"]: model for model in loads if "mmproj" in model}  # the projector, one of the model's files
    assert {name: (sorted(m["files"]), m["mmproj"]) for name, m in pairs.items()} == {
        name: (sorted([text.name, mmproj.name]), mmproj.name) for name, (text, mmproj) in PAIRS.items()
    }
    assert not page.errors, page.errors


def answer_tokens(traffic) -> list[int]:
    """The last answer's tokens (its `response` event's stats; a final stop id is not the answer's)."""
    stats = [data["stats"] for data in events(traffic, "response")][-1]
    return stats["tokens"][:-1] if stats["stop"] == "eos" else stats["tokens"]


def events(traffic, kind: str) -> list[dict]:
    """The worker's events of one type, in order (the page's other workers post other things)."""
    return [data for to, data in traffic[0] if to == "page" and isinstance(data, dict) and data.get("type") == kind]
