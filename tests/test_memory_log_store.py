"""memory/log_store.py, the page's store (an append-only log in OPFS), over plain files here: the
documents read back as they were stored, another model's store refused, a write cut short (a crash,
a full disk) leaves the state before it (of a batch's one append, the whole records before the cut),
a record damaged in the middle is skipped and named while the others read, the host's quota refuses
an add before any byte is written, compaction moves the live records to the other file (a compaction
cut short leaves the old one current), a second writer (another tab) is noticed, and a Collection over
it recalls as over SQLite."""

import asyncio
import os
from array import array

import pytest
from test_memory_collection import DIM, DOCS, BagOfWords

from py_engine.errors import StorageQuotaError, WispError
from py_engine.memory import log_store
from py_engine.memory.log_store import HEADER, LogStore
from py_engine.memory.sqlite_store import MemoryStoreError, Passage, StoredDocument


class DiskFile:
    """A file with the OPFS handle's operations (worker/memory_files.js): what LogStore writes through."""

    def __init__(self, path, fail_after: int | None = None):
        path.touch()
        self.file = open(path, "r+b")  # noqa: SIM115 - closed by the test's tmp_path
        self.fail_after = fail_after  # bytes a write lands before it fails (a crash, a full disk)

    def size(self):
        return os.fstat(self.file.fileno()).st_size

    def read(self, at, n):
        self.file.seek(at)
        return self.file.read(n)

    def write(self, at, data):
        self.file.seek(at)
        if self.fail_after is not None:
            self.file.write(data[: self.fail_after])
            raise OSError("QuotaExceededError: the disk is full")
        self.file.write(data)

    def truncate(self, n):
        self.file.truncate(n)

    def flush(self):
        self.file.flush()


def files(tmp_path, **options):
    return [DiskFile(tmp_path / "a.log", **options), DiskFile(tmp_path / "b.log")]


def doc(name: str, passages: int = 2, dims: int = 4) -> StoredDocument:
    rows = [
        Passage(n, 10 * n, 10 * n + 9, f"{name} passage {n} é", 3 + n, array("f", [n + 0.5] * dims), f"page {n + 1}")
        for n in range(passages)
    ]
    return StoredDocument(f"id-{name}", name, {"kind": "txt", "n": passages}, 10 * passages, rows)


def same(a: StoredDocument, b: StoredDocument) -> bool:
    return (a.id, a.source, a.metadata, a.chars, a.passages) == (b.id, b.source, b.metadata, b.chars, b.passages)


def test_documents_read_back_and_deletes_hold(tmp_path):
    store = LogStore("notes", files(tmp_path), "model-a")
    assert store.documents() == [] and store.bytes == 0  # nothing written until the first add
    added = [doc("one.pdf"), doc("two.md", 3), doc("three.txt", 1)]
    for d in added:
        store.add(d)
    store.delete("id-two.md")
    store.delete("id-unknown")  # as SQLite's DELETE: nothing to do
    again = LogStore("notes", files(tmp_path), "model-a", 4)
    assert [d.source for d in again.documents()] == ["one.pdf", "three.txt"]
    assert all(same(a, b) for a, b in zip(again.documents(), [added[0], added[2]]))
    assert again.damaged == [] and again.bytes == store.bytes
    with pytest.raises(WispError, match="stored already"):
        again.add(doc("one.pdf"))
    with pytest.raises(WispError, match="vectors of \\[5\\] values for a store of 4"):
        again.add(doc("wide.txt", dims=5))


def test_another_models_store_is_refused(tmp_path):
    LogStore("notes", files(tmp_path), "model-a").add(doc("one.pdf"))
    with pytest.raises(MemoryStoreError, match="notes: holds vectors of 'model-a' \\(4 values\\), not 'model-b'"):
        LogStore("notes", files(tmp_path), "model-b")
    with pytest.raises(MemoryStoreError, match="not 'model-a' \\(8\\)"):
        LogStore("notes", files(tmp_path), "model-a", 8)
    assert [d.source for d in LogStore("notes", files(tmp_path), "model-a").documents()] == ["one.pdf"]


