"""Hybrids' recurrent state (conv windows, DeltaNet's S): where it is, and how the engine goes back.

A KV cache holds every position, so the engine goes back by lowering its position: the keys past
it are ignored, then overwritten. A recurrent state holds one position only — the end of what it
has absorbed. The engine goes back often: the GPU-fed decode loop discards the forwards it
submitted past a stop, prompt lookup keeps a prefix of the drafts it verified, the prompt cache
resumes a conversation at the prefix it shares with the cached tokens. So the states are copied
to snapshot slots at the positions those go back to, and a forward that starts anywhere else
first restores the latest snapshot at or before its position and recomputes the tokens in
between (Engine._resume; none: from position 0, where every kernel starts from zeros):
- the turn's slot: the end of a generate's prompt (a chat's next turn shares at least that much,
  even where its template drops the answer's reasoning);
- rolling slots: the start of each decode submit (the loop's stop lands in one of the last
  SUBMITS_AHEAD) and of each verifying forward.
A snapshot stays good while the tokens before its position do: a forward from `pos` drops those
past `pos`. State and snapshots count in the model's footprint (memory.py)."""

from __future__ import annotations

from ..gpu import Copy
from .kv_cache import SUBMITS_AHEAD

ROLLING_SLOTS = SUBMITS_AHEAD + 1
SLOTS = 1 + ROLLING_SLOTS  # the turn's, then the rolling ones


def snapshot_bytes(state_bytes: int) -> int:
    return SLOTS * state_bytes


class RecurrentState:
    def __init__(self, device, executor):
        graph = executor.graph
        self.live = [(executor.buffers[t], t.nbytes) for t in graph.recurrent]
        self.saved_in = [
            device.create_buffer(SLOTS * n, label=f"{t.name} snapshots")
            for t, (_, n) in zip(graph.recurrent, self.live)
        ]
        self.pos = 0  # the tokens the live state has absorbed
        self.slots: list[int | None] = [None] * SLOTS  # the position each slot holds
        self._next_rolling = 0

    def advanced(self, pos: int, rows: int) -> None:
        """A forward of `rows` from `pos` (where the live state must be): snapshots past pos no
        longer match the tokens before them."""
        if pos != self.pos:
            raise RuntimeError(f"recurrent state at {self.pos}, a forward from {pos}")
        self.slots = [s if s is not None and s <= pos else None for s in self.slots]
        self.pos = pos + rows

    def save(self, turn: bool = False) -> list:
        """Copies of the live state (at self.pos) into the turn's slot or the next rolling one;
        none where a slot holds that position already."""
        if self.pos == 0 or (not turn and self.pos in self.slots):
            return []
        if turn:
            slot = 0
        else:
            slot = 1 + self._next_rolling
            self._next_rolling = (self._next_rolling + 1) % ROLLING_SLOTS
        self.slots[slot] = self.pos
        return [Copy(buffer, 0, self.saved_in[i], slot * n, n) for i, (buffer, n) in enumerate(self.live)]

    def latest(self, pos: int) -> tuple[int | None, int]:
        """(the slot, its position) of the latest snapshot at or before pos; (None, 0): none."""
        held = [(s, i) for i, s in enumerate(self.slots) if s is not None and s <= pos]
        if not held:
            return None, 0
        at, slot = max(held)
        return slot, at

    def restore(self, slot: int | None) -> list:
        """Copies of a slot's snapshot into the live state (None: the state restarts at 0)."""
        if slot is None:
            self.pos = 0
            return []
        self.pos = self.slots[slot]
        return [Copy(self.saved_in[i], slot * n, buffer, 0, n) for i, (buffer, n) in enumerate(self.live)]
