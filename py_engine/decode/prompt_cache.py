"""Generation that keeps the KV cache between requests.

A chat re-renders the whole conversation every turn; the tokens it shares with what the cache
already holds (their longest common prefix) are not computed again, so a turn prefills only the
new message and its template. Used by the terminal chat and the browser worker alike."""

from __future__ import annotations


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PromptCache:
    def __init__(self, engine):
        self.engine = engine
        self.cached: list[int] = []  # tokens whose keys and values are in the cache, in order
        self.reused = 0  # prompt tokens of the last request found in the cache
        self.prefilled = 0  # prompt tokens the last request computed

    def reset(self) -> None:
        self.cached = []
        self.engine.reset()

    async def generate(
        self, ids: list[int], max_new_tokens: int, sampling, stop_ids, constraint=None, fresh_from: int | None = None
    ):
        """Async generator of new token ids, as Engine.generate. At least one prompt token is
        always prefilled (its logits pick the first answer token). Where the cache was written too
        far past the shared prefix for a sliding layer's ring to hold the window before it
        (kv_cache.py), everything is computed again. fresh_from: nothing from this position on is
        reused (a prompt's first picture token: every picture's tokens are the same ids)."""
        keep = min(common_prefix(self.cached, ids), len(ids) - 1, len(ids) if fresh_from is None else fresh_from)
        keep = self.reused = keep if self.engine.kv_writes.holds(keep) else 0
        self.prefilled = len(ids) - keep
        self.engine.roll_back(keep)  # keys/values past `keep` are stale; attention reads positions < pos only
        self.cached = ids[:keep]
        answer: list[int] = []
        try:
            async for token in self.engine.generate(
                ids[keep:], max_new_tokens, sampling, stop_ids, context_ids=ids, constraint=constraint
            ):
                answer.append(token)
                yield token
        finally:
            # The prompt went in whole; of the answer, every token but the last was fed back.
            self.cached = ids + answer[:-1] if answer else ids[:keep]
