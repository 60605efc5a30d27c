"""The chat page (static/) in headless Chromium, against a fake worker (tests/web/fake_worker.js).

A tiny test-local server maps / and /static/ to static/, /api/models to a fixed list and
/worker/worker.js to the fake, which speaks the worker protocol with no Pyodide and no GPU.
Screenshots land in tests/artifacts/ (gitignored).
"""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from browser_harness import CHROMIUM, check_protocol, launch, record_protocol

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "static"
FAKE_WORKER = Path(__file__).parent / "web" / "fake_worker.js"
ARTIFACTS = Path(__file__).parent / "artifacts"

MODELS = [
    {
        "id": "qwen2.5-coder-0.5b-instruct",
        "name": "Qwen2.5-Coder 0.5B Instruct",
        "kind": "gguf",
        "files": {"qwen2.5-coder-0.5b-instruct-q4_k_m.gguf": 491_400_032},
        "default": False,
    },
    {
        "id": "smollm2-135m-instruct",
        "name": "SmolLM2 135M Instruct",
        "kind": "gguf",
        "files": {"smollm2-135m-instruct-q4_1.gguf": 98_000_000},
        "default": True,
    },
    {
        "id": "broken-model",
        "name": "Broken Model",
        "kind": "hf",
        "files": {"config.json": 700, "model.safetensors": 12_000_000},
        "default": False,
    },
]
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".png": "image/png",
}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Chromium at /usr/bin/chromium"),
]


