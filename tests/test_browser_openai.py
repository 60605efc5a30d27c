"""The page's OpenAI API (static/openai.js) in headless Chromium: the same request bodies as the
desktop's /v1, answered in the module worker by the same Python (py_engine/api/). A tiny random
model with a made-up tokenizer (test_openai_server.py's) streams a chat answer, writes JSON of a
schema, and makes a forced tool call whose result goes back into the conversation; all-MiniLM-L6-v2
embeds the 20 reference sentences as sentence-transformers does. On the chat page, `new Wisp()`
speaks to the page's own worker: the model the chat loaded answers without loading anything again,
and each other request loads the model it names there (the chat follows)."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from browser_harness import app_server, check_protocol, launch, record_protocol
from test_openai_server import MINILM, REFERENCE, TINY, WEATHER, tiny_tool_model

from py_engine.model_cache import ensure_model

GEMMA = Path(__file__).parent / "fixtures" / "embed_gemma"  # tests/test_embedding_gemma.py's
GEMMA_REF = json.loads((GEMMA / "embedding_reference.json").read_text())

playwright_api = pytest.importorskip("playwright.sync_api")
jsonschema = pytest.importorskip("jsonschema")
pytestmark = [pytest.mark.browser, pytest.mark.slow]

PHASES = ["boot", "store", "download", "verify", "upload", "compile"]  # the load's steps, in order
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "size": {"enum": ["S", "M", "L"]}},
    "required": ["ok", "size"],
    "additionalProperties": False,
}

RUN = """async ({tiny, minilm, weather, schema, sentences, gemma}) => {
  const {Wisp} = await import("/static/openai.js");
  const phases = [];
  const wisp = new Wisp({loadOptions: {context: 256}, onProgress: (p) => phases.push(p.phase)});
  const out = {models: (await wisp.models.list()).data.map((m) => m.id)};
  const ask = [{role: "user", content: "hello"}];

  const stream = await wisp.chat.completions.create(
    {model: tiny, messages: ask, stream: true, temperature: 0, max_tokens: 6, stream_options: {include_usage: true}});
  out.chunks = [];
  for await (const chunk of stream) out.chunks.push(chunk);
  out.whole = await wisp.chat.completions.create({model: tiny, messages: ask, temperature: 0, max_tokens: 6});

  out.json = await wisp.chat.completions.create({model: tiny, messages: ask, temperature: 0.8, seed: 1, max_tokens: 200,
    response_format: {type: "json_schema", json_schema: {name: "shirt", schema, strict: true}}});

  out.call = await wisp.chat.completions.create({model: tiny, messages: ask, tools: [weather], tool_choice: "required",
    temperature: 0.8, seed: 3, max_tokens: 200});
  const message = out.call.choices[0].message;
  out.nullContent = message.content === null;  // not undefined: JSON keeps it
  const id = message.tool_calls?.[0]?.id;
  out.answer = await wisp.chat.completions.create({model: tiny, tools: [weather], temperature: 0, max_tokens: 4,
    messages: [...ask, message, {role: "tool", tool_call_id: id, content: "18"}]});

  try { await wisp.chat.completions.create({model: tiny, messages: [], max_tokens: 1}); }
  catch (err) { out.error = {kind: err.kind, message: err.message}; }

  out.embeddings = await wisp.embeddings.create({model: minilm, input: sentences, encoding_format: "float"});
  out.phases = phases.slice();  // the loads' steps until here (EmbeddingGemma's load starts over)
  out.gemma = await wisp.embeddings.create({model: "embed_gemma", input: gemma, encoding_format: "float", dimensions: 256});
  return out;
}"""
# The page's workers of the engine, counted as they start.
COUNT_WORKERS = """(() => {
  const Base = self.Worker;
  self.__engineWorkers = 0;
  self.Worker = class extends Base {
    constructor(url, options) {
      super(url, options);
      if (String(url).includes("/worker/worker.js")) self.__engineWorkers += 1;
    }
  };
})();"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tiny = tiny_tool_model(tmp_path_factory.mktemp("api"))
    models = [str(tiny), str(ensure_model(MINILM)), str(GEMMA)]
    with app_server("--no-default", "--model", *models) as (url, _):
        yield url


