"""The worker's memory messages (py_engine/web/memory.py) under CPython: the OPFS files are plain files
here (test_memory_log_store's DiskFile), the embedder the bag-of-words stand-in, the GPU index on the
test device. Adds (a text, a PDF's bytes) narrate themselves and answer with the documents; a bad
document is its DocumentError (kind "document") and the store is left as it was; a recall cites the
PDF's page; a delete holds for the next worker (a reload); another embedding model's collection, a
full disk and a busy GPU are one typed error each. Every event fits protocol.py's table."""

import asyncio
import contextlib
import types

import pytest
from gpu_harness import device
from pdf_writer import document
from test_memory_collection import DIM, BagOfWords
from test_memory_log_store import DiskFile

from py_engine.web import memory as web_memory
from py_engine.web.memory import PageMemory
from py_engine.web.protocol import check_event
from py_engine.web.state import WorkerState
from py_engine.web.worker import handle

MODEL = {
    "id": "bag-of-words",
    "name": "Bag of words",
    "kind": "hf",
    "base": "/models/bow/",
    "files": {"config.json": 2},
}
TRAIN = "The night train to Vienna leaves from platform 4 at 22:15."


class Embedder(BagOfWords):
    dimensions = DIM


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The origin's OPFS as a folder; its `room`: the bytes the quota leaves."""
    space = types.SimpleNamespace(path=tmp_path, room=10**9)

    @contextlib.asynccontextmanager
    async def opened(collection):
        (tmp_path / collection).mkdir(exist_ok=True)
        yield [DiskFile(tmp_path / collection / "a.log"), DiskFile(tmp_path / collection / "b.log")]

    async def room():
        return 1000, 1000 + space.room, space.room

    monkeypatch.setattr(web_memory, "opened", opened)
    monkeypatch.setattr(web_memory, "room", room)
    return space


def worker() -> WorkerState:
    """A worker with the embedder loaded (as after a memory message's first load)."""
    dev, kernels = device()
    state = WorkerState(post=lambda event: state.events.append(check_event(event) and event))
    state.events, state.device = [], dev
    state.memory = PageMemory(embedder=Embedder(), embedder_id=MODEL["id"], kernels=kernels)
    return state


def send(state, kind, **fields) -> list[dict]:
    state.events.clear()
    asyncio.run(
        handle({"type": kind, "id": f"{kind}-1", "collection": "documents", "embedder": MODEL, **fields}, state)
    )
    return list(state.events)


def test_documents_added_recalled_deleted_and_kept(folder):
    state = worker()
    assert send(state, "memory_list")[-1]["documents"] == []
    *steps, done = send(state, "memory_add", name="trains.pdf", data=document([f"BT ({TRAIN}) Tj ET".encode()]))
    assert [(s["type"], s["phase"]) for s in steps] == [("memory_progress", p) for p in ("read", "embed", "embed")]
    assert steps[-1] | {"id": None} == {
        "type": "memory_progress",
        "id": None,
        "file": "trains.pdf",
        "phase": "embed",
        "done": 1,
        "total": 1,
    }
    assert done["added"]["source"] == "trains.pdf" and done["added"]["passages"] == 1 and done["bytes"] > 0
    note = send(state, "memory_add", name="note.txt", text="Cats sleep most of the day.", metadata={"kind": "txt"})
    reading, bad = send(state, "memory_add", name="empty.txt", data=b"  \n")
    assert reading["phase"] == "read" and (bad["type"], bad["kind"], bad["message"]) == (
        "error",
        "document",
        "empty.txt: is empty",
    )
    listed = send(state, "memory_list")[-1]["documents"]
    assert [d["source"] for d in listed] == ["trains.pdf", "note.txt"] and listed[1]["metadata"] == {"kind": "txt"}

    [hits] = send(state, "memory_recall", query="night train to Vienna", k=1)
    assert [(h["source"], h["place"], h["text"]) for h in hits["hits"]] == [("trains.pdf", "page 1", TRAIN)]
    [gone] = send(state, "memory_delete", document=note[-1]["added"]["id"])
    assert gone["deleted"] == note[-1]["added"]["id"] and [d["source"] for d in gone["documents"]] == ["trains.pdf"]
    [again] = send(state, "memory_delete", document=note[-1]["added"]["id"])
    assert again["kind"] == "memory" and "no document" in again["message"]

    reloaded = worker()  # a reload: a new worker reads the files
    assert [d["source"] for d in send(reloaded, "memory_list")[-1]["documents"]] == ["trains.pdf"]
    [hits] = send(reloaded, "memory_recall", query="night train", k=3)
    assert [h["source"] for h in hits["hits"]] == ["trains.pdf"]


def test_refusals_are_one_typed_error_each(folder):
    state = worker()
    send(state, "memory_add", name="note.txt", text="Cats sleep most of the day.")
    other = worker()
    other.memory.embedder_id = "another-model"
    [error] = send(other, "memory_list", embedder={**MODEL, "id": "another-model"})
    assert error["kind"] == "memory" and "holds vectors of 'bag-of-words'" in error["message"]
    assert "wisp-memory/documents" in error["message"]

    folder.room = 10
    full = send(state, "memory_add", name="big.txt", text="Rivers flood each spring. " * 50)[-1]
    assert full["kind"] == "quota" and "Not enough storage for big.txt" in full["message"]
    folder.room = 10**9

    state.serving = "gen-7"  # the chat's answer holds the GPU
    [busy] = send(state, "memory_add", name="late.txt", text="Boats wait in the harbour.")  # refused first
    assert busy["kind"] == "memory" and "busy with request 'gen-7'" in busy["message"]
    state.serving = None
    [blank] = send(state, "memory_recall", query="  ")
    assert blank["kind"] == "request" and "'query'" in blank["message"]
    [named] = send(state, "memory_list", collection="../up")
    assert named["kind"] == "request" and "letters, digits" in named["message"]
    assert [d["source"] for d in send(state, "memory_list")[-1]["documents"]] == ["note.txt"]
