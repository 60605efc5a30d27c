"""The whole engine in headless Chromium: our server, the module worker, Pyodide, WebGPU (SwiftShader).

Models are loaded and run through static/client.js exactly as the page does. Same tokens
everywhere: the browser's greedy tokens must equal the desktop engine's (the tiny fixture's
reference greedy tokens, which the desktop parity tests match; SmolLM2's 8 greedy tokens for the
README's question). SwiftShader has no shader-f16, so this is the f32 path."""

import json

import pytest
from browser_harness import ROOT, app_server, check_protocol, launch, record_protocol

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
def traffic():
    """Everything the page and the real worker say to each other in this module."""
    return []


@pytest.fixture(scope="module")
def page(server, tmp_path_factory, traffic):
    with playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path_factory.mktemp("chromium"))
        traffic.extend([record_protocol(context)])
        page = context.new_page()
        page.goto(server + "/")
        yield page
        context.close()


def test_tiny_fixture_greedy_tokens_match_desktop(page):
    ref = json.loads((FIXTURES / "llama-f32" / "reference.json").read_text())
    result = page.evaluate(
        RUN,
        {
            "modelId": "llama-f32",
            "context": 64,
            "request": {"ids": ref["prompt_ids"], "sampling": {"temperature": 0, "max_new_tokens": len(ref["greedy"])}},
        },
    )
    assert result["tokens"] == ref["greedy"]
    assert result["done"]["stop"] == "length"


def test_smollm2_answers_paris_like_the_desktop(page):
    result = page.evaluate(
        RUN,
        {
            "modelId": "smollm2-135m-instruct",
            "context": 256,
            "request": {
                "messages": [{"role": "user", "content": "What is the capital of France?"}],
                "sampling": {"temperature": 0, "max_new_tokens": 8},
            },
        },
    )
    assert result["done"]["tokens"] == DESKTOP_PARIS and result["done"]["stop"] == "eos"
    assert "Paris" in result["text"]
    # The weights (98 MB) went from fetch to the GPU in JavaScript, never through wasm memory.
    assert result["loaded"]["wasm_memory_bytes"] < 0.6 * 98e6, result["loaded"]["wasm_memory_bytes"]


def test_a_malformed_message_gets_a_protocol_error(page):
    """Through the real worker (Pyodide's conversion of JS values included): a load whose model has
    no files, and a generate with a null prompt, each answered by an `error` of kind "protocol"."""
    errors = page.evaluate("""async () => {
      const {WispClient} = await import("/static/client.js");
      const client = new WispClient().start();
      const errors = [];
      const got = new Promise((resolve) => client.addEventListener("error", (ev) => {
        errors.push({id: ev.detail.id, kind: ev.detail.kind, message: ev.detail.message});
        if (errors.length === 2) resolve();
      }));
      client.worker.postMessage({type: "load", id: "bad-load", model: {id: "x", kind: "gguf", base: "/models/x/"}});
      client.worker.postMessage({type: "generate", id: "bad-gen", prompt: null, sampling: {temperature: "hot"}});
      await got;
      client.terminate();
      return errors;
    }""")
    assert [(e["id"], e["kind"]) for e in errors] == [("bad-load", "protocol"), ("bad-gen", "protocol")], errors
    assert "load.model" in errors[0]["message"] and "'files' is missing" in errors[0]["message"]
    assert "generate" in errors[1]["message"]


def test_traffic_fits_the_protocol_table(traffic):
    """Every message client.js sent and every event the real worker emitted in this module fits
    py_engine/web/protocol.py's table (but the two malformed on purpose above)."""
    on_purpose = {"bad-load", "bad-gen"}
    seen = check_protocol([(to, data) for to, data in traffic[0] if not (to == "worker" and data["id"] in on_purpose)])
    assert {"load", "generate", "booted", "progress", "loaded", "token", "done", "error"} <= set(seen), seen
