"""The memory's vector search (py_engine/memory/vector_index.py) at 1k / 10k / 100k passages: the time of
one recall's search (the query written, the GEMVs over every shard, the top-k passes, 64 candidates read
back: what Collection.recall waits for besides embedding the query), of the exact path that reads every
score back (a filter the candidates cannot satisfy), and of adding vectors; the GPU memory the vectors
take. Random unit vectors (the work does not depend on the values). Prints one JSON object.

    python benchmarks/memory_search.py [--sizes 1000,10000,100000] [--dim 768] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_engine.gpu import open_device  # noqa: E402
from py_engine.memory.vector_index import VectorIndex  # noqa: E402
from py_engine.runtime.kernels import KernelCache  # noqa: E402


def unit(rng: random.Random, dim: int) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(dim)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


async def measure(device, kernels, size: int, dim: int, runs: int, rng: random.Random) -> dict:
    index = VectorIndex(device, kernels, dim)
    pool = [unit(rng, dim) for _ in range(256)]  # reused rows: making 100k Gaussian vectors in Python is slow
    start = time.perf_counter()
    for at in range(0, size, 1000):
        index.add([pool[(at + i) % len(pool)] for i in range(min(1000, size - at))])
    await index.search(pool[0], 8)  # the adds done, the kernels compiled
    added = time.perf_counter() - start
    search, exact = [], []
    for r in range(runs):
        query = pool[r % len(pool)]
        t = time.perf_counter()
        await index.search(query, 8)
        search.append(1e3 * (time.perf_counter() - t))
        t = time.perf_counter()
        await index.scores(query)
        exact.append(1e3 * (time.perf_counter() - t))
    out = {
        "search_ms": round(statistics.median(search), 3),
        "exact_ms": round(statistics.median(exact), 3),
        "add_per_1000_ms": round(1e3 * added / (size / 1000), 2),
        "shards": len(index._shards),
        "vector_mib": round(4 * index.capacity * dim / 2**20, 1),
    }
    index.destroy()
    return out


async def main(args) -> dict:
    device = await open_device()
    kernels = KernelCache(device)
    rng = random.Random(0)
    result = {"adapter": device.caps.adapter, "dim": args.dim}
    for size in [int(s) for s in args.sizes.split(",")]:
        result[str(size)] = await measure(device, kernels, size, args.dim, args.runs, rng)
        print(json.dumps({size: result[str(size)]}), file=sys.stderr, flush=True)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--runs", type=int, default=20)
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