@pytest.mark.parametrize("landed", [0, 3, 40, 200])
def test_a_write_cut_short_leaves_the_state_before_it(tmp_path, landed):
    store = LogStore("notes", files(tmp_path), "model-a")
    store.add(doc("one.pdf"))
    size = store.bytes
    store.files[0].fail_after = landed  # the disk fills (or the tab dies) mid-record
    with pytest.raises(OSError, match="disk is full"):
        store.add(doc("two.md"))
    assert store.files[0].size() == size and [d.source for d in store.documents()] == ["one.pdf"]
    # A crash leaves no chance to truncate: the bytes that landed stay, and reading cuts them off.
    record = log_store._record(b"A", log_store._add_payload(doc("two.md")))
    with open(tmp_path / "a.log", "ab") as f:
        f.write(record[: landed or 1])
    again = LogStore("notes", files(tmp_path), "model-a")
    assert [d.source for d in again.documents()] == ["one.pdf"] and again.damaged == []
    assert again.files[0].size() == size
    again.add(doc("three.txt"))
    assert [d.source for d in LogStore("notes", files(tmp_path), "model-a").documents()] == ["one.pdf", "three.txt"]


def test_a_batch_is_one_append_and_a_crash_keeps_its_whole_records(tmp_path):
    store = LogStore("notes", files(tmp_path), "model-a")
    batch = [doc("one.pdf"), doc("two.md", 3), doc("three.txt", 1)]
    with pytest.raises(WispError, match="'id-one.pdf' is stored already"):
        store.add_many([batch[0], batch[0]])  # nothing written
    assert store.bytes == 0
    store.add_many(batch)
    assert [d.source for d in LogStore("notes", files(tmp_path), "model-a").documents()] == [
        "one.pdf",
        "two.md",
        "three.txt",
    ]
    raw = (tmp_path / "a.log").read_bytes()
    (tmp_path / "a.log").write_bytes(raw[:-10])  # a crash mid-append: the records before the cut are whole
    assert [d.source for d in LogStore("notes", files(tmp_path), "model-a").documents()] == ["one.pdf", "two.md"]


def test_a_damaged_record_is_skipped_and_named(tmp_path):
    store = LogStore("notes", files(tmp_path), "model-a")
    for name in ("one.pdf", "two.md", "three.txt"):
        store.add(doc(name))
    raw = bytearray((tmp_path / "a.log").read_bytes())
    second = raw.index(b"WREC", HEADER + 1)
    raw[second + 40] ^= 0x10  # a flipped bit in the second document's record
    (tmp_path / "a.log").write_bytes(bytes(raw))
    again = LogStore("notes", files(tmp_path), "model-a")
    assert [d.source for d in again.documents()] == ["one.pdf", "three.txt"]
    assert len(again.damaged) == 1 and "are not records" in again.damaged[0]
    assert (tmp_path / "a.log").read_bytes() == bytes(raw)  # nothing was cut
    again.add(doc("four.txt"))
    assert [d.source for d in LogStore("notes", files(tmp_path), "model-a").documents()][-1] == "four.txt"


def test_a_damaged_header_is_refused_and_left_alone(tmp_path):
    LogStore("notes", files(tmp_path), "model-a").add(doc("one.pdf"))
    raw = bytearray((tmp_path / "a.log").read_bytes())
    raw[20] ^= 0xFF
    (tmp_path / "a.log").write_bytes(bytes(raw))
    with pytest.raises(MemoryStoreError, match="notes: its header is damaged"):
        LogStore("notes", files(tmp_path), "model-a")
    assert (tmp_path / "a.log").read_bytes() == bytes(raw)


