"""memory/collection.py with the desktop's SQLite store and the GPU index, on a stand-in embedder
(bag-of-words vectors, so which passage is nearest is known): recall order, offsets that cite, the
token budget, metadata filters (and the exact path past the GPU's candidates), deletion, reopening
from the file, redaction, a store of another model refused, a failed add that leaves nothing."""

import asyncio
import hashlib
import math

import pytest
from gpu_harness import device

from py_engine.errors import WispError
from py_engine.memory.collection import Collection
from py_engine.memory.sqlite_store import MemoryStoreError, SQLiteStore
from py_engine.memory.vector_index import VectorIndex

DIM = 256


class Words:
    def encode(self, text, add_special_tokens=False):
        return text.split()


class BagOfWords:
    """Each word a fixed random direction; a text the normalised sum of its words'."""

    tokenizer = Words()

    def __init__(self):
        self.seen = []

    def vector(self, text):
        total = [0.0] * DIM
        for word in text.lower().replace(".", " ").split():
            digest = hashlib.shake_256(word.encode()).digest(DIM)
            for i in range(DIM):
                total[i] += digest[i] / 255 - 0.5
        norm = math.sqrt(sum(v * v for v in total)) or 1.0
        return [v / norm for v in total]

    async def embed(self, texts):
        self.seen += texts
        return type("E", (), {"vectors": [self.vector(t) for t in texts]})


def collection(path, embedder=None, **options):
    dev, kernels = device()
    store = SQLiteStore(path, "bag-of-words", DIM)
    index = VectorIndex(dev, kernels, DIM, shard_rows=40)
    return asyncio.run(Collection.open(embedder or BagOfWords(), store, index, window=12, overlap=2, **options))


DOCS = {
    "cats.md": "Cats sleep most of the day.\n\nA cat purrs when content and kneads soft blankets.",
    "rivers.txt": "The river floods each spring. Boats wait in the harbour until the water falls.",
    "stars.txt": "Stars burn hydrogen into helium. Their light takes years to reach us.",
}


def test_recall_remembers_across_reopening_and_forgets_deleted(tmp_path):
    path = tmp_path / "memory.sqlite"
    memory = collection(path)
    added = {name: asyncio.run(memory.add(text, {"kind": name[-2:]}, source=name)) for name, text in DOCS.items()}
    hits = asyncio.run(memory.recall("why does a cat purr and knead blankets", k=2))
    assert hits[0].source == "cats.md" and hits[0].score >= hits[1].score
    assert DOCS["cats.md"][hits[0].start : hits[0].end] == hits[0].text
    budget = asyncio.run(memory.recall("river water harbour boats", k=5, token_budget=10))
    assert sum(h.tokens for h in budget) <= 10 and budget[0].source == "rivers.txt"
    only = asyncio.run(memory.recall("cats", k=5, filter={"kind": "xt"}))
    assert only and all(h.source != "cats.md" for h in only)
    memory.store.close()

    again = collection(path)
    assert [d.source for d in again.documents] == list(DOCS)
    assert asyncio.run(again.recall("why does a cat purr and knead blankets", k=2)) == hits
    again.delete(added["cats.md"].id)
    assert all(h.source != "cats.md" for h in asyncio.run(again.recall("cat purrs kneads blankets", k=8)))
    with pytest.raises(WispError, match="no document"):
        again.delete(added["cats.md"].id)
    last = asyncio.run(again.add(DOCS["cats.md"], source="last.md"))  # two passages in the last slots
    again.delete(last.id)
    assert again.index.count == 3 and {h.source for h in asyncio.run(again.recall("cat", k=8))} == {
        "rivers.txt",
        "stars.txt",
    }
    again.store.close()
    assert [d.source for d in collection(path).documents] == ["rivers.txt", "stars.txt"]


def test_a_filter_past_the_gpus_candidates_is_ranked_exactly(tmp_path):
    memory = collection(tmp_path / "m.sqlite")
    for n in range(70):  # 70 passages that all look like the query, then the one the filter wants
        asyncio.run(memory.add("blue sky over the sea", {"n": n}, source=f"sky{n}"))
    asyncio.run(memory.add("a green forest far away", {"n": "wanted"}, source="forest"))
    hits = asyncio.run(memory.recall("blue sky over the sea", k=1, filter={"n": "wanted"}))
    assert [h.source for h in hits] == ["forest"]


