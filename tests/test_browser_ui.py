"""The chat page with the real worker and engine, in headless Chromium (SwiftShader).

A tiny random model with a made-up byte-level tokenizer (test_chat.py) stands in for a real one:
its answers are noise, but they stream fast enough on SwiftShader to drive the whole flow — load,
type, watch the answer grow, Stop mid-answer, ask again — and to save a screenshot."""

import shutil

import pytest
from browser_harness import ROOT, app_server, launch
from test_chat import FIXTURE, write_tiny_tokenizer

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser
ARTIFACTS = ROOT / "tests" / "artifacts"


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
        context.close()