class Handler(BaseHTTPRequestHandler):
    models = MODELS  # what /api/models answers (tests/test_browser_storage.py serves more)

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = unquote(urlsplit(self.path).path)
        if path == "/api/models":
            return self.reply(200, json.dumps(self.models).encode(), "application/json")
        if path == "/worker/worker.js":
            return self.file(FAKE_WORKER)
        if path in ("/", "/index.html"):
            return self.file(STATIC / "index.html")
        if path.startswith("/static/"):
            target = (STATIC / path[len("/static/") :]).resolve()
            if target.is_relative_to(STATIC) and target.is_file():
                return self.file(target)
        self.reply(404, b"not found", "text/plain")

    def file(self, path):
        self.reply(200, path.read_bytes(), TYPES.get(path.suffix, "application/octet-stream"))

    def reply(self, status, body, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def base_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def traffic():
    """Everything the page and the fake worker say to each other in this module."""
    return []


@pytest.fixture(scope="module")
def context(traffic, tmp_path_factory):
    with sync_api.sync_playwright() as p:
        ctx = launch(p, tmp_path_factory.mktemp("page-profile"), viewport={"width": 1280, "height": 860})
        traffic.append(record_protocol(ctx))
        yield ctx
        ctx.close()


@pytest.fixture
def page(context, base_url):
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    # Every narration the progress label shows, however briefly.
    page.add_init_script("""
        window.__progressLog = [];
        document.addEventListener("DOMContentLoaded", () => {
          const label = document.getElementById("progress-label");
          new MutationObserver(() => window.__progressLog.push(label.textContent))
            .observe(label, {childList: true, characterData: true, subtree: true});
        });
    """)
    yield page
    page.close()


def tid(page, name):
    return page.get_by_test_id(name)


def open_page(page, base_url):
    page.goto(base_url + "/")
    page.wait_for_selector("body[data-models=ready]")


def load_model(page):
    tid(page, "load-button").click()
    expect(tid(page, "progress")).to_be_visible()
    expect(tid(page, "prompt-input")).to_be_disabled()
    page.wait_for_selector("body[data-phase=ready]", timeout=10_000)


def answer(page, n=-1):
    return tid(page, "assistant-message").nth(n)


def send_and_wait(page, text):
    count = tid(page, "assistant-message").count()
    box = tid(page, "prompt-input")
    box.fill(text)
    box.press("Enter")
    expect(tid(page, "assistant-message")).to_have_count(count + 1)
    expect(tid(page, "stats").nth(count)).not_to_be_empty(timeout=10_000)
    page.wait_for_selector("body[data-phase=ready]")
    return answer(page, count).inner_text()


# Records (the last answer's text length, the page's phase) at each change of the page, from the page.
WATCH_ANSWER = """() => {
  window.__answerSeen = [];
  new MutationObserver(() => {
    const a = document.querySelectorAll('[data-testid=assistant-message]');
    const n = a.length ? a[a.length - 1].textContent.length : 0;
    const last = window.__answerSeen.at(-1);
    if (!last || last[0] !== n) window.__answerSeen.push([n, document.body.dataset.phase]);
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def text_len(page):
    return page.evaluate("""() => { const a = document.querySelectorAll('[data-testid=assistant-message]');
                                   return a.length ? a[a.length - 1].textContent.length : 0; }""")


def test_models_listed_and_default_selected(page, base_url):
    open_page(page, base_url)
    select = tid(page, "model-select")
    options = select.locator("option")
    expect(options).to_have_count(3)
    expect(select).to_have_value("smollm2-135m-instruct")  # the `default` one, though it is not first
    assert "SmolLM2 135M Instruct" in options.nth(1).inner_text() and "98 MB" in options.nth(1).inner_text()
    assert "491 MB" in options.nth(0).inner_text()
    expect(tid(page, "load-button")).to_be_enabled()
    expect(tid(page, "load-button")).to_have_text("Load")
    expect(tid(page, "send-button")).to_be_disabled()
    expect(tid(page, "stop-button")).to_be_hidden()
    expect(page.locator("#welcome")).to_contain_text("98 MB")
    assert page.errors == []


def pace_seconds(notice_text):
    """(model name, seconds per token) from the fallback notice's estimate."""
    m = re.search(r"puts (.+?) at about ([\d.]+) (s per token|tokens per second) \(a rough estimate\)", notice_text)
    assert m, notice_text
    value = float(m[2])
    return m[1], value if m[3] == "s per token" else 1 / value


def test_fallback_adapter_said_before_any_load(page, base_url):
    """SwiftShader is a CPU fallback adapter: before any load the page says so, with the selected
    model's pace measured by the probe (static/fallback_probe.js), following the selection; once a
    model is loaded the notice goes."""
    open_page(page, base_url)
    page.wait_for_selector("body[data-adapter=fallback]")
    notice = tid(page, "fallback-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("This browser runs WebGPU on the CPU")
    expect(notice).to_contain_text("a fallback, not a GPU")
    expect(notice).to_contain_text("GPU-enabled WebGPU")
    expect(notice).to_contain_text("a rough estimate", timeout=60_000)  # the probe's fixed work, however slow
    smol, smol_s = pace_seconds(notice.inner_text())
    assert smol == "SmolLM2 135M Instruct"
    tid(page, "model-select").select_option("qwen2.5-coder-0.5b-instruct")
    expect(notice).to_contain_text("puts Qwen2.5-Coder 0.5B Instruct at about")
    qwen, qwen_s = pace_seconds(notice.inner_text())
    assert abs(qwen_s / smol_s - 491.4 / 98) < 0.12 * 491.4 / 98, (smol_s, qwen_s)  # by weight bytes
    tid(page, "model-select").select_option("smollm2-135m-instruct")
    load_model(page)
    expect(notice).to_be_hidden()
    assert page.errors == []


# The adapter as a GPU reports it (isFallbackAdapter false), and every device the page opens counted.
GPU_ADAPTER = """
  for (const proto of [GPUAdapterInfo.prototype, GPUAdapter.prototype]) {
    Object.defineProperty(proto, "isFallbackAdapter", { get: () => false });
  }
  window.__devices = 0;
  const requestDevice = GPUAdapter.prototype.requestDevice;
  GPUAdapter.prototype.requestDevice = function (...args) { window.__devices++; return requestDevice.apply(this, args); };
"""
# fallbackAdapter() on stubbed adapters: adapter.info.isFallbackAdapter, else adapter.isFallbackAdapter (older Chrome).
FALLBACK_STUBS = """async () => {
  const { fallbackAdapter } = await import("/static/fallback_probe.js");
  const gpu = (adapter) => ({ requestAdapter: async () => adapter });
  const cases = [{ info: { isFallbackAdapter: true } }, { info: { isFallbackAdapter: false }, isFallbackAdapter: true },
                 { info: {}, isFallbackAdapter: true }, { isFallbackAdapter: false }, { info: {} }];
  const answers = await Promise.all(cases.map(async (adapter) => (await fallbackAdapter(gpu(adapter))) === adapter));
  const none = await fallbackAdapter(gpu(null));
  const refused = await fallbackAdapter({ requestAdapter: async () => { throw new Error("no"); } });
  return [...answers, none, refused];
}"""


def test_no_fallback_notice_on_a_gpu_adapter(page, base_url):
    page.add_init_script(GPU_ADAPTER)
    open_page(page, base_url)
    page.wait_for_selector("body[data-adapter=gpu]")
    expect(tid(page, "fallback-notice")).to_be_hidden()
    assert page.evaluate("window.__devices") == 0  # no probe on a GPU
    assert page.evaluate(FALLBACK_STUBS) == [True, False, True, False, False, None, None]
    assert page.errors == []


# The page's `cancel` messages wait until window.__releaseCancel() (then pass as before).
HOLD_CANCEL = """() => {
  const post = Worker.prototype.postMessage, held = [];
  Worker.prototype.postMessage = function (msg, ...rest) {
    if (msg?.type !== "cancel") return post.call(this, msg, ...rest);
    held.push(() => post.call(this, msg, ...rest));
  };
  window.__releaseCancel = () => { Worker.prototype.postMessage = post; for (const send of held) send(); };
}"""


def test_chat_load_stream_stop_and_follow_up(page, base_url, context):
    requests = []
    context.on("request", lambda r: requests.append(r.url))
    open_page(page, base_url)
    load_model(page)

    log = page.evaluate("window.__progressLog")
    assert "Starting Python…" in log
    assert "Checking this device for the model…" in log
    assert any(re.fullmatch(r"Downloading weights… \d+ / 98 MB · 12\.3 MB/s · \d+ s left", t) for t in log), log
    assert "Downloading weights… 49 / 98 MB · 12.3 MB/s · 4 s left" in log
    assert "Verifying… 50 %" in log
    assert "Uploading to the GPU… 49 / 98 MB" in log
    assert "Compiling kernels… 6 / 12" in log
    expect(tid(page, "progress")).to_be_hidden()
    expect(tid(page, "load-button")).to_have_text("Loaded")
    expect(tid(page, "prompt-input")).to_be_enabled()
    expect(tid(page, "prompt-input")).to_be_focused()
    expect(page.locator("#ready")).to_contain_text("SmolLM2 135M Instruct is ready")

    # The GPU panel shows the adapter from the `loaded` event.
    gpu = tid(page, "gpu-panel")
    gpu.locator("summary").click()
    expect(gpu).to_contain_text("SwiftShader Device (Subzero) — fake")
    expect(gpu).to_contain_text("timestamp-query")
    expect(gpu).to_contain_text("maxStorageBufferBindingSize")
    expect(gpu).to_contain_text("128 MiB")
    expect(gpu).to_contain_text("no (f32 kernels)")
    expect(gpu).to_contain_text("2,048 tokens")
    expect(gpu).to_contain_text("Dawn / wgpu-native: one submit per forward")
    expect(gpu).to_contain_text("kv cache 47 MB")
    expect(gpu.locator("dd", has_text="none")).to_have_count(1)  # WebKit measures: none
    page.keyboard.press("Escape")
    expect(gpu.locator(".gpu-body")).to_be_hidden()

    # Shift+Enter is a newline, Enter sends; the answer streams in pieces.
    box = tid(page, "prompt-input")
    box.fill("Hello there")
    box.press("Shift+Enter")
    box.press_sequentially("how are you?")
    assert box.input_value() == "Hello there\nhow are you?"
    page.evaluate(WATCH_ANSWER)
    box.press("Enter")
    expect(box).to_have_value("")
    expect(box).to_be_enabled()  # typing stays possible while the answer streams
    expect(tid(page, "stop-button")).to_be_visible()
    expect(tid(page, "stats").last).to_contain_text(
        re.compile(r"^19 tokens · [\d.]+ tok/s · \d+ ms to first token$"), timeout=10_000
    )
    # The answer grew in pieces, the page saying "generating" while it did (seen by the page itself
    # at each change, however slowly this test looks: the fake worker's 19 tokens take ~0.6 s).
    seen = page.evaluate("window.__answerSeen")
    lengths = [n for n, _ in seen]
    assert len(set(lengths)) > 2, seen
    assert all(phase == "generating" for n, phase in seen if 0 < n < lengths[-1]), seen
    first_answer = answer(page).inner_text()
    assert first_answer.startswith("Answer 1 (1 messages, temperature 0.2):")
    expect(page.locator(".msg-user .bubble").first).to_have_text("Hello there\nhow are you?")

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "chat.png"))

    # Stop mid-answer: no more text afterwards, the stats say so, Send comes back.
    box.fill("Tell me a long story")
    tid(page, "send-button").click()
    page.wait_for_function(
        "() => { const a = document.querySelectorAll('[data-testid=assistant-message]');"
        " return a.length === 2 && a[1].textContent.length > 120; }"
    )
    # While the worker has not confirmed (its cancel held back here), the button says what it waits for.
    page.evaluate(HOLD_CANCEL)
    tid(page, "stop-button").click()
    expect(tid(page, "stop-button")).to_have_text("Stopping at the next token…")
    expect(tid(page, "stop-button")).to_be_disabled()
    page.evaluate("window.__releaseCancel()")
    expect(tid(page, "stats").last).to_contain_text("stopped")
    stopped = text_len(page)
    page.wait_for_timeout(300)
    assert text_len(page) == stopped
    assert stopped < 1500  # far from the 400-word answer
    expect(tid(page, "send-button")).to_be_visible()
    expect(tid(page, "stop-button")).to_be_hidden()

    # The next answer sees the whole conversation (user, assistant, user, stopped assistant, user).
    third = send_and_wait(page, "And now?")
    assert third.startswith("Answer 3 (5 messages, temperature 0.2):"), third
    assert not re.search(r"stopped|token limit", tid(page, "stats").last.inner_text())

    # New chat empties the page and the history.
    tid(page, "new-chat").click()
    expect(tid(page, "assistant-message")).to_have_count(0)
    expect(page.locator("#ready")).to_be_visible()
    assert send_and_wait(page, "Fresh start").startswith("Answer 1 (1 messages")

    origin = base_url + "/"
    assert all(u.startswith(origin) or u.startswith(("data:", "blob:")) for u in requests), [
        u for u in requests if not u.startswith(origin)
    ]
    assert page.errors == []


