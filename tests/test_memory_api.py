"""py_engine/api/memory.py: the chat request's `memory` field, checked; the recalled passages put
before the conversation (into its system message where it has one); the citations."""

import pytest

from py_engine.api.memory import MemoryOptions, citations, last_user_text, parse_memory, with_passages
from py_engine.api.request import RequestError, parse_chat
from py_engine.memory.collection import Recalled

HIT = Recalled("The train leaves at 22:15.", 0.8, "d1", "trains.txt", 10, 36, 8, {})


def test_memory_field():
    assert parse_memory(None) is None and parse_memory("notes") == MemoryOptions("notes")
    got = parse_memory({"collection": "a-1", "k": 3, "token_budget": 64, "filter": {"kind": "pdf"}})
    assert got == MemoryOptions("a-1", 3, 64, {"kind": "pdf"})
    for bad, param in [
        ({"collection": "../x"}, "memory.collection"),
        ({"collection": "a", "k": 65}, "memory.k"),
        ({"collection": "a", "k": True}, "memory.k"),
        ({"collection": "a", "filter": []}, "memory.filter"),
        ({"collection": "a", "top": 1}, "memory.top"),
        (3, "memory"),
    ]:
        with pytest.raises(RequestError) as caught:
            parse_memory(bad)
        assert caught.value.param == param
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}], "memory": "notes"}
    assert parse_chat(body).memory == MemoryOptions("notes")


def test_passages_go_before_the_conversation():
    parts = [{"type": "text", "text": "When"}, {"type": "image"}, {"type": "text", "text": "does it leave?"}]
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": parts},
    ]
    assert last_user_text(messages) == "When does it leave?"
    added = with_passages(messages, [HIT])
    assert added[0]["role"] == "system" and "[1] (trains.txt)\nThe train leaves at 22:15." in added[0]["content"]
    assert added[1:] == messages
    system = [{"role": "system", "content": "Be brief."}, *messages]
    merged = with_passages(system, [HIT])
    assert merged[0]["content"].startswith("Be brief.\n\n") and len(merged) == len(system)
    assert with_passages(messages, []) == messages
    paged = with_passages(messages, [Recalled("x", 0.5, "d2", "notes.pdf", 0, 1, 1, {}, "page 3")])
    assert "[1] (notes.pdf, page 3)\nx" in paged[0]["content"]
    assert citations("notes", [HIT])["citations"] == [
        {
            "n": 1,
            "source": "trains.txt",
            "place": "",
            "document": "d1",
            "start": 10,
            "end": 36,
            "text": HIT.text,
            "score": 0.8,
        }
    ]
    with pytest.raises(RequestError, match="needs a user message"):
        last_user_text([{"role": "system", "content": "x"}])
