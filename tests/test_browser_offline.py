"""Installed and offline: the default model, loaded once, answers again with no server at all.

The first visit installs the service worker (app shell, worker, Pyodide, wheels) and the load
streams SmolLM2 into the weight store. Then the server is stopped and the context goes offline;
a reload must boot everything from the service worker and the store and give the same greedy
tokens (SwiftShader: a few minutes, ~30 s of them per decoded token, so 4 tokens). The online
answer is also the page's check of the default model on the f32 path: the desktop engine's first
greedy tokens for the README's question, its weights never in wasm memory (the iPad test checks all
8 tokens, "Paris" among them, on the WebKit path)."""

import pytest
from browser_harness import app_server, launch
from test_browser_engine import DESKTOP_PARIS, RUN

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

SW_READY = """async () => {
  const registration = await navigator.serviceWorker.ready;
  return !!registration.active;
}"""
QUESTION = {
    "messages": [{"role": "user", "content": "What is the capital of France?"}],
    "sampling": {"temperature": 0, "max_new_tokens": 4},
}


# Each load + answer takes 2-3 minutes on SwiftShader; a stall fails the test with the page's last
# messages instead of holding CI until its limit.
RUN_LIMIT_S = 600
RUN_WITHIN = f"""async (args) => Promise.race([({RUN})(args), new Promise((_, reject) =>
  setTimeout(() => reject(new Error("no answer within {RUN_LIMIT_S} s")), {RUN_LIMIT_S * 1000}))])"""


def test_offline_reload_gives_the_same_tokens(tmp_path):
    from py_engine.model_cache import ensure_model

    ensure_model("smollm2-135m-instruct")
    console = []
    with app_server() as (url, server), playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path / "profile")
        context.on("console", lambda m: console.append(f"{m.type}: {m.text[:300]}"))
        page = context.new_page()
        page.goto(url)
        assert page.evaluate(SW_READY)
        page.reload()  # now controlled by the service worker
        args = {"modelId": "smollm2-135m-instruct", "context": 256, "request": QUESTION}
        try:
            online = page.evaluate(RUN_WITHIN, args)
            server.terminate()
            server.wait(10)
            context.set_offline(True)
            page.reload()
            offline = page.evaluate(RUN_WITHIN, args)
        except playwright_api.Error as exc:
            raise AssertionError(f"{exc.message}; the page's last messages:\n" + "\n".join(console[-30:])) from None
        context.close()
    assert online["done"]["tokens"] == DESKTOP_PARIS[:4]
    # The weights (98 MB) went from fetch to the GPU in JavaScript, never through wasm memory.
    assert online["loaded"]["wasm_memory_bytes"] < 0.6 * 98e6, online["loaded"]["wasm_memory_bytes"]
    assert offline["done"]["tokens"] == online["done"]["tokens"]
