"""The worker protocol's table (py_engine/web/protocol.py) and the worker's answer to a malformed
message: for every message type, each required field missing, each field of a wrong type, an
unknown field, and messages that are not objects at all get one `error` event of kind
"protocol" naming the field — never an exception, and nothing else runs (no JS is reached: these
run under CPython). The browser tests check real traffic against the same table."""

import asyncio
import copy

import pytest

from py_engine.web import protocol
from py_engine.web.protocol import EVENTS, MESSAGES, ProtocolError, check, check_event, check_message
from py_engine.web.state import WorkerState
from py_engine.web.worker import handle

MODEL = {
    "id": "tiny",
    "name": "Tiny",
    "kind": "gguf",
    "base": "/models/tiny/",
    "files": {"tiny.gguf": 1234, "mmproj-tiny.gguf": 567},
    "hashes": {"tiny.gguf": {"sha256": "ab" * 32}, "mmproj-tiny.gguf": {"etag": '"cd"'}},
    "source": "local",  # a model the user brought: its files are File handles (blobs)
    "blobs": {"tiny.gguf": {}, "mmproj-tiny.gguf": {}},
    "mmproj": "mmproj-tiny.gguf",  # llama.cpp's vision projector beside the text GGUF
}
OPTIONS = {
    "context": 512,
    "f32": False,
    "gpu_budget_mb": 900,
    "platform": {"webkit": True, "reason": "iPad"},
    "group": "all",
    "probe": {"group": 64, "reason": "probed", "ceiling": "all"},
}
EMBEDDER = {  # the page's memory's embedding model (static/documents.js picks it from /api/models)
    "id": "all-minilm-l6-v2",
    "name": "all-MiniLM-L6-v2",
    "kind": "hf",
    "base": "/models/all-minilm-l6-v2/",
    "files": {"config.json": 612, "model.safetensors": 90_868_376, "tokenizer.json": 466_247},
    "hashes": {"model.safetensors": {"sha256": "ef" * 32}},
}
VALID = {  # one message of each type with every field the table knows
    "load": {"type": "load", "id": "load-1", "model": MODEL, "options": OPTIONS},
    "openai": {
        "type": "openai",
        "id": "api-8",
        "endpoint": "chat.completions",
        "body": {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "stream": True, "memory": "docs"},
        "embedder": EMBEDDER,
    },
    "cancel": {"type": "cancel", "id": "api-8"},
    "unload": {"type": "unload", "id": 7},
    "store_list": {"type": "store_list", "id": "store-3"},
    "store_remove": {"type": "store_remove", "id": "store-4", "model": "tiny"},
    "store_persist": {"type": "store_persist", "id": "store-5"},
    "store_twin": {"type": "store_twin", "id": "store-9", "model": MODEL},
    "diagnose": {"type": "diagnose", "id": "diagnose-6", "options": OPTIONS},
    "probe": {"type": "probe", "id": "probe-7", "group": 0, "steps": 256},
    "memory_list": {"type": "memory_list", "id": "memory-1", "collection": "documents", "embedder": EMBEDDER},
    "memory_add": {
        "type": "memory_add",
        "id": "memory-2",
        "collection": "documents",
        "embedder": EMBEDDER,
        "name": "notes.pdf",
        "data": {},  # the file's ArrayBuffer (a JS object: any value passes the table)
        "text": "or a text",
        "media_type": "application/pdf",
        "metadata": {"bytes": 1234},
        "options": OPTIONS,
    },
    "memory_delete": {
        "type": "memory_delete",
        "id": "memory-3",
        "collection": "documents",
        "embedder": EMBEDDER,
        "document": "0f" * 16,
    },
    "memory_recall": {
        "type": "memory_recall",
        "id": "memory-4",
        "collection": "documents",
        "embedder": EMBEDDER,
        "query": "When does the train leave?",
        "k": 3,
        "token_budget": 512,
        "filter": {"kind": "pdf"},
        "options": OPTIONS,
    },
    "memory_export": {"type": "memory_export", "id": "memory-5", "collection": "documents", "embedder": EMBEDDER},
    "memory_import": {
        "type": "memory_import",
        "id": "memory-6",
        "collection": "documents",
        "embedder": EMBEDDER,
        "header": '{"format": "wisp-memory", "version": 1, "model": "all-minilm-l6-v2", "dimensions": 384}',
        "lines": ['{"id": "0f", "source": "notes.md", "metadata": {}, "chars": 5, "passages": []}'],
        "line": 2,
        "name": "backup.jsonl",
        "options": OPTIONS,
    },
    "speech_load": {
        "type": "speech_load",
        "id": "speech_load-1",
        "model": EMBEDDER,
        "task": "speech",
        "options": OPTIONS,
    },
    "transcribe": {
        "type": "transcribe",
        "id": "transcribe-2",
        "model": EMBEDDER,
        "audio": {},  # a Float32Array of 16 kHz samples (a JS object: any value passes the table)
        "body": {"model": "whisper-base", "language": "en", "response_format": "verbose_json", "max_tokens": 64},
        "task": "translate",
        "options": OPTIONS,
    },
    "speak": {
        "type": "speak",
        "id": "speak-3",
        "model": EMBEDDER,
        "body": {"model": "kani-tts-2", "input": "Hello there.", "voice": None, "max_frames": 40, "seed": 7},
        "float32": True,
        "options": OPTIONS,
    },
}
NOT_JSON_KINDS = [None, True, 1.5, 7, "x", ["x"], {"x": 1}]


