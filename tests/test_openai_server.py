"""OpenAI's API on the desktop: `python -m app` as users start it, driven by the real `openai`
package (its streaming and errors included), on this machine's GPU (lavapipe in CI). SmolLM2
answers the chat and JSON-schema requests, all-MiniLM-L6-v2 the embeddings (against
sentence-transformers' vectors, tests/fixtures/embed_minilm); a tiny random model with a made-up tokenizer answers
a forced tool call and the conversation that feeds its result back (its words are noise, the
shapes are what is checked; its context is 256 tokens, so its template names the tools only)."""

import base64
import contextlib
import functools
import http.server
import json
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from server_harness import app_server
from test_chat import write_tiny_tokenizer

from py_engine.model_cache import ensure_model

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
pytestmark = pytest.mark.slow

SMOL = "smollm2-135m-instruct.q4_1"
TINY = "tiny-tools"
MINILM = "all-minilm-l6-v2"
REFERENCE = Path(__file__).parent / "fixtures" / "embed_minilm" / "embedding_reference.json"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
VLM = Path(__file__).parent / "fixtures" / "smolvlm-f32"  # served as "smolvlm-f32"
GEMMA3VL = Path(__file__).parent / "fixtures" / "gemma3vl-f32"  # served as "gemma3vl-f32"
QWEN35VL = Path(__file__).parent / "fixtures" / "qwen3_5vl-f32"  # served as "qwen3_5vl-f32"
TOOL_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n<tools>{% for t in tools %}{{ t.function.name }}{% endfor %}</tools>"
    "<|im_end|>\n{% endif %}{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.tool_calls %}"
    "{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}"
    "{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Paris", "Oslo"]}, "celsius": {"type": "boolean"}},
            "required": ["city", "celsius"],
            "additionalProperties": False,
        },
    },
}


def tiny_tool_model(directory: Path) -> Path:
    """test_chat's tiny random qwen3 with its made-up tokenizer, and a chat template that takes tools."""
    from test_chat import FIXTURE

    tiny = directory / TINY
    shutil.copytree(FIXTURE, tiny)
    write_tiny_tokenizer(tiny)
    config = json.loads((tiny / "tokenizer_config.json").read_text())
    (tiny / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": TOOL_TEMPLATE}))
    return tiny


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    tiny = tiny_tool_model(tmp_path_factory.mktemp("api"))
    smol, minilm = ensure_model("smollm2-135m-instruct"), ensure_model(MINILM)
    # exact: the answers below are SmolLM2's greedy tokens as the reference tests know them
    models = [str(smol), str(tiny), str(minilm), str(VLM), str(GEMMA3VL), str(QWEN35VL)]
    with app_server("--no-default", "--precision", "exact", "--model", *models) as (url, _):
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)


def test_models_are_listed(client):
    assert {m.id for m in client.models.list()} == {SMOL, TINY, MINILM, VLM.name, GEMMA3VL.name, QWEN35VL.name}


def test_a_streamed_answer_and_one_cut_by_a_stop_string(client):
    stream = client.chat.completions.create(
        model=SMOL, messages=QUESTION, temperature=0, max_tokens=8, stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[0].choices[0].delta.role == "assistant" and "Paris" in text
    assert chunks[-2].choices[0].finish_reason == "stop" and chunks[-1].usage.completion_tokens == 7  # and <|im_end|>
    whole = client.chat.completions.create(model=SMOL, messages=QUESTION, temperature=0, max_tokens=8, stop=["Paris"])
    cut = whole.choices[0].message.content
    assert text.startswith(cut) and "Paris" not in cut and whole.choices[0].finish_reason == "stop"
    assert whole.usage.prompt_tokens == chunks[-1].usage.prompt_tokens


def test_a_json_schema_answer_validates(client):
    schema = {
        "type": "object",
        "properties": {"capital": {"type": "string", "maxLength": 20}},
        "required": ["capital"],
        "additionalProperties": False,
    }
    stream = client.chat.completions.create(
        model=SMOL,
        messages=QUESTION,
        temperature=0,
        max_tokens=40,
        stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": schema, "strict": True}},
    )
    chunks = list(stream)
    answer = json.loads("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
    jsonschema.validate(answer, schema)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_forced_tool_call_and_its_result(client):
    messages = [{"role": "user", "content": "weather?"}]
    first = client.chat.completions.create(
        model=TINY, messages=messages, tools=[WEATHER], tool_choice="required", temperature=0.8, seed=3, max_tokens=400
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "18"},
    ]
    final = client.chat.completions.create(model=TINY, messages=messages, tools=[WEATHER], temperature=0, max_tokens=4)
    assert final.usage.prompt_tokens > first.usage.prompt_tokens  # the call and its result went back in


def test_errors_are_openais(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=QUESTION)
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=SMOL, messages=QUESTION, n=2)
    assert "'n'" in str(caught.value)
    with pytest.raises(openai.BadRequestError, match="does not take tools"):
        client.chat.completions.create(model=SMOL, messages=QUESTION, tools=[WEATHER])


