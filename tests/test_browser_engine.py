"""The whole engine in headless Chromium: our server, the module worker, Pyodide, WebGPU (SwiftShader).

Models are loaded and run through static/client.js exactly as the page does. Same tokens
everywhere: the browser's greedy tokens must equal the desktop engine's (the tiny fixture's
reference greedy tokens, which the desktop parity tests match; SmolLM2's greedy tokens for the
README's question: test_browser_offline, which loads it anyway, and the iPad's in
test_browser_webkit). SwiftShader has no shader-f16, so this is the f32 path."""

import json

import pytest
from browser_harness import ROOT, app_server, check_protocol, launch, record_protocol

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.browser

FIXTURES = ROOT / "tests" / "fixtures"
DESKTOP_PARIS = [504, 3575, 282, 4649, 314, 7042, 30, 2]  # SmolLM2, greedy, desktop (test_real_models)
# One fixture per graph family (Llama's decoder, Gemma's, Gemma 2's and 3's four-norm layers, Phi-3's
# fused weights, the hybrids' recurrent layers), bf16 and f16 among them: without shader-f16 those
# weights are read as packed pairs.
TINY = ["llama-f32", "gemma-f32", "gemma2-f32", "gemma3-bf16", "gemma4-bf16", "phi3-f16", "qwen3_5-f32", "lfm2-bf16"]

# The answer's tokens from a generation's stats: every token generated but a final stop id.
ANSWER_TOKENS = "const answerTokens = (done) => done.stop === 'eos' ? done.tokens.slice(0, -1) : done.tokens;"

RUN = (
    """async ({modelId, request, context}) => {
  """
    + ANSWER_TOKENS
    + """
  const {WispClient, fetchModels, modelRef} = await import("/static/client.js");
  const model = (await fetchModels()).find((m) => m.id === modelId);
  const client = new WispClient();
  const loaded = await client.load(modelRef(model), {context, precision: "exact"});  // the desktop references' arithmetic
  const generation = client.generate(request);
  let text = "";
  for await (const t of generation) text += t.text;
  const done = await generation.done;
  client.terminate();
  return {loaded, tokens: answerTokens(done), text, done};
}"""
)


# Converted to GGUF as llama.cpp's converter writes it (tests/gguf_convert.py), served as <name>-gguf.
TINY_GGUF = ["gemma4-f32"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from gguf_convert import convert

    from py_engine.model_cache import ensure_model

    ensure_model("smollm2-135m-instruct")
    ensure_model("gemma-3-270m")
    models = [str(FIXTURES / name) for name in TINY]
    for name in TINY_GGUF:
        written = convert(FIXTURES / name, tmp_path_factory.mktemp(name), quantize=False)
        models.append(str(written.rename(written.with_name(f"{name}-gguf.gguf"))))
    with app_server(*(arg for model in models for arg in ("--model", model))) as (url, _):
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


RUN_EACH = (
    """async ({runs, context}) => {
  """
    + ANSWER_TOKENS
    + """
  const {WispClient, fetchModels, modelRef} = await import("/static/client.js");
  const models = await fetchModels();
  const client = new WispClient();  // one worker: Pyodide boots once for every model
  const results = {};
  for (const [modelId, request] of Object.entries(runs)) {
    await client.load(modelRef(models.find((m) => m.id === modelId)), {context, precision: "exact"});
    const generation = client.generate(request);
    for await (const _ of generation) { /* text pieces */ }
    const done = await generation.done;
    results[modelId] = {tokens: answerTokens(done), done};
  }
  client.terminate();
  return results;
}"""
)


def test_tiny_fixtures_greedy_tokens_match_desktop(page):
    refs = {name: json.loads((FIXTURES / name / "reference.json").read_text()) for name in TINY}
    refs |= {f"{name}-gguf": json.loads((FIXTURES / name / "reference.json").read_text()) for name in TINY_GGUF}
    runs = {
        name: {"ids": ref["prompt_ids"], "sampling": {"temperature": 0, "max_new_tokens": len(ref["greedy"])}}
        for name, ref in refs.items()
    }
    results = page.evaluate(RUN_EACH, {"runs": runs, "context": 64})
    for name, ref in refs.items():
        assert results[name]["tokens"] == ref["greedy"], name
        assert results[name]["done"]["stop"] == "length", name


def test_gemma3_270m_gives_the_desktop_tokens(page):
    """The real Gemma 3 (262k vocabulary: its embedding and tied LM head span bindings) in the
    page: transformers' first greedy token, which the desktop engine matches (test_real_models).
    One token: SwiftShader takes ~80 s to load it, ~130 s for the prompt and ~60 s for each
    further token (the LM head reads 180 MB of Q8_0), so the decode loop is left to SmolLM2."""
    case = json.loads((FIXTURES / "gguf_reference" / "gemma-3-270m.json").read_text())["cases"][0]
    result = page.evaluate(
        RUN,
        {
            "modelId": "gemma-3-270m",
            "context": 64,
            "request": {"ids": case["prompt_ids"], "sampling": {"temperature": 0, "max_new_tokens": 1}},
        },
    )
    assert result["tokens"] == case["greedy"][:1]
    assert result["loaded"]["gpu_bytes"]["weights"] > 240e6  # every weight, in their stored formats


def test_a_malformed_message_gets_a_protocol_error(page):
    """Through the real worker (Pyodide's conversion of JS values included): a load whose model has
    no files, and an openai request with a null body, each answered by an `error` of kind "protocol"."""
    errors = page.evaluate("""async () => {
      const {WispClient} = await import("/static/client.js");
      const client = new WispClient().start();
      const errors = [];
      const got = new Promise((resolve) => client.addEventListener("error", (ev) => {
        errors.push({id: ev.detail.id, kind: ev.detail.kind, message: ev.detail.message});
        if (errors.length === 2) resolve();
      }));
      client.worker.postMessage({type: "load", id: "bad-load", model: {id: "x", kind: "gguf", base: "/models/x/"}});
      client.worker.postMessage({type: "openai", id: "bad-api", endpoint: "chat.completions", body: null});
      await got;
      client.terminate();
      return errors;
    }""")
    assert [(e["id"], e["kind"]) for e in errors] == [("bad-load", "protocol"), ("bad-api", "protocol")], errors
    assert "load.model" in errors[0]["message"] and "'files' is missing" in errors[0]["message"]
    assert "openai.body" in errors[1]["message"]


def test_traffic_fits_the_protocol_table(traffic):
    """Every message client.js sent and every event the real worker emitted in this module fits
    py_engine/web/protocol.py's table (but the two malformed on purpose above)."""
    on_purpose = {"bad-load", "bad-api"}
    seen = check_protocol([(to, data) for to, data in traffic[0] if not (to == "worker" and data["id"] in on_purpose)])
    assert {"load", "openai", "booted", "progress", "loaded", "chunk", "response", "error"} <= set(seen), seen
