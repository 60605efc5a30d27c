"""The memory's ingestion and scale with a real embedding model (py_engine/memory/): a 200-page PDF read
(the pure-Python reader), cut into passages, embedded and stored, with a progress bar on stderr; the
embedding throughput (passages a second, and tokens); then what 10,000 more passages cost (the host's
Python heap, the SQLite file, the GPU's vectors) and a whole recall (the query embedded, searched, the
passages packed) at 1k / 10k / 100k passages. The PDF's text is made of common words (a fixed seed),
so every run embeds the same passages. Prints one JSON object.

    python benchmarks/memory_ingest.py [--model all-minilm-l6-v2|FOLDER] [--pages 200] [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # pdf_writer: the tests' PDF writer

from pdf_writer import document  # noqa: E402

from py_engine.embedding import load_embedder  # noqa: E402
from py_engine.gpu import open_device  # noqa: E402
from py_engine.memory.collection import Collection  # noqa: E402
from py_engine.memory.documents import read_document  # noqa: E402
from py_engine.memory.sqlite_store import Passage, SQLiteStore, StoredDocument  # noqa: E402
from py_engine.memory.vector_index import VectorIndex  # noqa: E402
from py_engine.model_cache import ensure_model  # noqa: E402
from py_engine.runtime.kernels import KernelCache  # noqa: E402

WORDS = (
    "the of and to in is was for on that with as by at from his her they which this be are an or had not but "
    "what all were when we there can been has more if will one about up out them so some would other into "
    "time only new could over also may after first well year work way even because any these give day most "
    "river train garden harbour station bridge city market season winter summer water light stone road field "
    "report account method result figure table section chapter volume measure value change system process"
).split()


def page_text(rng: random.Random, lines: int = 46) -> list[str]:
    """A page's lines of sentences (~75 characters a line, ~3,400 a page, like a dense report)."""
    out, line = [], []
    while len(out) < lines:
        sentence = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."
        for word in sentence.split():
            if sum(len(w) + 1 for w in line) + len(word) > 75:
                out.append(" ".join(line))
                line = []
            line.append(word)
    return out


def pdf(pages: int) -> bytes:
    rng = random.Random(0)
    contents = []
    for _ in range(pages):
        shown = " ".join(f"({line}) Tj T*" for line in page_text(rng))
        contents.append(f"BT /F1 10 Tf 14 TL 60 740 Td {shown} ET".encode())
    return document(contents, flate=True)


class Bar:
    """A progress bar on stderr: passages embedded of the document's."""

    def __init__(self, name: str):
        self.name, self.start = name, time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        filled = 40 * done // total
        rate = done / max(time.perf_counter() - self.start, 1e-9)
        end = "\n" if done == total else ""
        print(
            f"\r{self.name} [{'#' * filled}{'.' * (40 - filled)}] {done}/{total} ({rate:.0f}/s)",
            end=end,
            file=sys.stderr,
        )


class Timed:
    """The embedder with its embed calls timed (the rest of an add: chunking, storing, indexing)."""

    def __init__(self, embedder):
        self.inner, self.seconds, self.texts, self.tokens = embedder, 0.0, 0, 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def embed(self, texts, **options):
        t = time.perf_counter()
        out = await self.inner.embed(texts, **options)
        self.seconds += time.perf_counter() - t
        self.texts, self.tokens = self.texts + len(texts), self.tokens + out.prompt_tokens
        return out


async def ingest(collection: Collection, embedder: Timed, data: bytes, name: str) -> dict:
    t = time.perf_counter()
    doc = read_document(name, data)
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    stored = await collection.add(doc.text, source=name, places=doc.place_at, progress=Bar(name))
    add_s = time.perf_counter() - t
    return {
        "pdf_mib": round(len(data) / 2**20, 2),
        "chars": len(doc.text),
        "read_ms": round(1e3 * read_s, 1),
        "add_ms": round(1e3 * add_s, 1),
        "embed_ms": round(1e3 * embedder.seconds, 1),
        "passages": len(stored.passages),
        "passages_per_s": round(embedder.texts / embedder.seconds, 1),
        "tokens_per_s": round(embedder.tokens / embedder.seconds),
    }


