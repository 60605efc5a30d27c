"""The chat page with the real worker and engine, in headless Chromium (SwiftShader).

A tiny random model with a made-up byte-level tokenizer (test_chat.py) stands in for a real one:
its answers are noise, but they stream fast enough on SwiftShader to drive the whole flow — load,
type, watch the answer grow, Stop mid-answer, ask again, lose the GPU mid-answer and go on — and to
save a screenshot."""

import shutil

import pytest
from browser_harness import ROOT, app_server, check_protocol, launch, record_protocol
from test_chat import FIXTURE, write_tiny_tokenizer

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser
ARTIFACTS = ROOT / "tests" / "artifacts"
# The page's worker started as a test worker (worker.js?test takes test_exec) and kept on window.
TEST_WORKER = """(() => {
  const Base = self.Worker;
  self.Worker = class extends Base {
    constructor(url, options) {
      super(String(url).endsWith("/worker/worker.js") ? `${url}?test` : url, options);
      self.__wispWorker = this;
    }
  };
})();"""
TEST_EXEC = """(code) => new Promise((resolve) => {
  const worker = window.__wispWorker, id = `exec-${performance.now()}`;
  worker.addEventListener("message", function answer(ev) {
    if (ev.data?.type !== "test_result" || ev.data.id !== id) return;
    worker.removeEventListener("message", answer);
    resolve(ev.data);
  });
  worker.postMessage({type: "test_exec", id, code});
})"""
MODEL_FETCHES = """import json, js
json.dumps(sum("/models/" in e.name for e in js.performance.getEntriesByType("resource")))"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = tmp_path_factory.mktemp("ui") / "qwen3-tiny"
    shutil.copytree(FIXTURE, model)
    write_tiny_tokenizer(model)
    with app_server("--no-default", "--model", str(model)) as (url, _):
        yield url


def test_chat_flow_with_the_real_worker(server, tmp_path):
    with playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path / "profile", viewport={"width": 1280, "height": 860})
        traffic = record_protocol(context)
        context.add_init_script(TEST_WORKER)
        page = context.new_page()
        page.goto(server + "/")
        expect = playwright_api.expect
        expect(page.get_by_test_id("model-select")).to_have_value("qwen3-tiny")
        page.get_by_test_id("load-button").click()
        prompt = page.get_by_test_id("prompt-input")
        expect(prompt).to_be_enabled(timeout=120_000)
        expect(page.get_by_test_id("load-button")).to_contain_text("Loaded", timeout=120_000)

        # First question: the answer streams; Stop ends it mid-way.
        prompt.fill("hello there")
        page.get_by_test_id("send-button").click()
        answer = page.get_by_test_id("assistant-message").last
        page.wait_for_function(
            """() => {
            const all = document.querySelectorAll('[data-testid="assistant-message"]');
            return all.length && all[all.length - 1].innerText.trim().length > 20; }""",
            timeout=120_000,
        )
        first = answer.inner_text()
        page.wait_for_function(
            f"""() => {{
            const all = document.querySelectorAll('[data-testid="assistant-message"]');
            return all[all.length - 1].innerText.length > {len(first)}; }}""",
            timeout=60_000,
        )  # still growing
        page.get_by_test_id("stop-button").click()
        stats = page.get_by_test_id("stats").last
        expect(stats).to_contain_text("stopped", timeout=60_000)
        stopped = answer.inner_text()
        page.wait_for_timeout(500)
        assert answer.inner_text() == stopped  # nothing arrives after Stop

        # Second question: a complete answer with its stats line.
        page.get_by_test_id("prompt-input").fill("and again")
        page.get_by_test_id("send-button").click()
        expect(page.get_by_test_id("assistant-message")).to_have_count(2)
        expect(page.get_by_test_id("stats")).to_have_count(2, timeout=180_000)
        expect(page.get_by_test_id("stats").last).to_contain_text("tok/s", timeout=180_000)
        assert page.get_by_test_id("error-banner").is_hidden()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "browser-chat.png"), full_page=True)
        lose_the_gpu_mid_answer(page, traffic)
        context.close()


def lose_the_gpu_mid_answer(page, traffic):
    """The GPU device lost mid-answer (the test hook destroys it at the 4th submit of the next
    answer): that answer keeps what it streamed and is marked failed, the page says the GPU was
    reset, the worker reloads the model from the weight store (no model file fetched again), and
    the next message is answered in the same conversation, on the same document."""
    expect = playwright_api.expect
    page.get_by_test_id("settings-button").click()  # short answers from here on
    page.locator("#settings-form [name=max_new_tokens]").fill("8")
    page.get_by_test_id("settings-button").click()
    start = len(traffic)
    page.evaluate("window.__sameDocument = 42")
    fetched = page.evaluate(TEST_EXEC, MODEL_FETCHES)["result"]
    armed = page.evaluate(TEST_EXEC, 'import wisp_gpu\nwisp_gpu._testFault("lose", 4)')
    assert "error" not in armed, armed

    def send(text):
        page.get_by_test_id("prompt-input").fill(text)
        page.get_by_test_id("prompt-input").press("Enter")

    send("hello there")
    failed = page.locator(".msg-failed")
    expect(failed).to_have_count(1, timeout=60_000)
    expect(failed.get_by_test_id("stats")).to_contain_text("GPU was reset")
    partial = failed.get_by_test_id("assistant-message").inner_text()
    banner = page.get_by_test_id("error-banner")
    expect(banner).to_contain_text("The GPU was reset")
    expect(banner).to_contain_text("The model was reloaded", timeout=120_000)
    page.wait_for_selector("body[data-phase=ready]")

    send("are you back?")
    expect(page.get_by_test_id("stats")).to_have_count(4, timeout=180_000)
    expect(page.get_by_test_id("stats").last).to_contain_text("tok/s", timeout=180_000)
    users = page.locator(".msg-user .bubble").all_inner_texts()
    assert users == ["hello there", "and again", "hello there", "are you back?"], users
    assert failed.get_by_test_id("assistant-message").inner_text() == partial
    assert page.get_by_test_id("assistant-message").count() == 4 and failed.count() == 1
    assert page.evaluate("window.__sameDocument") == 42  # no reload
    assert page.evaluate(TEST_EXEC, MODEL_FETCHES)["result"] == fetched  # the weights came from the store
    seen = check_protocol(traffic[start:])
    assert seen.get("device_lost") == 2 and seen["test_exec"] == 3, seen
    story = [
        (data["type"], data.get("kind") or data.get("status"))
        for to, data in traffic[start:]
        if to == "page" and data["type"] in ("loaded", "response", "error", "device_lost")
    ]
    assert story == [
        ("error", "device-lost"),  # the answer on the lost device
        ("device_lost", "reloading"),
        ("loaded", None),  # the same load again, on a new device
        ("device_lost", "reloaded"),
        ("response", None),
    ], story
