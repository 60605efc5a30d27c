"""How the KV caches are kept: their formats, and the sliding layers' rings.

A layer that attends to a window of W keys (the query at position q sees keys q - W < k <= q)
keeps `ring` rows of keys and values, position p at row p % ring, instead of a row for every
position of the context (Gemma 3: five layers in six).

A forward appends its rows [pos, pos + rows) before its attention reads them, so every row's
window must survive the whole forward's appends: ring >= W + rows - 1. Positions also roll back:
the GPU-fed decode loop discards the forwards it submitted past a stop, prompt lookup keeps a
prefix of the drafts it verified, the prompt cache goes on from the prefix it shares with the
cached tokens. A position s written since overwrote the key of s - ring; a forward from pos needs
keys from pos - W + 1, so it finds its window while every position written since is below
pos - W + 1 + ring, that is while (the end of the positions written) - pos <= ring - W + 1: the
ring's slack. Rings are sized by the slack the engine needs (ring_slack), and KVWrites tells
whether a forward from some position keeps within it (the prompt cache recomputes from position 0
where not, as llama.cpp does for its SWA cache). A forward from position 0 needs no earlier key.
"""

from __future__ import annotations

from .linear_plan import LOGIT_ROWS_MAX

TOKENS_PER_SUBMIT = 8  # decode forwards one submit carries at most (decode/on_gpu.py)
SUBMITS_AHEAD = 2  # decode submits in flight at most (where reads overlap; else one)


def kv_formats(tensors: dict, half: bool, packed: bool) -> tuple[str, str]:
    """The (K, V) caches' formats (kernels.KV_WORDS; shaders/rope_kv.wgsl says why): packed f16
    pairs where asked (WebKit: half the memory, no native f16); else K in f32 and V following the
    checkpoint's precision: f16 on shader-f16 devices unless a matrix is stored in f32 (its owner
    asked for full precision); quantized models take f16."""
    if packed:
        return "f16_packed", "f16_packed"
    matrices = [t for t in tensors.values() if len(t.shape) == 2]
    return "f32", "f16" if half and all(t.dtype != "F32" for t in matrices) else "f32"


def ring_slack(max_rows: int) -> int:
    """The slack every ring keeps (GraphBuilder ring_slack: ring = W - 1 + slack): a forward's
    rows (max_rows; picks_after's LOGIT_ROWS_MAX) and the decode loop's rollback: at a stop, up to
    SUBMITS_AHEAD groups of TOKENS_PER_SUBMIT forwards but the stop's own were submitted past it."""
    return max(max_rows, LOGIT_ROWS_MAX, SUBMITS_AHEAD * TOKENS_PER_SUBMIT - 1)


class KVWrites:
    """Where the positions written to the KV caches end, since the last forward from position 0
    (the engine's rollbacks leave rows written past its position)."""

    def __init__(self, slack: int | None):
        self.slack = slack  # None: no ring (every cache holds the whole context)
        self.end = 0

    def holds(self, pos: int) -> bool:
        """Whether a forward from `pos` finds every key of its rows' windows in the rings."""
        return self.slack is None or pos == 0 or self.end - pos <= self.slack

    def forward(self, pos: int, rows: int) -> None:
        """Record a forward of `rows` from `pos`; refused where the rings would not hold its window."""
        end = pos + rows if pos == 0 else max(self.end, pos + rows)
        if self.slack is not None and pos and end - pos > self.slack:
            raise ValueError(
                f"the sliding layers' KV rings no longer hold the keys before position {pos}: positions up "
                f"to {end} were written, more than their slack of {self.slack} past it; recompute from 0"
            )
        self.end = end
