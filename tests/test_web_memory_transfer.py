"""The page's memory export and import (py_engine/web/memory_transfer.py: memory_export, memory_import)
under CPython, the OPFS files held in memory (MemoryFile), the embedder the bag-of-words stand-in: an
export streams out in parts of whole lines, identical to the desktop's (memory/transfer.py); imported
in batches (each batch one append), it lists and recalls as the original, with no GPU work where the
index is not built; an import again skips what is there; a malformed line is one error naming the file
and line, the documents before it kept, its own not half-stored; another model's export is embedded
again with progress; a full disk mid-batch or a quota too small stores nothing of the batch."""

import contextlib
import json

import pytest
from test_web_memory import MODEL, send, worker

from py_engine.errors import StorageQuotaError
from py_engine.memory.transfer import _f32, export_lines
from py_engine.web import memory as web_memory
from py_engine.web import memory_transfer

TEXTS = {
    "cats.md": "Cats sleep most of the day. A cat purrs when content and kneads soft blankets.",
    "rivers.txt": "The river floods each spring. Boats wait in the harbour until the water falls.",
    "stars.txt": "Stars burn hydrogen into helium. Their light takes years to reach us.",
}


class MemoryFile:
    """An OPFS sync access handle's operations over bytes in memory; `fail_after`: the bytes a write
    lands before the disk is full (OpfsFile raises the quota's error typed)."""

    def __init__(self):
        self.data, self.writes, self.fail_after = bytearray(), 0, None

    def size(self):
        return len(self.data)

    def read(self, at, n):
        return bytes(self.data[at : at + n])

    def write(self, at, data):
        self.writes += 1
        landed = data if self.fail_after is None else data[: self.fail_after]
        self.data[len(self.data) :] = bytes(max(0, at - len(self.data)))
        self.data[at : at + len(landed)] = landed
        if self.fail_after is not None:
            raise StorageQuotaError("Storage is full")

    def truncate(self, n):
        del self.data[n:]

    def flush(self):
        pass


@pytest.fixture
def disk(monkeypatch):
    """The origin's OPFS in memory: collection name -> its two files; `room` the quota's bytes left."""
    space = {"room": 10**9}

    @contextlib.asynccontextmanager
    async def opened(collection):
        yield space.setdefault(collection, [MemoryFile(), MemoryFile()])

    async def room():
        return 1000, 1000 + space["room"], space["room"]

    monkeypatch.setattr(web_memory, "opened", opened)
    monkeypatch.setattr(web_memory, "room", room)
    return space


def filled():
    state = worker()
    for name, text in TEXTS.items():
        send(state, "memory_add", name=name, text=text, metadata={"name": name})
    return state


def exported(state, collection="documents") -> str:
    *parts, done = send(state, "memory_export", collection=collection)
    assert done["type"] == "memory" and all(p["type"] == "memory_lines" for p in parts)
    return "".join(p["text"] for p in parts)


def import_(state, text, collection="copy", batch=2, name="backup.jsonl") -> list[dict]:
    """The page's way: the header line with each batch of the lines after it."""
    header, *lines = text.splitlines()
    events = []
    for at in range(0, len(lines), batch):
        events += send(
            state,
            "memory_import",
            collection=collection,
            header=header,
            lines=lines[at : at + batch],
            line=at + 2,
            name=name,
        )
    return events


def sources(state, collection):
    return [d["source"] for d in send(state, "memory_list", collection=collection)[-1]["documents"]]


def test_an_export_streams_out_and_imports_in_batches(disk, monkeypatch):
    state = filled()
    monkeypatch.setattr(memory_transfer, "PART_CHARS", 10)  # a part a document
    *parts, done = send(state, "memory_export")
    assert done["exported"] == 3 and [(p["done"], p["total"]) for p in parts] == [(1, 3), (2, 3), (3, 3)]
    assert all(p["text"].endswith("\n") for p in parts)
    text = "".join(p["text"] for p in parts)
    assert text == export_lines(state.memory.shelves["documents"].collection, MODEL["id"])  # the desktop's lines

    answers = import_(state, text)
    assert [(a["imported"], a["skipped"]) for a in answers] == [(2, 0), (1, 0)]
    files = disk["copy"]
    assert files[0].writes == 1 + 2  # the header, then one append a batch
    assert state.memory.shelves["copy"].collection is None  # nothing built on the GPU for it
    assert sources(state, "copy") == list(TEXTS)
    query = "why does a cat purr"
    [theirs] = send(state, "memory_recall", collection="copy", query=query, k=2)
    [ours] = send(state, "memory_recall", query=query, k=2)
    assert theirs["hits"] == ours["hits"] and theirs["hits"][0]["source"] == "cats.md"
    assert [(a["imported"], a["skipped"]) for a in import_(state, text, batch=5)] == [(0, 3)]
    assert exported(worker(), "copy") == text  # a reload reads the same records back

    gone = send(state, "memory_list")[-1]["documents"][0]["id"]
    send(state, "memory_delete", document=gone)  # into the collection whose index is built: it takes them too
    assert [a["imported"] for a in import_(state, text, collection="documents", batch=5)] == [1]
    [hits] = send(state, "memory_recall", query=query, k=1)
    assert hits["hits"][0]["source"] == "cats.md"