def test_the_pages_openai_api(server, tmp_path):
    ref = json.loads(REFERENCE.read_text())
    with playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path / "profile")
        traffic = record_protocol(context)
        context.add_init_script(COUNT_WORKERS)
        page = context.new_page()
        console = []
        page.on("console", lambda message: console.append(message.text))
        page.goto(server + "/")
        label = page.get_by_test_id("load-button").locator(".btn-label")
        page.get_by_test_id("load-button").click()  # the chat loads the tiny model
        playwright_api.expect(label).to_have_text("Loaded", timeout=120_000)
        args = {"tiny": TINY, "minilm": MINILM, "weather": WEATHER, "schema": SCHEMA, "sentences": ref["sentences"]}
        args["gemma"] = GEMMA_REF["texts"]
        out = page.evaluate(RUN, args)
        # The chat follows the worker's model: MiniLM's folder is an embedding model (app/models.py
        # folder_task), which the chat picker does not list, so the chat has no model now.
        playwright_api.expect(label).to_have_text("Load")
        assert page.get_by_test_id("model-select").locator("option").all_text_contents()[0].startswith(TINY)
        assert page.get_by_test_id("model-select").locator("option").count() == 1
        workers = page.evaluate("window.__engineWorkers")
        context.close()
    assert set(out["models"]) == {TINY, MINILM, "embed_gemma"}
    loads = [data["model"]["id"] for to, data in traffic if to == "worker" and data.get("type") == "load"]
    assert workers == 1 and loads == [TINY, MINILM, "embed_gemma"], (
        workers,
        loads,
    )  # Wisp loaded only what the chat had not
    assert out["phases"] == sorted(out["phases"], key=PHASES.index) and "upload" in out["phases"], out["phases"]
    assert not [text for text in console if "before prepare()" in text], console  # the mask's kernel too

    chunks, whole = out["chunks"], out["whole"]
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert chunks[0]["object"] == "chat.completion.chunk" and chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert streamed == whole["choices"][0]["message"]["content"] and streamed
    assert chunks[-1]["usage"] == whole["usage"] and whole["usage"]["completion_tokens"] == 6
    assert whole["choices"][0]["finish_reason"] == "length" and whole["object"] == "chat.completion"

    jsonschema.validate(json.loads(out["json"]["choices"][0]["message"]["content"]), SCHEMA)
    assert out["json"]["choices"][0]["finish_reason"] == "stop"

    call = out["call"]["choices"][0]
    assert call["finish_reason"] == "tool_calls" and call["message"]["content"] is None and out["nullContent"]
    arguments = json.loads(call["message"]["tool_calls"][0]["function"]["arguments"])
    jsonschema.validate(arguments, WEATHER["function"]["parameters"])
    assert out["answer"]["usage"]["prompt_tokens"] > out["call"]["usage"]["prompt_tokens"]
    assert out["error"]["kind"] == "request" and "messages" in out["error"]["message"]

    want = np.array([np.frombuffer(base64.b64decode(v), "<f4") for v in ref["vectors_f32"]])
    got = np.array([item["embedding"] for item in out["embeddings"]["data"]])
    assert (got * want).sum(1).min() >= 0.999  # sentence-transformers' vectors, as on the desktop
    assert out["embeddings"]["usage"]["prompt_tokens"] == sum(map(len, ref["input_ids"]))
    # EmbeddingGemma (its two Dense modules in folders of their own), cut to 256 values
    gemma = GEMMA_REF["runs"]["none/256"]
    want = np.array([np.frombuffer(base64.b64decode(v), "<f4") for v in gemma["vectors_f32"]])
    got = np.array([item["embedding"] for item in out["gemma"]["data"]])
    assert got.shape == want.shape and (got * want).sum(1).min() >= 0.999
    seen = check_protocol(traffic)
    assert {"openai", "chunk", "response"} <= set(seen), seen
