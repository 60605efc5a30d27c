"""The memory's vector search on the GPU (py_engine/memory/vector_index.py) against numpy: shards
(small ones here, so a few hundred vectors cross several and the last one grows), the top-k order
with ties, removal by moving the last vector, the whole scores row."""

import asyncio

import numpy as np
import pytest
from gpu_harness import device

from py_engine.memory.vector_index import VectorIndex

RNG = np.random.default_rng(5)


def unit_rows(n: int, dim: int) -> np.ndarray:
    rows = RNG.standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def best(vectors: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    scores = vectors.astype(np.float64) @ query.astype(np.float64)
    return sorted(range(len(vectors)), key=lambda i: (-scores[i], i))[:k]


@pytest.mark.parametrize("dim,shard_rows", [(64, 96), (30, 1 << 20)])
def test_search_finds_numpys_best_across_shards(dim, shard_rows):
    dev, kernels = device()
    index = VectorIndex(dev, kernels, dim, shard_rows=shard_rows)
    try:
        vectors = unit_rows(1500, dim)
        vectors[700] = vectors[12]  # a tie: the lower slot first
        for start in (0, 5, 300, 1100):  # adds that fill, cross and grow shards
            end = {0: 5, 5: 300, 300: 1100, 1100: 1500}[start]
            assert index.add(vectors[start:end].tolist()) == range(start, end)
        query = vectors[12] + 0.01 * unit_rows(1, dim)[0]
        got = asyncio.run(index.search(query.tolist(), 10))
        assert [slot for slot, _ in got] == best(vectors, query, 10)
        assert [slot for slot, _ in got][:2] == [12, 700]
        want = vectors @ query
        np.testing.assert_allclose([score for _, score in got], want[[s for s, _ in got]], atol=1e-5)
        np.testing.assert_allclose(asyncio.run(index.scores(query.tolist())), want, atol=1e-5)

        moved = index.remove(12)  # the last vector takes slot 12
        assert moved == 1499 and index.count == 1499
        vectors[12] = vectors[1499]
        vectors = vectors[:1499]
        got = asyncio.run(index.search(query.tolist(), 64))
        assert [slot for slot, _ in got] == best(vectors, query, 64)
        assert index.remove(1498) is None
    finally:
        index.destroy()


def test_a_small_index_gives_what_it_has():
    dev, kernels = device()
    index = VectorIndex(dev, kernels, 8)
    try:
        assert asyncio.run(index.search([1.0] * 8, 5)) == []
        index.add(unit_rows(3, 8).tolist())
        assert len(asyncio.run(index.search([1.0] * 8, 5))) == 3
        with pytest.raises(ValueError, match="k must be"):
            asyncio.run(index.search([1.0] * 8, 65))
        with pytest.raises(ValueError, match="a query of 7 values"):
            asyncio.run(index.search([1.0] * 7, 5))
    finally:
        index.destroy()


class Watched:
    """The device with its prepare() and submit() calls logged."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def prepare(self):
        self.calls.append("prepare")
        await self.inner.prepare()

    def submit(self, commands):
        self.calls.append("submit")
        return self.inner.submit(commands)


def test_new_kernels_are_prepared_before_their_first_submit():
    """The page compiles pipelines asynchronously: a kernel submitted before device.prepare() is
    compiled synchronously, stalling the worker (its console said so at a recall's first search)."""
    dev, kernels = device()
    watched = Watched(dev)
    index = VectorIndex(watched, kernels, 16, shard_rows=8)
    try:
        index.add(unit_rows(5, 16).tolist())
        query = unit_rows(1, 16)[0].tolist()
        asyncio.run(index.search(query, 3))
        asyncio.run(index.search(query, 3))
        index.add(unit_rows(6, 16).tolist())  # a second shard: a new plan
        asyncio.run(index.scores(query))
        assert watched.calls == ["prepare", "submit", "submit", "prepare", "submit"]
    finally:
        index.destroy()
