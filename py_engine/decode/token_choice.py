"""The draw's decision in Python from the top-k candidates (py_engine/decode/sampling.py explains the
semantics and when the candidates cannot decide), and the sampling parameters. sample_pick.wgsl is
its f32 port for decoding on the GPU; this stays the reference."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class SamplingParams:
    temperature: float = 0.0  # 0 → greedy (argmax after the penalty)
    top_k: int = 0  # 0 → no top-k
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    # Draws continue one random.Random(seed) until the seed changes or Sampler.reset() is called.
    seed: int | None = None
    # Prompt-lookup decoding (py_engine/decode/prompt_lookup.py): the same tokens, faster where the answer
    # copies the conversation; no effect with a repetition penalty.
    lookup: bool = False


@dataclass
class FullDraw:
    """What `sample_full.wgsl` needs beyond the row: the kept set's cuts, and what to skip."""

    top_k: int  # vocab → no top-k cut
    top_p: float
    u: float
    skip_candidates: bool = False


def check_params(params: SamplingParams) -> None:
    if params.temperature < 0 or params.top_k < 0 or not 0 <= params.top_p <= 1:
        raise ValueError(f"invalid sampling parameters {params}")
    if params.repetition_penalty <= 0:
        raise ValueError(f"repetition_penalty must be > 0, got {params.repetition_penalty}")


def choose(
    values: list[float], ids: list[int], lse: float, params: SamplingParams, vocab: int, u: float
) -> int | FullDraw:
    """The token drawn at u from the sorted candidates (logits `values`, ids `ids`) of a row whose
    log-sum-exp of logits / temperature is lse, or the GPU draw that decides it."""
    probs = [math.exp(v / params.temperature - lse) for v in values]  # of the whole row's softmax
    n = len(values)
    # complete: the kept set lies within the candidates, so their probabilities decide everything.
    if 0 < params.top_k < vocab:
        kth = params.top_k - 1
        if kth >= n:
            return FullDraw(params.top_k, params.top_p, u)
        keep = kth + 1
        while keep < n and values[keep] == values[kth]:
            keep += 1
        if keep == n < vocab:  # the tie at the cut may go on past the candidates
            return FullDraw(params.top_k, params.top_p, u)
        probs, complete = probs[:keep], True
    else:
        complete = n == vocab
    # `mass` is the kept set's mass: the candidates' sum when they hold all of it, else the row's.
    mass = sum(probs) if complete else 1.0
    if params.top_p < 1:
        need, running, keep = params.top_p * mass, 0.0, 0
        while keep < len(probs) and (keep == 0 or running < need):
            running += probs[keep]
            keep += 1
        if running < need and not complete:
            return FullDraw(vocab, params.top_p, u)
        probs, mass, complete = probs[:keep], running, True
    target = u * mass
    running = 0.0
    for token, q in zip(ids, probs):
        running += q
        if target < running:
            return token
    if complete:  # rounding at the top of the range
        return ids[len(probs) - 1]
    tail_u = min(max((target - running) / (mass - running), 0.0), math.nextafter(1.0, 0.0))
    return FullDraw(vocab, 1.0, tail_u, skip_candidates=True)
