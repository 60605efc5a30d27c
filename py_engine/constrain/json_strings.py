"""The JSON string: quotes, escapes, UTF-8 checked byte by byte, optional length limits.

local = (mode, x, count). In CONTENT, x is the UTF-8 state (utf8.py); in HEX1..HEX4 (the digits of
a \\uXXXX escape), x = 1 marks a first digit of D, whose second digit must then be 0-7: escapes of
surrogates are refused, since a lone one is not text (a character past U+FFFF is written as UTF-8).
count is the number of characters so far, as JSON Schema counts them (an escape is one), kept only as
far as the limits need it: without maxLength it stops at minLength, so an unlimited string has one
state for all its length and its masks are cached once.
"""

from .nodes import Node
from .utf8 import NEXT

OPEN, CONTENT, ESCAPE, HEX1, HEX2, HEX3, HEX4 = range(7)
QUOTE, BACKSLASH = 0x22, 0x5C
_SIMPLE_ESCAPES = frozenset(b'"\\/bfnrt')
_HEX = frozenset(b"0123456789abcdefABCDEF")
_BELOW_8 = frozenset(b"01234567")


class String(Node):
    init = (OPEN, 0, 0)
    first = frozenset((QUOTE,))

    def __init__(self, min_length: int = 0, max_length: int | None = None):
        self.min_length, self.max_length = min_length, max_length
        self.empty = max_length is not None and max_length < min_length
        self.limited = bool(min_length) or max_length is not None

    def _count(self, count: int) -> int:
        """count + 1, kept only as far as the limits look."""
        if self.max_length is None:
            return min(count + 1, self.min_length)
        return count + 1

    def feed(self, local, byte, parent, out):
        mode, x, count = local
        if mode == CONTENT:
            if x:
                after = NEXT[x * 256 + byte]
                if after >= 0:
                    out.append((self, (CONTENT, after, count), parent))
                return
            if byte == QUOTE:
                if count >= self.min_length:
                    out.append(parent)
                return
            if byte < 0x20 or (self.max_length is not None and count >= self.max_length):
                return
            if byte == BACKSLASH:
                out.append((self, (ESCAPE, 0, self._count(count)), parent))
                return
            after = NEXT[byte]
            if after >= 0:
                out.append((self, (CONTENT, after, self._count(count)), parent))
        elif mode == OPEN:
            if byte == QUOTE:
                out.append((self, (CONTENT, 0, 0), parent))
        elif mode == ESCAPE:
            if byte in _SIMPLE_ESCAPES:
                out.append((self, (CONTENT, 0, count), parent))
            elif byte == 0x75:  # u
                out.append((self, (HEX1, 0, count), parent))
        elif byte in _HEX:
            if mode == HEX1:
                out.append((self, (HEX2, int(byte in b"dD"), count), parent))
            elif mode == HEX2:
                if not x or byte in _BELOW_8:
                    out.append((self, (HEX3, 0, count), parent))
            else:
                out.append((self, (HEX4, 0, count) if mode == HEX3 else (CONTENT, 0, count), parent))

    def content(self, local):
        """(utf8 state, count) when the string is between escapes, for the mask's fast path; else None."""
        mode, x, count = local
        return (x, count) if mode == CONTENT else None