def test_redaction_and_refusals(tmp_path):
    embedder = BagOfWords()
    memory = collection(tmp_path / "m.sqlite", embedder, redact=lambda t: t.replace("secret", "[redacted]"))
    doc = asyncio.run(memory.add("the secret code is here", source="s"))
    assert "secret" not in doc.passages[0].text and not any("secret" in t for t in embedder.seen)
    with pytest.raises(WispError, match="no text"):
        asyncio.run(memory.add(" \n ", source="empty.txt"))
    doc.passages[0].vector = None  # a store failure mid-document: nothing of it is kept
    before = [d.id for d in memory.store.documents()]
    with pytest.raises(TypeError):
        memory.store.add(type(doc)("other", "o", {}, 1, doc.passages))
    assert [d.id for d in memory.store.documents()] == before
    memory.store.close()
    with pytest.raises(MemoryStoreError, match="not 'other-model'"):
        SQLiteStore(tmp_path / "m.sqlite", "other-model", DIM)
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(MemoryStoreError, match="junk.sqlite"):
        SQLiteStore(tmp_path / "junk.sqlite", "bag-of-words", DIM)


def test_export_and_import(tmp_path):
    from py_engine.memory.transfer import export_lines, import_lines

    memory = collection(tmp_path / "a.sqlite")
    for name, text in DOCS.items():
        asyncio.run(memory.add(text, {"name": name}, source=name))
    placed = asyncio.run(memory.add("Planets orbit stars.", source="sky.md", places=lambda at: f"at {at}"))
    assert [p.place for p in placed.passages] == ["at 0"]
    exported = export_lines(memory, "bag-of-words")
    query = "why does a cat purr and knead blankets"

    same = collection(tmp_path / "b.sqlite")
    assert asyncio.run(import_lines(same, exported, "bag-of-words")) == 4
    assert asyncio.run(import_lines(same, exported, "bag-of-words")) == 0  # already there
    assert [p.place for p in same.documents[-1].passages] == ["at 0"]
    assert asyncio.run(same.recall(query, k=3)) == asyncio.run(memory.recall(query, k=3))

    embedder = BagOfWords()
    other = collection(tmp_path / "c.sqlite", embedder)
    assert asyncio.run(import_lines(other, exported, "another-model")) == 4  # the texts embedded again
    assert len(embedder.seen) == sum(len(d.passages) for d in memory.documents)
    assert [h.text for h in asyncio.run(other.recall(query, k=3))] == [
        h.text for h in asyncio.run(memory.recall(query, k=3))
    ]

    lines = exported.splitlines()
    for bad, message in [
        ("", "line 1: not JSON"),
        ('{"format": "other"}\n', "line 1: not a wisp-memory export"),
        (lines[0] + "\n[1]\n", "line 2: not a JSON object"),
        (lines[0] + '\n{"id": "x"}\n', "line 2: not a document"),
        (
            lines[0] + "\n" + lines[1].replace('"passages": [[0', '"passages": [[0, 1, 2, "t", 3, "@@", ""], [0'),
            "line 2: a vector is not base64",
        ),
    ]:
        with pytest.raises(WispError, match=message):
            asyncio.run(import_lines(collection(tmp_path / "d.sqlite"), bad, "bag-of-words"))


def test_progress_after_each_batch(tmp_path):
    memory = collection(tmp_path / "p.sqlite")
    seen = []
    text = "\n\n".join(f"Paragraph {n} tells of boats and rivers." for n in range(130))
    doc = asyncio.run(memory.add(text, source="long.txt", progress=lambda done, total: seen.append((done, total))))
    total = len(doc.passages)
    assert total > 128 and seen == [(64, total), (128, total), (total, total)]


def test_passages_are_embedded_from_the_ids_chunking_counted(tmp_path):
    """A real (tiny) embedder reads the chunker's ids, its special tokens added, not each passage's
    text tokenized again: the same vectors as embedding the passages' texts."""
    from test_embedding_gemma import MODEL

    from py_engine.embedding import load_embedder

    dev, kernels = device()
    embedder = asyncio.run(load_embedder(MODEL, dev, model_id="tiny-gemma"))
    given = []
    embed = embedder.embed

    async def watched(inputs, **options):
        given.extend(inputs)
        return await embed(inputs, **options)

    embedder.embed = watched
    store = SQLiteStore(tmp_path / "ids.sqlite", "tiny-gemma", embedder.dimensions)
    index = VectorIndex(dev, kernels, embedder.dimensions)
    memory = asyncio.run(Collection.open(embedder, store, index, window=12, overlap=2))
    doc = asyncio.run(memory.add(" ".join(DOCS.values()), source="all"))
    assert len(doc.passages) > 2 and all(isinstance(item, list) for item in given)
    want = asyncio.run(embed([p.text for p in doc.passages])).vectors
    got = [list(p.vector) for p in doc.passages]
    assert max(abs(a - b) for v, w in zip(got, want) for a, b in zip(v, w)) < 1e-6
