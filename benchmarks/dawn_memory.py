"""The page's memory (py_engine/web/memory.py, the OPFS log store) measured in its real worker on Dawn,
as benchmarks/memory_ingest.py measures the desktop's: worker/worker.js + Pyodide + the engine wheel
(build/web) in Node (benchmarks/dawn/memory.mjs), with an embedding model of --model (an HF folder or
a catalog name). Prints one JSON object:

    python benchmarks/dawn_memory.py --model FOLDER|all-minilm-l6-v2 [--pages 200] [--sizes 1000,10000,100000]
                                     [--runs 10] [--passages-per-document 100] [--node node]
                                     [--webgpu /tmp/webgpu] [--dawn-backend vulkan|opengles] [--dawn-toggle T]

`pdf`: memory_ingest.py's PDF (its pdf(): the same pages, the same passages) added through memory_add
as the Documents panel adds it: read (the pure-Python PDF reader in Pyodide), cut into passages,
embedded, stored (one OPFS log append, the GPU index), with passages/s and tokens/s over the embedding
(tokens: the passages' own counts, from the collection's export). `scale`: the same collection filled
to each size through memory_import (static/client.js memoryImport: the page's path, the file read in
pieces and sent in batches) from an export this script writes (memory/transfer.py's lines: documents
of --passages-per-document passages of ~1,000 characters, random unit vectors); at each size the
import's time, the median recall (query embedded, searched, packed: k 8, token_budget 2048) of --runs,
the OPFS log's size, and Pyodide's wasm memory (`wasm_memory_mb`, also at boot and after the PDF: the
records are held in the worker's heap, their vectors once more on the GPU). The desktop's numbers for
the same PDF and sizes: `python benchmarks/memory_ingest.py --model FOLDER --pages 200`.
"""

from __future__ import annotations

import argparse
import json
import math
import operator
import os
import random
import subprocess
import sys
import tempfile
from array import array
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from dawn import ensure_current_wheel, model_path  # noqa: E402
from memory_ingest import WORDS, pdf  # noqa: E402

from py_engine.embedding.settings import embed_settings  # noqa: E402
from py_engine.formats.model_files import read_model  # noqa: E402
from py_engine.formats.source import open_source  # noqa: E402
from py_engine.memory.sqlite_store import Passage, StoredDocument  # noqa: E402
from py_engine.memory.transfer import document_line, header_line  # noqa: E402


def dimensions(path: Path) -> int:
    """The embedder's vector size (its Dense modules' output, else the hidden size), from its files."""
    source = open_source(path)
    cfg, _, _ = read_model(source)
    return embed_settings(source, cfg, encoder=True).dimensions[0]


def unit_vector(rng: random.Random, dim: int) -> array:
    """A random direction (uniform in a cube, normalised: good enough for timing a search), made in C
    loops: 100,000 of 384 values take seconds, not minutes."""
    values = array("f", array("b", rng.randbytes(dim)))
    norm = math.sqrt(math.fsum(map(operator.mul, values, values))) or 1.0
    return array("f", map((1 / norm).__mul__, values))


def write_fill(folder: Path, dim: int, passages: int, per_document: int) -> tuple[Path, Path]:
    """An export (transfer.py's lines) of `passages` synthetic passages, and its index: the header line
    and each document line's byte offset (memory.mjs slices the file by documents without reading it,
    and names the page's model in the header it sends, so the vectors are taken as they are)."""
    model = "synthetic"
    rng = random.Random(1)
    fill, starts = folder / "fill.jsonl", []
    with open(fill, "wb") as out:
        out.write((header_line(model, dim) + "\n").encode())
        for n in range(-(-passages // per_document)):
            text = " ".join(rng.choice(WORDS) for _ in range(170))
            rows = [Passage(i, 0, len(text), f"{i} {text}", 220, unit_vector(rng, dim)) for i in range(per_document)]
            starts.append(out.tell())
            out.write(
                (document_line(StoredDocument(f"fill-{n:06d}", f"filler-{n}.txt", {}, len(text), rows)) + "\n").encode()
            )
        starts.append(out.tell())
    index = folder / "fill.json"
    index.write_text(
        json.dumps({"header": header_line(model, dim), "passages_per_document": per_document, "starts": starts})
    )
    return fill, index


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="an embedding model's HF folder, or a catalog name")
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--sizes", default="1000,10000,100000", help="passages in the collection, in turn")
    parser.add_argument("--runs", type=int, default=10, help="recalls a size (their median)")
    parser.add_argument("--passages-per-document", type=int, default=100)
    parser.add_argument("--node", default="node")
    parser.add_argument("--webgpu", default="/tmp/webgpu", help="the npm `webgpu` package's directory")
    parser.add_argument("--dawn-backend", default="vulkan", help="vulkan, or opengles (compatibility mode, no GPU)")
    parser.add_argument("--dawn-toggle", action="append", default=[], help="a Dawn toggle (repeatable)")
    args = parser.parse_args()
    ensure_current_wheel()
    path = model_path(args.model)
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        document = folder / "report.pdf"
        document.write_bytes(pdf(args.pages))
        fill, index = write_fill(folder, dimensions(path), max(sizes), args.passages_per_document)
        print(f"dawn_memory.py: {fill.stat().st_size / 1e6:.1f} MB of export to import", file=sys.stderr)
        command = [
            args.node,
            str(ROOT / "benchmarks" / "dawn" / "memory.mjs"),
            *("--model", str(path), "--pdf", str(document), "--fill", str(fill), "--fill-index", str(index)),
            *("--sizes", args.sizes, "--runs", str(args.runs)),
            *("--dawn-backend", args.dawn_backend, "--webgpu", args.webgpu),
            *(arg for toggle in args.dawn_toggle for arg in ("--dawn-toggle", toggle)),
        ]
        result = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=os.environ)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise SystemExit(f"error: {' '.join(command[:2])} failed (exit code {result.returncode}); its log is above")
    print(json.dumps({**json.loads(lines[-1]), "pages": args.pages, "model_path": str(path)}))


if __name__ == "__main__":
    main()