def test_settings_and_error_banner(page, base_url):
    open_page(page, base_url)
    load_model(page)

    tid(page, "settings-button").click()
    dialog = page.get_by_role("dialog", name="Sampling")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("Temperature")).to_have_value("0.2")
    expect(dialog.get_by_label("Top-p")).to_have_value("0.9")
    expect(dialog.get_by_label("Repetition penalty")).to_have_value("1.1")
    expect(dialog.get_by_label("Max new tokens")).to_have_value("512")
    dialog.get_by_label("Temperature").fill("0.7")
    dialog.get_by_label("Max new tokens").fill("5")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    text = send_and_wait(page, "Hi")
    assert text.startswith("Answer 1 (1 messages, temperature 0.7):")
    expect(tid(page, "stats").last).to_contain_text("5 tokens")
    expect(tid(page, "stats").last).to_contain_text("reached the token limit")

    # An `error` event: a readable, dismissible banner; the chat goes on.
    tid(page, "prompt-input").fill("please trigger error")
    tid(page, "prompt-input").press("Enter")
    banner = tid(page, "error-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("The answer failed")
    expect(banner).to_contain_text("GPU device lost while decoding")
    expect(page.locator(".msg-failed")).to_have_count(1)
    page.get_by_role("button", name="Dismiss this message").click()
    expect(banner).to_be_hidden()
    assert send_and_wait(page, "Still there?").startswith("Answer 2 (3 messages")  # the failed turn was dropped
    assert page.errors == []


def test_load_error_and_worker_crash(page, base_url):
    open_page(page, base_url)
    tid(page, "model-select").select_option("broken-model")
    tid(page, "load-button").click()
    banner = tid(page, "error-banner")
    expect(banner).to_contain_text("Couldn’t load the model")
    expect(banner).to_contain_text("sha256 mismatch")
    expect(tid(page, "progress")).to_be_hidden()
    expect(tid(page, "load-button")).to_be_enabled()

    tid(page, "model-select").select_option("smollm2-135m-instruct")
    load_model(page)
    expect(banner).to_be_hidden()
    tid(page, "prompt-input").fill("trigger crash")
    tid(page, "prompt-input").press("Enter")
    expect(banner).to_contain_text("The engine stopped unexpectedly")
    expect(banner).to_contain_text("Fake worker crashed on purpose")
    expect(tid(page, "load-button")).to_have_text("Load")
    expect(tid(page, "stop-button")).to_be_hidden()
    load_model(page)  # a fresh worker
    assert send_and_wait(page, "Back?").startswith("Answer 1 (1 messages")


def test_no_webgpu(page, base_url):
    page.add_init_script("delete Navigator.prototype.gpu;")
    open_page(page, base_url)
    help_ = tid(page, "webgpu-help")
    expect(help_).to_be_visible()
    expect(help_).to_contain_text("WebGPU")
    expect(help_).to_contain_text("Chrome or Edge 113+")
    expect(help_).to_contain_text("Safari 26")
    expect(help_).to_contain_text("chrome://flags/#enable-unsafe-webgpu")
    expect(help_).to_contain_text("Firefox")
    expect(tid(page, "load-button")).to_be_disabled()
    expect(page.locator("#welcome")).to_be_hidden()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "no-webgpu.png"))
    # No worker was started: nothing asked for it.
    assert page.evaluate("performance.getEntriesByType('resource').every(e => !e.name.includes('/worker/'))")