def test_the_quota_refuses_an_add_before_any_byte(tmp_path):
    store = LogStore("notes", files(tmp_path), "model-a")
    store.add(doc("one.pdf"))
    size = store.bytes
    store.room = 100
    with pytest.raises(StorageQuotaError, match="Not enough storage for big.pdf: .* 0.0 MB available; nothing"):
        store.add(doc("big.pdf", passages=20))
    assert store.files[0].size() == size and len(store.documents()) == 1
    store.room = 10_000
    store.add(doc("small.txt", passages=1))
    assert store.room == 10_000 - (store.bytes - size)


def test_compaction_moves_the_live_records_to_the_other_file(tmp_path, monkeypatch):
    monkeypatch.setattr(log_store, "COMPACT_BYTES", 1)
    store = LogStore("notes", files(tmp_path), "model-a")
    for name in ("one.pdf", "two.md", "three.txt"):
        store.add(doc(name, passages=4))
    store.delete("id-one.pdf")  # dead < live: no compaction yet
    assert (store.current, store.generation) == (0, 1)
    store.delete("id-two.md")
    assert (store.current, store.generation, store.dead) == (1, 2, 0)
    assert (tmp_path / "a.log").stat().st_size == 0
    again = LogStore("notes", files(tmp_path), "model-a")
    assert [d.source for d in again.documents()] == ["three.txt"] and again.generation == 2
    again.add(doc("four.md"))
    assert [d.source for d in LogStore("notes", files(tmp_path), "model-a").documents()] == ["three.txt", "four.md"]


def test_a_compaction_cut_short_leaves_the_old_file_current(tmp_path, monkeypatch):
    monkeypatch.setattr(log_store, "COMPACT_BYTES", 1)
    store = LogStore("notes", [DiskFile(tmp_path / "a.log"), DiskFile(tmp_path / "b.log", fail_after=30)], "model-a")
    for name in ("one.pdf", "two.md", "three.txt"):
        store.add(doc(name, passages=4))
    store.delete("id-one.pdf")
    store.delete("id-two.md")  # the copy fails: the log goes on unshrunk
    assert (store.current, store.generation) == (0, 1) and (tmp_path / "b.log").stat().st_size == 0
    # A crash after the copy's records but before its header: the copy holds no header, and is emptied.
    (tmp_path / "b.log").write_bytes(bytes(HEADER) + b"WREC-not-finished")
    again = LogStore("notes", files(tmp_path), "model-a")
    assert [d.source for d in again.documents()] == ["three.txt"] and again.current == 0
    assert (tmp_path / "b.log").stat().st_size == 0


def test_another_writer_is_noticed(tmp_path):
    mine = LogStore("notes", files(tmp_path), "model-a")
    mine.add(doc("one.pdf"))
    assert mine.refresh(files(tmp_path)) is False
    LogStore("notes", files(tmp_path), "model-a").add(doc("two.md"))  # the page in another tab
    assert mine.refresh(files(tmp_path)) is True
    assert [d.source for d in mine.documents()] == ["one.pdf", "two.md"]


def test_a_collection_over_the_log_recalls_as_over_sqlite(tmp_path):
    from gpu_harness import device

    from py_engine.memory.collection import Collection
    from py_engine.memory.vector_index import VectorIndex

    def opened():
        dev, kernels = device()
        store = LogStore("notes", files(tmp_path), "bag-of-words", DIM)
        return asyncio.run(Collection.open(BagOfWords(), store, VectorIndex(dev, kernels, DIM), window=12, overlap=2))

    memory = opened()
    added = {name: asyncio.run(memory.add(text, source=name)) for name, text in DOCS.items()}
    hits = asyncio.run(memory.recall("why does a cat purr and knead blankets", k=2))
    assert hits[0].source == "cats.md"
    again = opened()
    assert asyncio.run(again.recall("why does a cat purr and knead blankets", k=2)) == hits
    again.delete(added["cats.md"].id)
    assert [d.source for d in opened().documents] == ["rivers.txt", "stars.txt"]