def answer(message) -> list[dict]:
    events = []
    asyncio.run(handle(message, WorkerState(post=events.append)))
    return events


def request_id(message):
    """The id an error answers: the message's own when it is one (a string or a whole number)."""
    request = message.get("id") if isinstance(message, dict) else None
    return request if isinstance(request, (str, int)) and not isinstance(request, bool) else None


def fields(spec, path=()):
    """(path, field spec, required) of every field of a message spec, nested objects included."""
    for name, sub in spec.items():
        key = name.rstrip("?")
        yield path + (key,), sub, not name.endswith("?")
        if isinstance(sub, dict):
            yield from fields(sub, path + (key,))


def wrong_values(spec) -> list:
    """Values of the JSON kinds the spec does not allow."""
    wrong = []
    for value in NOT_JSON_KINDS:
        try:
            check(value, spec, "x")
        except ProtocolError:
            wrong.append(value)
    return wrong


def at(message, path):
    for key in path[:-1]:
        message = message[key]
    return message


def test_every_message_type_has_a_valid_example():
    assert set(VALID) == set(MESSAGES)
    for kind, message in VALID.items():
        assert check_message(message) == kind


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_malformed_messages_are_protocol_errors(kind):
    cases = []
    for path, spec, required in fields(MESSAGES[kind]):
        message = copy.deepcopy(VALID[kind])
        parent = at(message, path)
        if path[-1] not in parent:
            continue  # an optional field inside an optional object the example leaves out
        if required:
            del parent[path[-1]]
            cases.append((message, path))
            message = copy.deepcopy(VALID[kind])
            parent = at(message, path)
        for bad in wrong_values(spec):
            parent[path[-1]] = bad
            cases.append((copy.deepcopy(message), path))
    extra = copy.deepcopy(VALID[kind])
    extra["surplus"] = 1
    cases.append((extra, ("surplus",)))
    assert len(cases) > 2
    for message, path in cases:
        events = answer(message)
        assert len(events) == 1, (message, events)
        error = events[0]
        assert check_event(error) == "error"
        assert error["kind"] == "protocol", error
        assert error["id"] == request_id(message)
        assert path[-1] in error["message"], (path, error["message"])


@pytest.mark.parametrize(
    "message",
    [
        None,
        "load",
        [1, 2],
        {},
        {"type": 3, "id": "a"},
        {"type": "explode", "id": "a"},
        {"type": "generate", "id": "g", "prompt": "a"},  # the protocol's one generation message is openai
    ],
)
def test_messages_that_are_no_known_message(message):
    [error] = answer(message)
    assert error["type"] == "error" and error["kind"] == "protocol"
    assert error["id"] == request_id(message)
    check_event(error)


def test_error_messages_name_the_field_and_the_problem():
    message = copy.deepcopy(VALID["load"])
    message["model"]["files"]["tiny.gguf"] = "big"
    with pytest.raises(ProtocolError, match=r"load\.model\.files\['tiny.gguf'\] must be a whole number, not 'big'"):
        check_message(message)
    with pytest.raises(ProtocolError, match="the field 'base' is missing"):
        check_message({**VALID["load"], "model": {k: v for k, v in MODEL.items() if k != "base"}})
    with pytest.raises(ProtocolError, match="unknown field 'colour'"):
        check_message({**VALID["openai"], "colour": "red"})


STATS = {
    "tokens": [5, 6],
    "prompt_tokens": 3,
    "dropped_exchanges": 0,
    "prefilled_tokens": 3,
    "ttft_ms": 1.5,
    "prefill_tok_s": 2000.0,
    "decode_tok_s": 100.0,
    "host_ms_per_token": 0.5,
    "stop": "eos",
    "command_buffers": 2,
}


def test_events_are_checked_too():
    check_event({"type": "response", "id": "api-1", "body": {}, "stats": STATS})
    check_event({"type": "progress", "id": None, "phase": "boot", "done": 1, "total": 3})
    for bad in (
        {"type": "response", "id": "api-1", "body": {}, "stats": {**STATS, "stop": "tired"}},
        {"type": "response", "id": "api-1", "body": {}, "stats": {k: v for k, v in STATS.items() if k != "tokens"}},
        {"type": "token", "id": "gen-1", "text": "Hi", "token_id": 5, "index": 0},  # the old generate's events
        {"type": "error", "id": None, "kind": "oops", "message": "m"},
    ):
        with pytest.raises(ProtocolError):
            check_event(bad)


def test_the_table_describes_itself():
    """Every spec in the table has a readable description (error messages are made of them)."""
    for table in (MESSAGES, EVENTS, protocol.TEST_HOOK):
        for spec in table.values():
            for _, sub, _ in fields(spec):
                assert protocol.describe(sub)