def test_embeddings_match_sentence_transformers(client):
    ref = json.loads(REFERENCE.read_text())
    want = np.array([np.frombuffer(base64.b64decode(v), "<f4") for v in ref["vectors_f32"]])
    response = client.embeddings.create(model=MINILM, input=ref["sentences"])  # the client asks for base64
    got = np.array([item.embedding for item in response.data])
    assert [item.index for item in response.data] == list(range(len(want)))
    assert (got * want).sum(1).min() >= 0.999  # both are unit vectors
    assert response.usage.prompt_tokens == sum(map(len, ref["input_ids"]))
    one = client.embeddings.create(model=MINILM, input=ref["sentences"][0], encoding_format="float")
    assert np.allclose(one.data[0].embedding, got[0], atol=1e-6)
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        client.embeddings.create(model=MINILM, input="x", dimensions=64)


@contextlib.contextmanager
def picture_server(folder: Path):
    """A plain HTTP server on loopback serving folder's files (the pictures a URL names)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.mark.parametrize("folder", [VLM, GEMMA3VL, QWEN35VL], ids=["smolvlm", "gemma3", "qwen3_5"])
def test_pictures_by_data_url_and_by_http_url(client, folder):
    """The two-picture fixture prompt: one picture as a data: URL, one fetched by the server;
    transformers' 16 greedy tokens, decoded."""
    from py_engine.tokenizer import Tokenizer

    ref = json.loads((folder / "reference.json").read_text())
    prompt = ref["prompts"]["two_images"]
    files = [ref["images"][i]["file"] for i in prompt["images"]]
    with picture_server(folder) as base:
        urls = iter([urls_of(folder, files[0]), f"{base}/{files[1]}"])
        content = [
            {"type": "image_url", "image_url": {"url": next(urls)}} if part["type"] == "image" else part
            for part in prompt["messages"][0]["content"]
        ]
        answer = client.chat.completions.create(
            model=folder.name, messages=[{"role": "user", "content": content}], temperature=0, max_tokens=16
        )
    want = Tokenizer.from_model_dir(folder).decode(prompt["greedy"], skip_special_tokens=True)
    assert answer.choices[0].message.content == want
    assert answer.usage.prompt_tokens == len(prompt["input_ids"])


def test_pictures_a_model_cannot_take(client):
    ref = json.loads((VLM / "reference.json").read_text())
    files = [ref["images"][i]["file"] for i in ref["prompts"]["two_images"]["images"]]
    picture = [{"type": "image_url", "image_url": {"url": urls_of(VLM, files[0])}}, {"type": "text", "text": "hi"}]
    with pytest.raises(openai.BadRequestError, match="text-only"):
        client.chat.completions.create(model=SMOL, messages=[{"role": "user", "content": picture}])
    missing = [
        {"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/none.png"}},
        {"type": "text", "text": "hi"},
    ]
    with pytest.raises(openai.BadRequestError, match="could not be fetched"):
        client.chat.completions.create(model="smolvlm-f32", messages=[{"role": "user", "content": missing}])


def urls_of(folder: Path, name: str) -> str:
    return "data:image/png;base64," + base64.b64encode((folder / name).read_bytes()).decode()
