"""Prompt-lookup decoding: drafts from the text itself, verified in one forward.

A draft is what followed the latest earlier occurrence of the last n tokens (n from MAX_NGRAM down
to 1) in the conversation so far. Engine.greedy_after feeds the last token and the draft in one
forward and gives the model's greedy token after each prefix; tokens are accepted while they equal
the draft, plus the model's own next one, so the output is greedy decoding's, token for token.
Each step waits for its tokens before the next draft (no forward in flight ahead of the host):
it pays where drafts are accepted, as when an answer repeats or edits its prompt (code editing,
summaries), and the engine uses it only when asked (Engine.generate(lookup=True)), greedy only.
"""
from __future__ import annotations

from .models.builder import LOGIT_ROWS_MAX

MAX_NGRAM = 3
MAX_DRAFT = LOGIT_ROWS_MAX - 1  # the fed token and its draft share one forward's scored rows


class Drafter:
    """The conversation's tokens and, for n = 1 .. MAX_NGRAM, where each n-gram last ended before
    the newest token (so the tail's own occurrence is never its match)."""

    def __init__(self, tokens: list[int]):
        self.tokens: list[int] = []
        self._ends = [dict() for _ in range(MAX_NGRAM + 1)]  # n → n-gram → the index after it
        self.extend(tokens)
        self.drafted = self.accepted = self.forwards = 0  # drafts offered, accepted; forwards run (reports)

    def extend(self, tokens: list[int]) -> None:
        for t in tokens:
            end = len(self.tokens)  # n-grams ending before the new token become earlier occurrences
            for n in range(1, min(MAX_NGRAM, end) + 1):
                self._ends[n][tuple(self.tokens[end - n:end])] = end
            self.tokens.append(t)

    def draft(self, most: int) -> list[int]:
        for n in range(min(MAX_NGRAM, len(self.tokens)), 0, -1):
            end = self._ends[n].get(tuple(self.tokens[-n:]))
            if end is not None:
                return self.tokens[end:end + most]
        return []


async def lookup_decode(engine, prompt: list[int], max_new_tokens: int, stop_ids, history: list[int]):
    """Engine.generate's greedy tokens by prompt lookup (the module says how); pos ends as there:
    every yielded token but the last is in the KV cache."""
    drafter = engine.drafter = Drafter(history)
    if max_new_tokens <= 0:
        return
    if len(prompt) > 1:
        engine.device.submit(engine.prefill_commands(prompt[:-1]))
    last, yielded = prompt[-1], 0
    while yielded < max_new_tokens and engine.pos < engine.context:
        step_pos = engine.pos
        room = min(MAX_DRAFT, max_new_tokens - yielded - 1, engine.context - step_pos - 1)
        draft = drafter.draft(room) if room > 0 else []
        picks = await engine.greedy_after([last] + draft)
        accepted = 0
        while accepted < len(draft) and picks[accepted] == draft[accepted]:
            accepted += 1
        drafter.drafted += len(draft)
        drafter.accepted += accepted
        drafter.forwards += 1
        new = picks[:accepted + 1]
        for j, token in enumerate(new):
            engine.pos = step_pos + 1 + j  # fed: `last` and the tokens before this one
            yielded += 1
            yield token
            if token in stop_ids or yielded == max_new_tokens:
                return
        drafter.extend(new)
        last = new[-1]