def test_a_malformed_line_is_named_and_nothing_half_stored(disk):
    header, *lines = exported(filled()).splitlines()
    state = worker()
    broken = lines[1].replace('"passages": [[0', '"passages": [[0, 1, 2, "t", 3, "AAAAAA==", ""], [0')  # a short vector
    cases = [
        ([lines[0], "{not json", lines[2]], "backup.jsonl: line 3: not JSON", 1),
        ([broken, lines[2]], "backup.jsonl: line 2: a vector of 1 values where the export has 256", 0),
        (
            [lines[2], '{"id": 7, "source": "x", "metadata": {}, "chars": 1, "passages": []}'],
            "line 3: not a document",
            1,
        ),
    ]
    for batch, message, kept in cases:
        before = sources(state, "copy") if "copy" in disk else []
        [error] = send(
            state, "memory_import", collection="copy", header=header, lines=batch, line=2, name="backup.jsonl"
        )
        assert error["kind"] == "memory" and message in error["message"], error
        assert len(sources(state, "copy")) == len(before) + kept
    assert sources(worker(), "copy") == ["cats.md", "stars.txt"]  # what a reload reads: whole documents only
    [error] = send(
        state, "memory_import", collection="copy", header='{"format": "x"}', lines=[], line=2, name="b.jsonl"
    )
    assert error["message"] == "b.jsonl: its first line: not a wisp-memory export of version 1"


def test_another_models_export_is_embedded_again(disk):
    header = json.dumps({"format": "wisp-memory", "version": 1, "model": "elsewhere", "dimensions": 3})
    docs = [
        {"id": f"doc-{n}", "source": name, "metadata": {}, "chars": len(text), "passages": []}
        for n, (name, text) in enumerate(TEXTS.items())
    ]
    for doc, text in zip(docs, TEXTS.values()):
        doc["passages"] = [[0, 0, len(text), text, 12, _f32([0.5, 0.5, 0.5]), ""]]
    state = worker()
    events = send(state, "memory_import", header=header, lines=[json.dumps(d) for d in docs], line=2, name="old.jsonl")
    steps, done = events[:-1], events[-1]
    assert [(s["phase"], s["done"], s["total"]) for s in steps] == [("embed", 0, 0), ("embed", 3, 3)]
    assert done["imported"] == 3 and steps[0]["file"] == "old.jsonl"
    [hits] = send(state, "memory_recall", query="hydrogen and helium in stars", k=1)
    assert hits["hits"][0]["source"] == "stars.txt"
    stored = state.memory.shelves["documents"].store.documents()
    assert {len(p.vector) for d in stored for p in d.passages} == {256}


def test_a_batch_that_does_not_fit_stores_nothing(disk):
    text = exported(filled())
    state = worker()
    header, *lines = text.splitlines()
    send(state, "memory_import", collection="copy", header=header, lines=lines[:1], line=2)
    disk["copy"][0].fail_after = 100  # the disk fills mid-append
    [error] = send(state, "memory_import", collection="copy", header=header, lines=lines[1:], line=3)
    assert error["kind"] == "quota"
    disk["copy"][0].fail_after = None
    assert sources(worker(), "copy") == list(TEXTS)[:1]  # the cut append is gone: the state before it
    disk["room"] = 10
    [error] = send(state, "memory_import", collection="copy", header=header, lines=lines[1:], line=3)
    assert error["kind"] == "quota" and "Not enough storage for 2 documents" in error["message"]
    assert sources(worker(), "copy") == list(TEXTS)[:1]
