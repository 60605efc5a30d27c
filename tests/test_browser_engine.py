"""The whole engine in headless Chromium: our server, the module worker, Pyodide, WebGPU (SwiftShader).

Models are loaded and run through static/client.js exactly as the page does. Same tokens
everywhere: the browser's greedy tokens must equal the desktop engine's (the tiny fixture's
reference greedy tokens, which the desktop parity tests match; SmolLM2's 8 greedy tokens for the
README's question). SwiftShader has no shader-f16, so this is the f32 path."""
import json

import pytest

from browser_harness import ROOT, app_server, launch

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

FIXTURES = ROOT / "tests" / "fixtures"
DESKTOP_PARIS = [504, 3575, 282, 4649, 314, 7042, 30, 2]  # SmolLM2, greedy, desktop (test_real_models)

RUN = """async ({modelId, request, context}) => {
  const {WispClient, fetchModels, modelRef} = await import("/static/client.js");
  const model = (await fetchModels()).find((m) => m.id === modelId);
  const client = new WispClient();
  const loaded = await client.load(modelRef(model), {context});
  const generation = client.generate(request);
  const tokens = [];
  let text = "";
  for await (const t of generation) { if (t.token_id >= 0) tokens.push(t.token_id); text += t.text; }
  const done = await generation.done;
  client.terminate();
  return {loaded, tokens, text, done};
}"""


@pytest.fixture(scope="module")
def server():
    from py_engine.model_cache import ensure_model

    ensure_model("smollm2-135m-instruct")
    with app_server("--model", str(FIXTURES / "llama-f32")) as (url, _):
        yield url


@pytest.fixture(scope="module")
def page(server, tmp_path_factory):
    with playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path_factory.mktemp("chromium"))
        page = context.new_page()
        page.goto(server + "/")
        yield page
        context.close()


def test_tiny_fixture_greedy_tokens_match_desktop(page):
    ref = json.loads((FIXTURES / "llama-f32" / "reference.json").read_text())
    result = page.evaluate(RUN, {"modelId": "llama-f32", "context": 64, "request": {
        "ids": ref["prompt_ids"], "sampling": {"temperature": 0, "max_new_tokens": len(ref["greedy"])}}})
    assert result["tokens"] == ref["greedy"]
    assert result["done"]["stop"] == "length"


def test_smollm2_answers_paris_like_the_desktop(page):
    result = page.evaluate(RUN, {"modelId": "smollm2-135m-instruct", "context": 256, "request": {
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "sampling": {"temperature": 0, "max_new_tokens": 8}}})
    assert result["done"]["tokens"] == DESKTOP_PARIS and result["done"]["stop"] == "eos"
    assert "Paris" in result["text"]
    # The weights (98 MB) went from fetch to the GPU in JavaScript, never through wasm memory.
    assert result["loaded"]["wasm_memory_bytes"] < 0.6 * 98e6, result["loaded"]["wasm_memory_bytes"]
