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
        self.cached_keys: list = []  # what they are compared by (generate's keys: a picture token's picture)
        self.reused = 0  # prompt tokens of the last request found in the cache
        self.prefilled = 0  # prompt tokens the last request computed

    def reset(self) -> None:
        self.cached, self.cached_keys = [], []
        self.engine.reset()

    async def generate(
        self, ids: list[int], max_new_tokens: int, sampling, stop_ids, constraint=None, keys=None, prepare=None
    ):
        """Async generator of new token ids, as Engine.generate. At least one prompt token is
        always prefilled (its logits pick the first answer token). Where the cache was written too
        far past the shared prefix for a sliding layer's ring to hold the window before it
        (kv_cache.py), everything is computed again. keys: what the prompt's positions are
        compared by where an id does not say all (a picture token's picture: VisionInput.picture_keys);
        default the ids. prepare(keep): awaited once the reused prefix is known, before the prompt
        goes in (the pictures whose tokens are not all reused, encoded)."""
        keys = list(ids) if keys is None else keys
        keep = min(common_prefix(self.cached_keys, keys), len(ids) - 1)
        keep = self.reused = keep if self.engine.kv_writes.holds(keep) else 0
        self.prefilled = len(ids) - keep
        self.engine.roll_back(keep)  # keys/values past `keep` are stale; attention reads positions < pos only
        self.cached, self.cached_keys = ids[:keep], keys[:keep]
        if prepare is not None:
            await prepare(keep)
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
            self.cached_keys = keys + answer[:-1] if answer else keys[:keep]
