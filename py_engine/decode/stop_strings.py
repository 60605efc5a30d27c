"""Stop strings over streamed text: the answer ends before the first occurrence of any of them.

Text is released as it streams except the shortest tail that could still be the start of a stop
string (it may complete with the next token's text), so a stop string never reaches the client,
even split across tokens."""

from __future__ import annotations


class StopStrings:
    def __init__(self, stops: list[str]):
        self.stops = [s for s in stops if s]
        self.held = ""
        self.stopped = False

    def push(self, text: str) -> str:
        """The text that is safe to send now; after a stop string, nothing more."""
        if self.stopped:
            return ""
        self.held += text
        cut = min((i for i in (self.held.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped = True
            out, self.held = self.held[:cut], ""
            return out
        keep = max((self._partial(s) for s in self.stops), default=0)
        out = self.held[: len(self.held) - keep]
        self.held = self.held[len(out) :]
        return out

    def _partial(self, stop: str) -> int:
        """How many of the held text's last characters are a proper prefix of `stop`."""
        for n in range(min(len(stop) - 1, len(self.held)), 0, -1):
            if self.held.endswith(stop[:n]):
                return n
        return 0

    def flush(self) -> str:
        out, self.held = ("" if self.stopped else self.held), ""
        return out
