"""The public Python API (py_engine.load, Model, Wisp) on the desktop host (lavapipe here): the tokens of
transformers' greedy reference through `complete`, streams that equal their whole answers, a stream left by
`break` or an exception leaves the model ready, two tasks served in order, embeddings, OpenAI's objects
through the Wisp client, and typed errors for what a user can get wrong."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest

import py_engine as wisp
from py_engine.api.request_error import RequestError

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA = FIXTURES / "llama-f32"  # no tokenizer: token-id prompts; reference.json is transformers' greedy ids
SMOLVLM = FIXTURES / "smolvlm-f32"  # a tokenizer and a chat template (its text side is Llama's)
GEMMA_EMBED = FIXTURES / "embed_gemma"


def run(coroutine):
    return asyncio.run(coroutine)


@pytest.fixture(scope="module")
def reference():
    return json.loads((LLAMA / "reference.json").read_text())


def test_complete_gives_transformers_greedy_ids(reference):
    async def go():
        model = await wisp.load(LLAMA, context=128, precision="exact")
        assert (model.id, model.kind, model.context, model.precision) == ("llama-f32", "chat", 128, "exact")
        answer = await model.complete(reference["prompt_ids"], max_tokens=len(reference["greedy"]))
        pieces = [piece async for piece in model.generate(reference["prompt_ids"], max_tokens=4)]
        return answer, pieces

    answer, pieces = run(go())
    assert answer.token_ids == reference["greedy"]
    assert answer.finish_reason == "length" and answer.completion_tokens == len(reference["greedy"])
    assert answer.prompt_tokens == len(reference["prompt_ids"]) and answer.text == ""
    assert pieces == []  # no tokenizer: ids only


def test_streams_equal_whole_answers_and_leaving_early_leaves_the_model_ready():
    async def go():
        model = await wisp.load(str(SMOLVLM), context=256, precision="exact")
        whole = await model.complete("Hello world", max_tokens=8)
        streamed = "".join([piece async for piece in model.generate("Hello world", max_tokens=8)])
        async for _ in model.generate("Hello world", max_tokens=40):
            break  # left at the first piece: closed by asyncio, the answer ends at its next token
        after_break = await model.complete("Hello world", max_tokens=8)
        with pytest.raises(ZeroDivisionError):
            async for _ in model.chat("Hi", max_tokens=40):
                raise ZeroDivisionError
        reply = await model.reply([{"role": "user", "content": "Hi"}], max_tokens=6)
        streamed_reply = "".join([piece async for piece in model.chat("Hi", max_tokens=6)])
        return whole, streamed, after_break, reply, streamed_reply

    whole, streamed, after_break, reply, streamed_reply = run(go())
    assert whole.text == streamed and len(whole.token_ids) == 8
    assert after_break.token_ids == whole.token_ids  # the prompt cache was left consistent
    assert reply.text == streamed_reply and reply.completion_tokens == 6


def test_a_second_call_waits_its_turn_and_a_nested_one_is_refused():
    async def go():
        model = await wisp.load(SMOLVLM, context=256, precision="exact")
        alone = [(await model.complete(p, max_tokens=6)).token_ids for p in ("one two", "three four")]
        together = await asyncio.gather(*(model.complete(p, max_tokens=6) for p in ("one two", "three four")))
        with pytest.raises(wisp.WispError, match="still streaming in this task"):
            async for _ in model.generate("one two", max_tokens=6):
                await model.complete("nested", max_tokens=2)
        return alone, [a.token_ids for a in together]

    alone, together = run(go())
    assert together == alone


def test_embed_gives_unit_vectors_as_the_embeddings_object():
    async def go():
        model = await wisp.load(GEMMA_EMBED)
        vectors = await model.embed(["a sentence", "another one"])
        one = await model.embed("a sentence")
        response = await model.embeddings(input=["a sentence"], encoding_format="float")
        with pytest.raises(wisp.WispError, match="embedding model"):
            await model.complete("no", max_tokens=2)
        return model, vectors, one, response

    model, vectors, one, response = run(go())
    assert model.kind == "embedding" and len(vectors) == 2
    assert all(abs(math.hypot(*v) - 1) < 1e-4 for v in vectors)
    assert one[0] == response["data"][0]["embedding"]
    assert max(abs(a - b) for a, b in zip(one[0], vectors[0])) < 1e-6  # alone or in a batch


def test_the_wisp_client_speaks_openai_objects():
    async def go():
        client = wisp.Wisp(context=256, precision="exact")
        body = {"model": str(SMOLVLM), "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5}
        whole = await client.chat.completions.create(**body, temperature=0)
        stream = await client.chat.completions.create(**body, temperature=0, stream=True)
        chunks = [chunk async for chunk in stream]
        text = await client.completions.create(model=str(SMOLVLM), prompt="Hello", max_tokens=3, temperature=0)
        listed = await client.models.list()
        return whole, chunks, text, listed

    whole, chunks, text, listed = run(go())
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert whole["object"] == "chat.completion" and whole["choices"][0]["message"]["content"] == content
    assert whole["usage"]["completion_tokens"] == 5 and chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert text["object"] == "text_completion" and text["usage"]["completion_tokens"] == 3
    assert [m["id"] for m in listed["data"]] == [str(SMOLVLM)]


def test_bad_input_is_a_typed_error(tmp_path):
    async def go():
        with pytest.raises(wisp.WispError, match="not found"):
            await wisp.load(tmp_path / "missing")
        model = await wisp.load(SMOLVLM, context=64, precision="exact")
        with pytest.raises(RequestError, match="temperature"):
            await model.complete("x", temperature=5)
        with pytest.raises(RequestError, match="context holds 64"):
            await model.complete("word " * 100)
        with pytest.raises(wisp.WispError, match="loaded with precision 'exact'"):
            await model.chat_completion(messages=[{"role": "user", "content": "x"}], precision="fast")
        with pytest.raises(wisp.WispError, match="not an embedding model"):
            await model.embed("x")

    run(go())


def test_the_package_says_its_version_and_api():
    assert wisp.__version__ != "0+unknown"  # installed (make install: pip install -e)
    assert {"load", "Model", "Answer", "Wisp", "WispError"} <= set(wisp.__all__)
    for name in ("load", "Model", "Wisp"):
        assert getattr(wisp, name).__doc__, name  # what a notebook's completion shows