def test_ipad_portrait_dark(page, base_url):
    page.set_viewport_size({"width": 768, "height": 1024})
    page.emulate_media(color_scheme="dark")
    open_page(page, base_url)
    load_model(page)
    send_and_wait(page, "Hello from an iPad")
    for name in ("model-select", "load-button", "prompt-input", "send-button", "gpu-panel"):
        box = tid(page, name).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 768, (name, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= 768
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "chat-ipad-dark.png"))


def test_client_module(page, base_url):
    """static/client.js on its own, as the benchmark uses it: load, iterate tokens, cancel by breaking out."""
    open_page(page, base_url)
    result = page.evaluate("""async () => {
        const { WispClient, fetchModels } = await import("/static/client.js");
        const models = await fetchModels();
        const model = models.find((m) => m.default);
        const client = new WispClient();
        const phases = new Set();
        const loaded = await client.load(model, { context: 512 }, { onProgress: (p) => phases.add(p.phase) });
        const gen = client.generate({ prompt: "hi", sampling: { temperature: 0, max_new_tokens: 64 } });
        let text = "";
        for await (const t of gen) text += t.text;
        const done = await gen.done;
        const long = client.generate({ messages: [{ role: "user", content: "a long one" }] });
        let n = 0;
        for await (const t of long) { if (++n === 5) break; }  // leaving the loop cancels
        const stopped = await long.done;
        let error = null;
        try { await client.generate({ prompt: "trigger error" }).done; } catch (e) { error = [e.name, e.kind]; }
        client.terminate();
        return { size: model.size, phases: [...phases], adapter: loaded.adapter.name, text, stop: done.stop,
                 tokens: done.tokens.length, same: text === gen.text, cancel: stopped.stop, kept: long.text.split(" ").length,
                 error };
    }""")
    assert result["size"] == 98_000_000
    assert result["phases"] == ["boot", "store", "download", "verify", "upload", "compile"]
    assert result["adapter"].startswith("SwiftShader")
    assert result["text"].startswith("Answer 0 (0 messages, temperature 0):") and result["same"]
    assert result["stop"] == "eos" and result["tokens"] == 19
    assert result["cancel"] == "cancel" and result["kept"] < 12
    assert result["error"] == ["WispError", "generate"]


def test_traffic_fits_the_protocol_table(traffic):
    """Every message the page sent and every event the fake worker answered in this module's tests
    fits py_engine/web/protocol.py's table (the same table the real worker is held to)."""
    seen = check_protocol(traffic[0])
    assert {"load", "openai", "cancel", "booted", "progress", "loaded", "chunk", "response", "error"} <= set(seen), seen
