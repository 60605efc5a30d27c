"""Greedy decoding on the GPU (Engine._greedy_on_gpu): each forward's argmax feeds the next
forward's embedding without the host, and on the desktop two forwards are in flight. Its tokens
must be the host round trip's (Engine._sampled), and a stop, a cancel or a full context must leave
pos and the KV cache exactly where one token at a time leaves them, though forwards past that
point were already submitted. A tiny fixture on this machine's GPU (lavapipe in CI)."""
import asyncio
from pathlib import Path

import pytest

from gpu_harness import device
from py_engine.engine import Engine
from py_engine.gpu import Read
from py_engine.sampling import SamplingParams

FIXTURE = Path(__file__).parent / "fixtures" / "llama-f32"
PROMPT = [5, 17, 42, 9, 100, 3]
GREEDY = SamplingParams()


def load(context: int = 64) -> Engine:
    return asyncio.run(Engine.load(FIXTURE, device()[0], max_rows=16, context=context))


async def collect(tokens, limit: int | None = None) -> list[int]:
    """The generator's tokens; with `limit`, close it after that many (a cancel)."""
    out = []
    async for t in tokens:
        out.append(t)
        if limit is not None and len(out) == limit:
            await tokens.aclose()
            break
    return out


@pytest.fixture(scope="module")
def engine():
    return load()


@pytest.fixture(scope="module")
def reference(engine):
    """24 greedy tokens the old way: one submit and one read-back per token, the host feeding them."""
    engine.reset()
    tokens = asyncio.run(collect(engine._sampled(PROMPT, 24, GREEDY, ())))
    assert engine.pos == len(PROMPT) + 23
    return tokens


def test_a_read_holds_the_bytes_of_its_point_in_the_queue():
    """What the GPU loop relies on: a Read sees the writes queued before its submit and none after,
    and pending reads are fetched in any order (unaligned ranges too). The browser's twin is in
    test_browser_gpu.py."""
    dev = device()[0]

    async def run():
        buf = dev.create_buffer(64)
        dev.write_buffer(buf, 0, bytes(range(64)))
        first = dev.submit([Read(buf, 5, 7)])[0]
        dev.write_buffer(buf, 0, bytes(64))
        second = dev.submit([Read(buf, 0, 16)])[0]
        return await dev.fetch(second), await dev.fetch(first), await dev.read_buffer(buf, 62, 2)

    assert asyncio.run(run()) == (bytes(16), bytes(range(5, 12)), bytes(2))


def test_reads_overlap_on_the_desktop(engine):
    assert engine.device.reads_overlap  # else the loop keeps one forward in flight and this file tests less


def test_gpu_fed_tokens_are_the_host_fed_ones(engine, reference):
    engine.reset()
    assert asyncio.run(collect(engine.generate(PROMPT, 24, GREEDY))) == reference
    assert engine.pos == len(PROMPT) + 23  # the last token is never fed


def test_stop_rolls_back_the_forward_in_flight(engine, reference):
    k = next(i for i in range(3, 24) if reference[i] not in reference[:i])  # a first occurrence
    engine.reset()
    got = asyncio.run(collect(engine.generate(PROMPT, 24, GREEDY, stop_ids={reference[k]})))
    assert got == reference[:k + 1]
    assert engine.pos == len(PROMPT) + k
    # Feeding the stop token now continues the uninterrupted answer: the KV cache holds exactly
    # the prompt and the first k answer tokens, whatever the discarded forward wrote past them.
    rest = asyncio.run(collect(engine.generate([reference[k]], 24 - k - 1, GREEDY)))
    assert rest == reference[k + 1:]


def test_cancel_mid_answer_rolls_back(engine, reference):
    engine.reset()
    got = asyncio.run(collect(engine.generate(PROMPT, 24, GREEDY), limit=4))
    assert got == reference[:4]
    assert engine.pos == len(PROMPT) + 3
    rest = asyncio.run(collect(engine.generate([reference[3]], 8, GREEDY)))
    assert rest == reference[4:12]


def test_a_full_context_ends_where_one_token_at_a_time_ends():
    small = load(context=len(PROMPT) + 6)
    host_fed = asyncio.run(collect(small._sampled(PROMPT, 30, GREEDY, ())))
    host_pos = small.pos
    small.reset()
    gpu_fed = asyncio.run(collect(small.generate(PROMPT, 30, GREEDY)))
    assert gpu_fed == host_fed and len(gpu_fed) == 7
    assert small.pos == host_pos == small.context


def test_no_tokens_asked_submits_nothing(engine):
    engine.reset()
    assert asyncio.run(collect(engine.generate(PROMPT, 0, GREEDY))) == []
    assert engine.pos == 0
