"""The page's submit path in Python (py_engine/gpu/browser_host.py) over a stand-in for worker/gpu.js:
a prepared batch is one op of a submit, and a submit's reads come back in one fetch crossing, in
any order. (The JavaScript half runs in Chromium: tests/test_browser_gpu.py, test_browser_engine.py.)"""

from __future__ import annotations

import asyncio

import pytest

from py_engine.gpu import Capabilities, Copy, Dispatch, Read
from py_engine.gpu.browser_host import Batch, BrowserDevice


class Bytes:
    def __init__(self, data: bytes):
        self.data = data

    def to_bytes(self) -> bytes:
        return self.data


class FakeGpu:
    """gpu.js's calls that submit and fetch make; a group's bytes are its reads' sizes of 0x11, 0x22, ..."""

    def __init__(self):
        self.batches, self.fetches, self.sizes = [], [], {}

    def share(self, array):
        self.shared = array

    def createBatch(self, ops):  # noqa: N802 - gpu.js's name
        self.batches.append(list(ops))
        return 100 + len(self.batches)

    def submitShared(self, n):  # noqa: N802
        ops = list(self.shared[:n])
        reads = [ops[i + 3] for i in range(0, n, 6) if ops[i] == 2]
        first = next((ops[i + 4] for i in range(0, n, 6) if ops[i] == 2), None)
        if first is not None:
            self.sizes[first] = reads

    async def fetchRead(self, key):  # noqa: N802
        self.fetches.append(key)
        return Bytes(b"".join(bytes([0x11 * (k + 1)]) * size for k, size in enumerate(self.sizes.pop(key))))


def test_batches_are_one_op_and_a_submit_s_reads_one_fetch():
    gpu = FakeGpu()
    dev = BrowserDevice(gpu, Capabilities(adapter="fake", shader_f16=False, subgroups=False))
    forward = [Dispatch(7, 8, (2, 1, 1)), Dispatch(9, 10, (3,))]
    [batch] = dev.batch(forward)
    assert isinstance(batch, Batch) and batch.commands == forward
    assert gpu.batches == [[0, 7, 8, 2, 1, 1, 0, 9, 10, 3, 1, 1]]
    ops, _ = dev.encode([Copy(1, 0, 2, 0, 16), batch])
    assert list(ops) == [1, 1, 0, 2, 0, 16, 3, batch.handle, 0, 0, 0, 0]
    with pytest.raises(TypeError):
        dev.batch([Copy(1, 0, 2, 0, 16)])

    async def run():
        first = dev.submit([batch, Read(5, 4, 4), batch, Read(5, 0, 2), Read(6, 1, 3)])
        alone = dev.submit([Read(6, 0, 1)])
        got = [await dev.fetch(first[2]), await dev.fetch(alone[0]), await dev.fetch(first[0])]
        return got + [await dev.fetch(first[1])]

    assert asyncio.run(run()) == [b"\x33" * 3, b"\x11", b"\x11" * 4, b"\x22" * 2]
    assert len(gpu.fetches) == 2 and not dev._fetched  # one crossing a submit, nothing kept after


def test_an_empty_submit_is_submitted():
    """A hybrid's recurrent state restored to position 0 copies nothing (recurrent_state.restore(None)):
    the submit is empty, as the desktop's is, not a BufferError of the shared array, which gpu.js keeps a
    view of (CPython takes an exported array's slice assignment of 0 items for a resize)."""
    gpu = FakeGpu()
    counts = []
    gpu.submitShared = counts.append
    dev = BrowserDevice(gpu, Capabilities(adapter="fake", shader_f16=False, subgroups=False))
    assert dev.submit([]) == [] and counts == [0]
