"""Drafted tokens verified in one forward (Engine.picks_after): the greedy token after each row of
a forward of a few rows must be, bit for bit, what one-token decodes pick — the GEMV, the attention
(rope_kv + attention vs ROPE_KV) and the LM head compute each row as a decode token's. Tiny
fixtures of each family (bias, QK norm, sliding window) on this machine's GPU."""

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from gpu_harness import collect, device

from py_engine.decode import prompt_lookup
from py_engine.decode.on_host import decode_on_host
from py_engine.decode.token_choice import SamplingParams
from py_engine.engine import DecodeStats, Engine
from py_engine.runtime.linear_plan import GEMV_MAX_ROWS, LOGIT_ROWS_MAX

FIXTURES = Path(__file__).parent / "fixtures"
PROMPT = [5, 17, 42, 9, 100, 3]


async def greedy(engine, prompt, count):
    return [t async for t in decode_on_host(engine, prompt, count, SamplingParams(), (), list(prompt), DecodeStats())]


@pytest.mark.parametrize("name", ["llama-f32", "qwen2-f32", "qwen3-f32", "mistral-f32"])
def test_a_forward_of_drafts_picks_what_decoding_picks(name):
    assert LOGIT_ROWS_MAX <= GEMV_MAX_ROWS  # every verified row goes through the GEMV, as decoding does

    dev = device()[0]

    async def run():
        engine = await Engine.load(FIXTURES / name, dev, max_rows=16, context=64)
        want = await greedy(engine, PROMPT, 16)
        engine.reset()
        engine.device.submit(engine.prefill_commands(PROMPT[:-1]))
        got = [await engine.picks_after([PROMPT[-1]] + want[:3])]  # a draft the model agrees with
        got.append(await engine.picks_after([want[3]] + want[4:11]))  # LOGIT_ROWS_MAX rows
        wrong = await engine.picks_after([want[11], 7, 7])  # drafted 7, 7: only the first pick counts
        pos = engine.pos
        engine.roll_back(engine.pos - 2)  # the rejected drafts' positions are rewritten by the next forward
        again = await engine.picks_after([want[12]])
        return want, got, wrong, again, pos

    want, got, wrong, again, pos = asyncio.run(run())
    assert got == [want[:4], want[4:12]]
    assert wrong[0] == want[12] and again == [want[13]]
    assert pos == len(PROMPT) + 14


def test_too_many_rows_are_refused():
    engine = asyncio.run(Engine.load(FIXTURES / "llama-f32", device()[0], max_rows=16, context=64))
    with pytest.raises(ValueError, match="1 to 8 ids"):
        asyncio.run(engine.picks_after(list(range(LOGIT_ROWS_MAX + 1))))
    small = asyncio.run(Engine.load(FIXTURES / "llama-f32", device()[0], max_rows=4, context=64))
    with pytest.raises(ValueError, match="1 to 4 ids"):  # more rows than its activations hold
        asyncio.run(small.picks_after(list(range(5))))


def test_prompt_lookup_drafts_fit_a_small_forward(monkeypatch):
    """With max_rows 3 a verifying forward takes the fed token and at most 2 drafted ones."""
    monkeypatch.setattr(prompt_lookup, "STREAK", 0)
    dev = device()[0]

    async def run():
        engine = await Engine.load(FIXTURES / "llama-f32", dev, max_rows=3, context=64)
        plain = await collect(engine.generate(ECHO, 12, SamplingParams()))
        engine.reset()
        return plain, await collect(engine.generate(ECHO, 12, SamplingParams(lookup=True))), engine.drafter

    plain, looked, drafter = asyncio.run(run())
    assert looked == plain and drafter.drafted > 0


ECHO = PROMPT + [77, 5, 17, 42, 9]  # repeats itself: the drafts find matches


@pytest.mark.slow  # several generations per case
@pytest.mark.parametrize("name,streak", [("llama-f32", 0), ("qwen3-f32", 0), ("qwen3-f32", prompt_lookup.STREAK)])
def test_prompt_lookup_gives_greedy_decoding_s_tokens(name, streak, monkeypatch):
    """generate with lookup yields the GPU loop's greedy tokens and leaves pos where it does: to
    the end, at a stop inside an accepted run, at a cancel, and at the context's end. Streak 0:
    every token the GPU loop yields hands over to verification, and each rejection hands back."""
    monkeypatch.setattr(prompt_lookup, "STREAK", streak)
    dev = device()[0]

    async def run(context=64):
        engine = await Engine.load(FIXTURES / name, dev, max_rows=16, context=context)
        out = {}
        for lookup in (False, True):
            got = []
            engine.reset()
            got.append(await collect(engine.generate(ECHO, 30, SamplingParams(lookup=lookup))))
            got.append(engine.pos)
            stats = (engine.drafter.drafted, engine.drafter.verified) if lookup else None
            stop = got[0][next(i for i in range(6, 30) if got[0][i] not in got[0][:i])]
            engine.reset()
            got.append(await collect(engine.generate(ECHO, 30, SamplingParams(lookup=lookup), stop_ids={stop})))
            got.append(engine.pos)
            engine.reset()
            got.append(await collect(engine.generate(ECHO, 30, SamplingParams(lookup=lookup)), limit=7))
            got.append(engine.pos)
            out[lookup] = got
        return out, stats

    out, (drafted, verified) = asyncio.run(run())
    assert out[True] == out[False]
    assert out[True][1] == len(ECHO) + 29
    if streak == 0:  # drafts were verified (how many were accepted depends on the model)
        assert drafted > 0 and 0 < verified < 30
    small, _ = asyncio.run(run(context=len(ECHO) + 9))
    assert small[True] == small[False] and small[True][1] == len(ECHO) + 9


@pytest.mark.slow  # several generations per case
@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(temperature=0.1, seed=1),
        SamplingParams(temperature=0.3, top_k=5, seed=1),
        SamplingParams(temperature=0.8, top_p=0.9, seed=3),
        SamplingParams(temperature=1.0, seed=7),
    ],
)
def test_prompt_lookup_draws_what_the_seed_draws(sampling, monkeypatch):
    """Sampling with lookup: each verified row is drawn at the u its token takes from the seed's
    sequence (rejected rows' u's go to the tokens after), so the answer is the GPU loop's for the
    same seed, token for token, and pos too."""
    monkeypatch.setattr(prompt_lookup, "STREAK", 0)
    dev = device()[0]

    async def run():
        engine = await Engine.load(FIXTURES / "qwen3-f32", dev, max_rows=16, context=64)
        out = {}
        for lookup in (False, True):
            engine.reset()
            out[lookup] = (await collect(engine.generate(ECHO, 30, replace(sampling, lookup=lookup))), engine.pos)
        return out, engine.drafter

    out, drafter = asyncio.run(run())
    assert out[True] == out[False]
    assert drafter.drafted > 0
    if sampling.temperature < 0.2:
        assert drafter.accepted > 0  # near-greedy draws accept what this model repeats
