"""Decoding on the GPU (decode/on_gpu.py): each forward's chosen token (argmax, or sample_pick's
draw) feeds the next forward's embedding without the host, a submit carries several forwards, and
on the desktop two submits are in flight. Its tokens must be the host round trip's (decode/on_host.py, where Python picks), and a stop,
a cancel or a full context must leave pos and the KV cache exactly where one token at a time
leaves them, though forwards past that point were already submitted. A tiny fixture (vocab 384)
on this machine's GPU (lavapipe in CI)."""

import asyncio
from pathlib import Path

import pytest
from gpu_harness import collect, device

from py_engine.decode.on_host import decode_on_host
from py_engine.decode.token_choice import SamplingParams
from py_engine.engine import DecodeStats, Engine
from py_engine.errors import WispError
from py_engine.gpu import Read

FIXTURE = Path(__file__).parent / "fixtures" / "llama-f32"
PROMPT = [5, 17, 42, 9, 100, 3]
GREEDY = SamplingParams()


def load(context: int = 64) -> Engine:
    return asyncio.run(Engine.load(FIXTURE, device()[0], max_rows=16, context=context))


def host_fed(engine: Engine, count: int, params: SamplingParams) -> list[int]:
    """The prompt's answer one round trip a token, the host picking each."""
    return asyncio.run(collect(decode_on_host(engine, PROMPT, count, params, (), list(PROMPT), DecodeStats())))


# Decode forwards per submit: sized by the engine (None), and 5, so that stops, cancels and the
# context's end fall inside a submit's group.
@pytest.fixture(scope="module", params=[None, 5], ids=["sized", "five-a-submit"])
def engine(request):
    e = load()
    e.tokens_per_submit = request.param
    return e


@pytest.fixture(scope="module")
def reference(engine):
    """24 greedy tokens the old way: one submit and one read-back per token, the host feeding them."""
    engine.reset()
    tokens = host_fed(engine, 24, GREEDY)
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
    assert got == reference[: k + 1]
    assert engine.pos == len(PROMPT) + k
    # Feeding the stop token now continues the uninterrupted answer: the KV cache holds exactly
    # the prompt and the first k answer tokens, whatever the discarded forward wrote past them.
    rest = asyncio.run(collect(engine.generate([reference[k]], 24 - k - 1, GREEDY)))
    assert rest == reference[k + 1 :]


def test_cancel_mid_answer_rolls_back(engine, reference):
    engine.reset()
    got = asyncio.run(collect(engine.generate(PROMPT, 24, GREEDY), limit=4))
    assert got == reference[:4]
    assert engine.pos == len(PROMPT) + 3
    rest = asyncio.run(collect(engine.generate([reference[3]], 8, GREEDY)))
    assert rest == reference[4:12]


@pytest.mark.parametrize("per_submit", [None, 4])
def test_a_full_context_ends_where_one_token_at_a_time_ends(per_submit):
    small = load(context=len(PROMPT) + 6)
    small.tokens_per_submit = per_submit
    host_tokens = host_fed(small, 30, GREEDY)
    host_pos = small.pos
    small.reset()
    gpu_fed = asyncio.run(collect(small.generate(PROMPT, 30, GREEDY)))
    assert gpu_fed == host_tokens and len(gpu_fed) == 7
    assert small.pos == host_pos == small.context


def test_no_tokens_asked_submits_nothing(engine):
    engine.reset()
    assert asyncio.run(collect(engine.generate(PROMPT, 0, GREEDY))) == []
    assert engine.pos == 0


# Sampling settings whose draws take each of sample_pick's ways: decided among the candidates,
# the kept set past them (top_k > 64, a wide nucleus), and u landing past the candidates' mass;
# and the repetition penalty, greedy and sampled (its history kept on the GPU).
SAMPLED = [
    SamplingParams(repetition_penalty=1.3),
    SamplingParams(temperature=0.9, top_p=0.9, repetition_penalty=1.2, seed=6),
    SamplingParams(temperature=0.8, top_k=40, top_p=0.9, seed=1),
    SamplingParams(temperature=0.7, seed=2),
    SamplingParams(temperature=1.5, top_k=200, seed=3),
    SamplingParams(temperature=3.0, top_p=0.95, seed=4),
    SamplingParams(temperature=5.0, seed=5),
]


@pytest.mark.slow  # 14 cases of about a second
@pytest.mark.parametrize(
    "params", SAMPLED, ids=lambda p: f"t{p.temperature}-k{p.top_k}-p{p.top_p}-r{p.repetition_penalty}"
)
def test_sampled_on_the_gpu_draws_the_host_s_tokens(engine, params):
    """Same seed, same tokens: sample_pick (f32 on the GPU) and choose() (Python) agree, the
    exact whole-row draw included; 24 draws per setting."""
    engine.reset()
    host = host_fed(engine, 24, params)
    engine.reset()
    gpu = asyncio.run(collect(engine.generate(PROMPT, 24, params)))
    assert gpu == host


