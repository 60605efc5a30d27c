"""GPU memory: liveness pooling of activations, and the budget check that runs before any upload.

A web page that asks for more GPU memory than the OS grants is not told: iOS kills the tab (the
web-content budget is about 1.5-2 GB, Pyodide and the page included). So the engine adds up what
a model will hold — weights, KV cache, pooled activations, the rest — from its graph, before a
byte is uploaded, and refuses with a message that says what would fit instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import WispError
from .graph import Graph, Tensor
from .recurrent_state import snapshot_bytes

MB = 1 << 20


class ModelTooLargeError(WispError):
    """The model, at the asked context, needs more GPU memory than this device's budget."""


def pool_activations(graph: Graph) -> tuple[dict[Tensor, int], list[int]]:
    """(activation tensor → pool slot, slot sizes): a slot is reused once its tensor's last reader
    has run; an op's outputs never share a slot with its inputs (released only after the op)."""
    last_use = {}
    for i, op in enumerate(graph.ops):
        for t in op.bind.values():
            last_use[t] = i
    slot_of: dict[Tensor, int] = {}
    sizes: list[int] = []
    free: dict[int, list[int]] = {}
    for i, op in enumerate(graph.ops):
        for t in op.bind.values():
            if t.kind != "activation" or t in slot_of:
                continue
            bucket = free.get(t.nbytes)
            if bucket:
                slot_of[t] = bucket.pop()
            else:
                slot_of[t] = len(sizes)
                sizes.append(t.nbytes)
        for t in op.bind.values():
            if t.kind == "activation" and last_use[t] == i:
                free.setdefault(t.nbytes, []).append(slot_of[t])
    return slot_of, sizes


@dataclass(frozen=True)
class Footprint:
    weights: int
    kv_cache: int
    activations: int
    other: int  # inputs, logits, op params, sampling buffers
    recurrent: int = 0  # hybrids: conv and DeltaNet states and their snapshots (recurrent_state.py)

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations + self.other + self.recurrent

    def describe(self) -> str:
        return (
            f"{size(self.total)} (weights {size(self.weights)}, KV cache {size(self.kv_cache)}, "
            f"activations {size(self.activations)}, other {size(self.other)}"
            + (f", recurrent state {size(self.recurrent)})" if self.recurrent else ")")
        )


def size(nbytes: int) -> str:
    if nbytes >= 10 * MB:
        return f"{nbytes / MB:.0f} MB"
    return f"{nbytes / MB:.1f} MB" if nbytes >= MB else f"{nbytes / 1024:.0f} KB"


def footprint(graph: Graph, vocab_size: int, context: int) -> Footprint:
    used = {t for op in graph.ops for t in op.bind.values()}
    by_kind: dict[str, int] = {}
    for t in used:
        if t.kind != "weight":
            by_kind[t.kind] = by_kind.get(t.kind, 0) + t.nbytes
    # a weight is uploaded once per (checkpoint tensors, rows, format): a tied LM head is the embedding
    by_kind["weight"] = sum({(t.weight, t.rows, t.dtype): t.nbytes for t in used if t.kind == "weight"}.values())
    sampling = 4 * context + 12 * vocab_size  # penalty ids, top-k lists, argmax partials (sampling.py)
    other = by_kind.get("input", 0) + by_kind.get("output", 0) + by_kind.get("dummy", 0) + 256 * len(graph.ops)
    recurrent = sum(t.nbytes for t in graph.recurrent)
    return Footprint(
        by_kind.get("weight", 0),
        by_kind.get("state", 0) - recurrent,
        sum(pool_activations(graph)[1]),
        other + sampling,
        recurrent + snapshot_bytes(recurrent),
    )


def largest_context(fits, upper: int, step: int = 64) -> int:
    """The largest multiple of `step` below `upper` for which fits(context) holds (0: none);
    fits is monotonic (a longer context never needs less)."""
    lo, hi = 0, (upper - 1) // step  # in steps; fits(lo * step) is assumed, fits(upper) is not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid * step):
            lo = mid
        else:
            hi = mid - 1
    return lo * step


def too_large(need: Footprint, budget: int, model: str, context: int, fitting_context: int) -> ModelTooLargeError:
    hint = (
        f"a context of at most {fitting_context} tokens would fit"
        if fitting_context
        else "even a short context would not fit: choose a smaller model"
    )
    return ModelTooLargeError(
        f"{model} at a context of {context} tokens needs {need.describe()} of GPU memory, more than this "
        f"device's budget of {size(budget)}; {hint}. (A page over budget is killed without a warning "
        "on iPad and iPhone, so Wisp refuses before loading.)"
    )
