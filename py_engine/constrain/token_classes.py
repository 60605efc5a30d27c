"""Token classes that let a mask skip most of the vocabulary walk (built once per TokenTable).

Inside a JSON string, a walk would visit tens of thousands of tokens:
- any "plain" token (no quote, backslash or control byte) is allowed as long as
  its UTF-8 fits and the length limit has room. `plain[u]` is their bitset for UTF-8 state u
  (utf8.py), by character count for maxLength. Every other token is a plain prefix, then a suffix run
  through the string grammar once here: either it stays inside the string (an escape: `inside`) or it
  closes the string after j characters, and what follows the quote, its "rest", is for the parent
  to accept. Tokens are grouped by rest (`close_rests`, sorted), so a mask walks the few thousand
  distinct rests from the parent's state, not the vocabulary.
Members are (token id, a bit set of the UTF-8 states its prefix suits, characters).
"""

import re

from . import utf8
from .json_strings import CONTENT, String

_SPECIAL = re.compile(rb'["\\\x00-\x1f]')
_MARK = re.compile(rb'["\\\x00-\x1f\x80-\xff]')


class TokenClasses:
    def __init__(self, ids: list[int], pieces: list[bytes], bits):
        """ids / pieces: the allowed tokens (sorted by bytes); bits(ids) -> a bitset."""
        by_chars: list[dict[int, list[int]]] = [{} for _ in range(utf8.STATES)]
        closing: dict[bytes, list] = {}
        self.inside: list[tuple[int, int, int]] = []
        profiles: dict[bytes, tuple | None] = {}
        for token_id, piece in zip(ids, pieces):
            special = _SPECIAL.search(piece)
            if special is None:
                for state in _states_before(piece):
                    by_chars[state].setdefault(utf8.characters(piece), []).append(token_id)
                continue
            prefix, suffix = piece[: special.start()], piece[special.start() :]
            states = _states_ending_clean(prefix)
            if suffix not in profiles:
                profiles[suffix] = _profile(suffix)
            if not states or profiles[suffix] is None:
                continue
            chars, rest = profiles[suffix]
            member = (token_id, states, utf8.characters(prefix) + chars)
            if rest is None:
                self.inside.append(member)
            else:
                closing.setdefault(rest, []).append(member)
        self._by_chars = [{n: bits(group) for n, group in sorted(by.items())} for by in by_chars]
        self.plain = [_union(by.values()) for by in self._by_chars]
        self._plain_upto: dict[int, list[int]] = {}
        self.close_rests = sorted(closing)
        self.close_members = [closing[rest] for rest in self.close_rests]
        self.indexes = list(range(len(self.close_rests)))

    def plain_upto(self, state: int, chars: int) -> int:
        """plain[state] less the tokens of more than `chars` characters (maxLength's room)."""
        by_chars = self._by_chars[state]
        if chars >= max(by_chars, default=0):
            return self.plain[state]
        upto = self._plain_upto.get(state)
        if upto is None:  # all rooms at once: each adds one group to the one before
            upto, bits = [], 0
            for n in range(max(by_chars) + 1):
                bits |= by_chars.get(n, 0)
                upto.append(bits)
            self._plain_upto[state] = upto
        return upto[chars]


def _union(bitsets) -> int:
    out = 0
    for bits in bitsets:
        out |= bits
    return out


_PROBE = String(0, 1 << 30)  # counts characters the way a limited string does


def _profile(suffix: bytes):
    """Run `suffix` from inside a string between characters: (characters, rest after the closing
    quote) if it closes the string, (characters, None) if it stays inside, None if refused."""
    local = (CONTENT, 0, 0)
    for position, byte in enumerate(suffix):
        out: list = []
        _PROBE.feed(local, byte, None, out)
        if not out:
            return None
        if out[0] is None:
            return local[2], suffix[position + 1 :]
        local = out[0][1]
    return local[2], None


def _states_before(piece: bytes) -> list[int]:
    """The UTF-8 states in which a plain `piece` may come (one starting with a continuation byte
    continues a character; any other only starts between characters)."""
    if piece.isascii():
        return [0]
    if piece[0] & 0xC0 != 0x80:
        return [0] if utf8.run(piece) >= 0 else []
    return [state for state in range(1, utf8.STATES) if utf8.run(piece, state) >= 0]


def _states_ending_clean(prefix: bytes) -> int:
    """A bit set of the UTF-8 states from which `prefix` is valid and ends between characters
    (where a quote or backslash may follow)."""
    if prefix.isascii():
        return 1
    return sum(1 << state for state in range(utf8.STATES) if utf8.run(prefix, state) == 0)


def string_marks(pieces: list) -> list[tuple]:
    """For each piece, the positions of its bytes that are not plain ASCII inside a JSON string."""
    return [tuple(m.start() for m in _MARK.finditer(p)) if _MARK.search(p) else () for p in pieces]