def filler(rng: random.Random, passages: int, dim: int, pool: list) -> StoredDocument:
    """A document of stored passages (~1,000 characters of text each, vectors from a pool): what an
    import or a reopened store puts in without embedding."""
    text = " ".join(rng.choice(WORDS) for _ in range(170))
    parts = [
        Passage(n, 0, len(text), f"{n} {text}", 220, array("f", pool[(n * 7) % len(pool)])) for n in range(passages)
    ]
    return StoredDocument(uuid.uuid4().hex, f"filler-{len(pool)}", {}, len(text), parts)


async def scale(collection: Collection, sizes: list[int], path: Path, runs: int) -> dict:
    """Passages restored up to each size; at 10k, what 10k of them cost; at each, a recall's time."""
    rng, dim = random.Random(1), collection.index.dim
    pool = []
    for _ in range(64):
        v = [rng.gauss(0, 1) for _ in range(dim)]
        n = sum(x * x for x in v) ** 0.5
        pool.append([x / n for x in v])
    out = {}
    for size in sizes:
        tracemalloc.start()
        heap0, file0, gpu0 = tracemalloc.get_traced_memory()[0], path.stat().st_size, collection.index.count
        grown = size - collection.index.count
        while collection.index.count < size:
            collection.restore(filler(rng, min(100, size - collection.index.count), dim, pool))
        heap = tracemalloc.get_traced_memory()[0] - heap0
        tracemalloc.stop()
        times = []
        for r in range(runs):
            t = time.perf_counter()
            await collection.recall(f"where does the {WORDS[r]} train leave", k=8, token_budget=2048)
            times.append(1e3 * (time.perf_counter() - t))
        query = (await collection.embedder.embed(["where does the train leave"])).vectors[0]
        searches = []
        for _ in range(runs):  # the GPU search alone (a recall is this, the query embedded and the packing)
            t = time.perf_counter()
            await collection.index.search(query, 64)
            searches.append(1e3 * (time.perf_counter() - t))
        row = {"recall_ms": round(statistics.median(times), 2), "search_ms": round(statistics.median(searches), 2)}
        if grown > 0:
            per = 10_000 / grown
            row["per_10k_passages"] = {
                "python_heap_mib": round(heap * per / 2**20, 1),
                "sqlite_mib": round((path.stat().st_size - file0) * per / 2**20, 1),
                "gpu_vector_mib": round(4 * dim * (collection.index.count - gpu0) * per / 2**20, 1),
            }
        out[str(size)] = row
        print(json.dumps({size: row}), file=sys.stderr, flush=True)
    return out


async def main(args) -> dict:
    device = await open_device()
    kernels = KernelCache(device)
    model = args.model if Path(args.model).exists() else str(ensure_model(args.model))  # a folder, or the catalog's
    embedder = Timed(await load_embedder(model, device, model_id=Path(args.model).name))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "memory.sqlite"
        store = SQLiteStore(path, embedder.model_id, embedder.dimensions)
        index = VectorIndex(device, kernels, embedder.dimensions)
        collection = await Collection.open(embedder, store, index)
        await collection.add("warm-up: the kernels compiled before anything is timed", source="warm")
        embedder.seconds = embedder.texts = embedder.tokens = 0
        result = {"adapter": device.caps.adapter, "model": embedder.model_id, "dimensions": embedder.dimensions}
        result["pdf"] = {"pages": args.pages, **await ingest(collection, embedder, pdf(args.pages), "report.pdf")}
        result["scale"] = await scale(collection, [int(s) for s in args.sizes.split(",")], path, args.runs)
        store.close()
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="all-minilm-l6-v2")
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=10)
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
