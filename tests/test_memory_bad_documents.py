"""Bad documents on their way into a memory collection (the issue's list: empty, binary, a 1 GB text
file, a PDF bomb): each is one DocumentError naming it, and the collection and its SQLite file are as
they were (the document before still recalled, the file reopened equal). The server's capped body read
(app/request_body.py) refuses a gigabyte upload as soon as the cap is passed, not after holding it."""

import asyncio

import pytest
from test_memory_collection import BagOfWords, collection
from test_memory_pdf import bomb

from app.request_body import JSON_CAP, read_capped
from py_engine.api.request import RequestError
from py_engine.errors import DocumentError
from py_engine.memory.documents import read_document
from py_engine.memory.limits import MIB
from py_engine.memory.sqlite_store import SQLiteStore

GIB = 1 << 30


def bad_documents():
    yield "empty.txt", lambda: read_document("empty.txt", b""), "is empty"
    yield "blob.txt", lambda: read_document("blob.txt", bytes(range(256)) * 64), "binary data"
    # 1 GiB of zeros (calloc'd, never touched): refused by its length before it is read
    yield "huge.log", lambda: read_document("huge.log", bytes(GIB)), "over 64 MiB are not read"
    yield "bomb.pdf", lambda: read_document("bomb.pdf", bomb(1 << 11)), "compression bomb"


def test_each_bad_document_is_one_error_and_the_store_is_intact(tmp_path):
    path = tmp_path / "m.sqlite"
    memory = collection(path, BagOfWords())
    kept = asyncio.run(memory.add("The night train to Vienna leaves at 22:15.", {"k": 1}, source="trains.txt"))
    for name, read, problem in bad_documents():
        with pytest.raises(DocumentError, match=problem) as refused:
            asyncio.run(memory.add(read().text, source=name))
        assert refused.value.name == name
    # A text handed over as text has the readers' cap too: 64 MiB and one character
    with pytest.raises(DocumentError, match="huge.txt: is over 64 MiB of text"):
        asyncio.run(memory.add("a" * (64 * MIB + 1), source="huge.txt"))
    assert [d.id for d in memory.documents] == [kept.id]
    assert asyncio.run(memory.recall("train to Vienna", k=1))[0].source == "trains.txt"
    memory.store.close()
    again = SQLiteStore(path, "bag-of-words", 256)
    assert [(d.id, len(d.passages)) for d in again.documents()] == [(kept.id, len(kept.passages))]


class Upload:
    """A request whose body streams in 1 MiB parts (one buffer, sent again and again)."""

    def __init__(self, size: int, declared: bool):
        self.size, self.sent = size, 0
        self.headers = {"content-length": str(size)} if declared else {}

    async def stream(self):
        part = bytes(MIB)
        while self.sent < self.size:
            self.sent += len(part)
            yield part


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_gigabyte_upload_is_refused_at_the_cap(declared):
    upload = Upload(GIB, declared)
    with pytest.raises(RequestError, match="this server reads at most 357 MiB") as refused:
        asyncio.run(read_capped(upload, JSON_CAP))
    assert refused.value.status == 413
    assert upload.sent <= (0 if declared else JSON_CAP + MIB)
    assert asyncio.run(read_capped(Upload(3 * MIB, False), JSON_CAP)) == bytes(3 * MIB)