def test_the_turn_after_a_cancel_mid_flight_is_a_fresh_run(engine):
    """A chat turn closed mid-answer (a stop string, a cancel) with a forward still in flight: the
    next turn reuses the cache (PromptCache) and must give a fresh engine's tokens."""
    from py_engine.decode.prompt_cache import PromptCache

    cache = PromptCache(engine)
    first = asyncio.run(collect(cache.generate(PROMPT, 24, GREEDY, ()), limit=5))
    follow = PROMPT + first + [7, 8, 9]
    second = asyncio.run(collect(cache.generate(follow, 12, GREEDY, ())))
    assert cache.reused == len(PROMPT) + 4  # every answer token but the last was fed back
    engine.reset()
    assert second == asyncio.run(collect(engine.generate(follow, 12, GREEDY)))


def test_the_penalty_sees_the_cached_turns_too(engine):
    """HF penalises every token of the input: a turn whose earlier turns sit in the KV cache
    (PromptCache prefills only the new tokens) must draw what a fresh engine draws from the whole."""
    from py_engine.decode.prompt_cache import PromptCache

    params = SamplingParams(repetition_penalty=1.5)
    cache = PromptCache(engine)
    cache.reset()
    first = asyncio.run(collect(cache.generate(PROMPT, 8, params, ())))
    follow = PROMPT + first + [7, 8, 9]
    second = asyncio.run(collect(cache.generate(follow, 12, params, ())))
    assert cache.reused > len(PROMPT)
    engine.reset()
    assert second == asyncio.run(collect(engine.generate(follow, 12, params)))


def test_a_submit_carries_several_forwards(engine, reference):
    """24 tokens: the prefill's submit, then groups (five each, or sized to LIVE_SECONDS: the tiny
    fixture's tokens take milliseconds, so groups grow to TOKENS_PER_SUBMIT)."""
    submits = []
    real = engine.device.submit
    engine.device.submit = lambda commands: submits.append(len(commands)) or real(commands)
    try:
        engine.reset()
        assert asyncio.run(collect(engine.generate(PROMPT, 24, GREEDY))) == reference
    finally:
        del engine.device.submit
    assert len(submits) <= (1 + 5 if engine.tokens_per_submit == 5 else 12)


def test_sized_groups_ramp_up(engine, reference):
    """Sized groups grow at most RAMP times the forwards in flight (the host encodes a group while
    the GPU runs those), from one forward to TOKENS_PER_SUBMIT, not in one step."""
    from py_engine.decode.on_gpu import RAMP
    from py_engine.runtime.kv_cache import TOKENS_PER_SUBMIT

    counts = []
    real = engine.decode_group
    engine.decode_group = lambda count, *rest: counts.append(count) or real(count, *rest)
    try:
        engine.reset()
        assert asyncio.run(collect(engine.generate(PROMPT, 24, GREEDY))) == reference
    finally:
        del engine.decode_group
    if engine.tokens_per_submit is not None:
        assert set(counts[:-1]) == {engine.tokens_per_submit}
        return
    # two submits in flight: group i is encoded while group i - 1 runs. (Growth needs a forward
    # under LIVE_SECONDS / 2 on this machine: the tiny fixture's take milliseconds.)
    assert counts[:2] == [1, 1] and 1 < max(counts) <= TOKENS_PER_SUBMIT, counts
    assert all(c <= RAMP * before for before, c in zip(counts, counts[1:])), counts


def test_a_cancel_rolls_back_at_once_in_a_running_loop(engine, reference):
    """The server and the worker keep one event loop: pos must be rolled back when the answer's
    generator is closed, not whenever the loop gets round to finalizing the loop inside it."""

    async def run():
        engine.reset()
        got = await collect(engine.generate(PROMPT, 24, GREEDY), limit=4)
        return got, engine.pos

    assert asyncio.run(run()) == (reference[:4], len(PROMPT) + 3)


@pytest.mark.parametrize("bad", [384, -1, 10**12, 2.0])
def test_a_token_id_outside_the_vocabulary_is_refused_before_the_gpu(engine, bad):
    """The ids a forward writes to the GPU index the embedding (vocab 384): any other is a typed
    error, and the engine is where it was."""
    engine.reset()
    with pytest.raises(WispError, match="outside the model's vocabulary"):
        asyncio.run(collect(engine.generate([5, bad, 9], 2, GREEDY)))
    assert engine.pos == 0
    assert asyncio.run(collect(engine.generate(PROMPT, 1, GREEDY)))


def test_roll_back_goes_on_from_a_fed_position_only(engine, reference):
    """Engine.roll_back, how the loops and the prompt cache go back (they never set pos): from
    any position up to the tokens fed, the answer goes on as if nothing past it had been computed."""
    engine.reset()
    assert asyncio.run(collect(engine.generate(PROMPT, 4, GREEDY))) == reference[:4]
    for past in (-1, len(PROMPT) + 5):  # the prompt and the four tokens read are all there is
        with pytest.raises(ValueError, match="cannot roll back"):
            engine.roll_back(past)
    engine.roll_back(len(PROMPT) + 1)  # the prompt and the first answer token stay
    assert asyncio.run(collect(engine.generate([reference[1]], 3, GREEDY))) == reference[2:5]


def test_more_forwards_a_submit_than_the_loop_sizes(engine, reference):
    """tokens_per_submit past kv_cache.TOKENS_PER_SUBMIT (benchmarks/decode.py --tokens-per-submit
    16): the staged inputs grow, the tokens are the same."""
    saved = engine.tokens_per_submit
    engine.tokens_per_submit = 12
    try:
        engine.reset()
        assert asyncio.run(collect(engine.generate(PROMPT, 24, GREEDY))) == reference
    finally:
        engine.tokens_per_submit = saved
