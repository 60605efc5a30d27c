"""Prompt-lookup decoding: drafts from the text itself, verified in one forward.

A draft is what followed the latest earlier occurrence of the last n tokens (n from MAX_NGRAM down
to 1) in the conversation so far. Engine.picks_after feeds the last token and the draft in one
forward and gives the token the model chooses after each prefix; tokens are accepted while they
equal the draft, plus the model's own next one. Each row is chosen exactly as a one-token decode
would choose it — greedy, or drawn at the u that token's position takes from the seed's sequence
(u's of rejected rows are kept for the tokens that come next) — so the output is the same token
for token as without lookup: greedy decoding's, or the same seed's draws. That is stronger than
speculative sampling's usual guarantee (the same distribution), and it accepts a draft as often:
with probability p(draft) under the model's (truncated) distribution.

A verifying step waits for its tokens before the next draft (no forward in flight ahead of the
host), so it costs a host round trip that the GPU-fed loop (on_gpu.py) does not pay: on an
H100 with SmolLM2 a step that accepts nothing halves the speed. So the GPU-fed loop runs until
STREAK tokens in a row were what a draft would have said (the text is copying itself), submitting
smaller groups as the streak grows; then verification runs while its steps give enough tokens on
average (LEAVE_RATE) and there is a draft, and the GPU-fed loop takes over again.
The engine uses it only when asked: SamplingParams(lookup=True), `--lookup` in the CLI, `lookup`
in an OpenAI request's body. One of the engine's decode loops, a sibling of on_gpu.py and
on_host.py over the engine's decode-loop interface.
"""

from __future__ import annotations

from collections import deque

from ..runtime.linear_plan import LOGIT_ROWS_MAX
from .on_gpu import decode_on_gpu

MAX_NGRAM = 3
MAX_DRAFT = LOGIT_ROWS_MAX - 1  # the fed token and its draft share one forward's scored rows
STREAK = 2  # tokens in a row that drafts would have predicted before the GPU-fed loop hands over
# Verification goes on while its tokens per step, averaged (each step weighing half), stay at least
# LEAVE_RATE: a step costs about two tokens of the GPU-fed loop (host round trip + forward, H100).
# A hand-over starts the average at ENTRY_RATE: three steps that accept nothing in a row end it.
ENTRY_RATE, LEAVE_RATE = 3.0, 1.5


class Drafter:
    """The conversation's tokens and, for n = 1 .. MAX_NGRAM, where each n-gram last ended before
    the newest token (so the tail's own occurrence is never its match)."""

    def __init__(self, tokens: list[int]):
        self.tokens: list[int] = []
        self._ends = [dict() for _ in range(MAX_NGRAM + 1)]  # n → n-gram → the index after it
        self.extend(tokens)
        # reports: draft tokens offered, accepted; verifying forwards run, the tokens they gave
        self.drafted = self.accepted = self.forwards = self.verified = 0

    def extend(self, tokens: list[int]) -> None:
        for t in tokens:
            end = len(self.tokens)  # n-grams ending before the new token become earlier occurrences
            for n in range(1, min(MAX_NGRAM, end) + 1):
                self._ends[n][tuple(self.tokens[end - n : end])] = end
            self.tokens.append(t)

    def draft(self, most: int) -> list[int]:
        for n in range(min(MAX_NGRAM, len(self.tokens)), 0, -1):
            end = self._ends[n].get(tuple(self.tokens[-n:]))
            if end is not None:
                return self.tokens[end : end + most]
        return []


async def lookup_decode(
    engine, drafter: Drafter, prompt: list[int], max_new_tokens: int, sampling, stop_ids, history, stats
):
    """Engine.generate's tokens with prompt lookup where it pays (the module says how); pos ends
    as there: every yielded token but the last is in the KV cache. drafter: Drafter(history), the
    engine's (its counts are what engine.drafter reports); stats: the engine's DecodeStats, which
    the GPU-fed stretches add to."""
    feed, yielded = prompt, 0
    while yielded < max_new_tokens:  # the GPU-fed loop, then drafts verified, then again
        streak = 0  # tokens in a row that a one-token draft would have predicted

        def most() -> int | None:  # a copy under way: submit fewer forwards, then none
            # reads this pass's streak as it grows (a closure over the loop variable, on purpose)
            return 0 if streak >= STREAK else None if streak == 0 else STREAK - streak  # noqa: B023

        plain = decode_on_gpu(engine, feed, max_new_tokens - yielded, sampling, stop_ids, history, stats, most=most)
        try:
            async for last in plain:
                streak = streak + 1 if drafter.draft(1) == [last] else 0
                drafter.extend([last])
                yielded += 1
                yield last
                if last in stop_ids:
                    return
        finally:  # closed early: the GPU loop rolls pos back now
            await plain.aclose()
        if yielded == max_new_tokens or engine.pos >= engine.context:
            return
        verified = _verified(engine, drafter, last, max_new_tokens - yielded, sampling)
        try:
            async for last in verified:
                yielded += 1
                yield last
                if last in stop_ids:
                    return
        finally:
            await verified.aclose()
        if engine.pos >= engine.context:
            return
        feed = [last]


async def _verified(engine, drafter: Drafter, last: int, most: int, sampling):
    """Drafts verified one forward at a time after `last` (not yet fed), while there is a draft
    and the steps give LEAVE_RATE tokens each on average; at most `most` tokens. u's drawn for
    rejected rows go back to the sampler."""
    us = deque()  # the seed's u's of the next tokens, drawn ahead for this step's rows
    yielded, rate = 0, ENTRY_RATE
    try:
        while yielded < most and engine.pos < engine.context:
            step_pos = engine.pos
            room = min(MAX_DRAFT, engine.max_rows - 1, most - yielded - 1, engine.context - step_pos - 1)
            draft = drafter.draft(room) if room > 0 else []
            if not draft:  # nothing to verify: the GPU-fed loop goes on from `last`
                return
            if sampling.temperature > 0:
                while len(us) < len(draft) + 1:
                    us.append(engine.sampler.uniform(sampling))
            picks = await engine.picks_after([last] + draft, sampling, list(us)[: len(draft) + 1])
            accepted = 0
            while accepted < len(draft) and picks[accepted] == draft[accepted]:
                accepted += 1
            drafter.drafted += len(draft)
            drafter.accepted += accepted
            drafter.forwards += 1
            new = picks[: accepted + 1]
            drafter.verified += len(new)
            drafter.extend(new)
            for j, token in enumerate(new):
                engine.roll_back(step_pos + 1 + j)  # fed: `last` and the tokens before this one
                if us:
                    us.popleft()
                yielded += 1
                yield token
            last = new[-1]
            rate = (rate + len(new)) / 2
            if rate < LEAVE_RATE:  # the text stopped repeating: back to the GPU-fed loop
                return
    finally:
        engine.sampler.unread(us)
