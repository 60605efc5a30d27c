"""JSON arrays and objects, the whitespace between their parts, and "any JSON value".

Whitespace between tokens is one space, or a newline and an indent of at most MAX_INDENT spaces or
tabs (next_ws): what compact and pretty-printed JSON hold, and no more, so that a model cannot emit
whitespace forever, and a weak one spends few tokens on it (seen: a 20-byte run allowed at every
position let a random model spend 200 tokens on whitespace in a 60-byte call); the top-level
value has none around it. An object of a schema
emits its declared properties in schema order, each at most once, skipping optional ones; the key
bytes are matched against the keys still possible (`_keys[i]`: every prefix of every key that may
come next when property i is the first not yet passed). Counts (array items) are kept only as far
as minItems / maxItems look, so that unlimited arrays have few states and their masks cache well.
"""

import json

from .json_numbers import Number
from .json_strings import String
from .nodes import NEVER, LiteralSet, Node, Union

MAX_INDENT = 16
SPACED = -1  # the run was one space: it is over


def next_ws(ws: int, byte: int) -> int | None:
    """The whitespace run after `byte` (0: none yet; SPACED; 1 + k: a newline and k indent
    bytes), or None where the byte may not extend it."""
    if ws == 0:
        return SPACED if byte == 0x20 else 1 if byte == 0x0A else None
    return ws + 1 if 0 < ws <= MAX_INDENT and byte in (0x20, 0x09) else None


OPEN, AFTER_OPEN, KEY, COLON, VALUE, AFTER_VALUE, BEFORE_KEY = range(7)
COMMA, COLON_BYTE, QUOTE = 0x2C, 0x3A, 0x22


class Array(Node):
    """local = (phase, items so far, whitespace run). AFTER_VALUE follows an item, BEFORE_KEY a comma."""

    init = (OPEN, 0, 0)
    first = frozenset(b"[")

    def __init__(self, item: Node, min_items: int = 0, max_items: int | None = None):
        if item.empty:
            max_items = 0 if max_items is None else min(max_items, 0)
        self.item, self.min_items, self.max_items = item, min_items, max_items
        self.empty = max_items is not None and max_items < min_items

    def feed(self, local, byte, parent, out):
        phase, count, ws = local
        if phase == OPEN:
            if byte == 0x5B:
                out.append((self, (AFTER_OPEN, 0, 0), parent))
        elif (run := next_ws(ws, byte)) is not None:
            out.append((self, (phase, count, run), parent))
        elif phase == AFTER_VALUE:
            if byte == COMMA and (self.max_items is None or count < self.max_items):
                out.append((self, (BEFORE_KEY, count, 0), parent))
            elif byte == 0x5D and count >= self.min_items:
                out.append(parent)
        elif phase == AFTER_OPEN and byte == 0x5D:
            if self.min_items == 0:
                out.append(parent)
        elif byte in self.item.first and (self.max_items is None or count < self.max_items):
            count = count + 1 if self.max_items is not None else min(count + 1, self.min_items)
            self.item.feed(self.item.init, byte, (self, (AFTER_VALUE, count, 0), parent), out)


class Object(Node):
    """An object with declared properties. local = (phase, property index, whitespace run or key bytes)."""

    init = (OPEN, 0, 0)
    first = frozenset(b"{")

    def __init__(self, properties: list[tuple[str, Node, bool]]):
        """properties: (name, value grammar, required) in the order they are to be written."""
        self.empty = any(required and value.empty for _, value, required in properties)
        properties = [p for p in properties if not p[1].empty]
        self.values = [value for _, value, _ in properties]
        required = [req for _, _, req in properties]
        keys = [json.dumps(name, ensure_ascii=False)[1:].encode("utf-8") for name, _, _ in properties]
        count = len(properties)
        self._may_close = [not any(required[i:]) for i in range(count + 1)]
        self._keys: list[dict[bytes, int]] = []
        for i in range(count):
            prefixes: dict[bytes, int] = {}
            for j in range(i, count):
                for end in range(1, len(keys[j])):
                    prefixes.setdefault(keys[j][:end], -1)
                prefixes[keys[j]] = j
                if required[j]:
                    break
            self._keys.append(prefixes)

    def feed(self, local, byte, parent, out):
        phase, i, x = local
        if phase == KEY:
            prefix = x + bytes((byte,))
            j = self._keys[i].get(prefix)
            if j is not None:
                out.append((self, (KEY, i, prefix) if j < 0 else (COLON, j, 0), parent))
        elif phase == OPEN:
            if byte == 0x7B:
                out.append((self, (AFTER_OPEN, 0, 0), parent))
        elif (run := next_ws(x, byte)) is not None:
            out.append((self, (phase, i, run), parent))
        elif phase == VALUE:
            value = self.values[i]
            if byte in value.first:
                value.feed(value.init, byte, (self, (AFTER_VALUE, i + 1, 0), parent), out)
        elif phase == COLON:
            if byte == COLON_BYTE:
                out.append((self, (VALUE, i, 0), parent))
        elif phase == AFTER_VALUE and byte == COMMA:
            if i < len(self._keys):
                out.append((self, (BEFORE_KEY, i, 0), parent))
        elif byte == 0x7D:
            if phase != BEFORE_KEY and self._may_close[i]:
                out.append(parent)
        elif byte == QUOTE and phase != AFTER_VALUE and i < len(self._keys):
            out.append((self, (KEY, i, b""), parent))


class FreeObject(Node):
    """An object with any keys, every value of one grammar. local = (phase, whitespace run)."""

    init = (OPEN, 0)
    first = frozenset(b"{")

    def __init__(self, value: Node):
        self.value, self.key = value, String()

    def feed(self, local, byte, parent, out):
        phase, ws = local
        if phase == OPEN:
            if byte == 0x7B:
                out.append((self, (AFTER_OPEN, 0), parent))
        elif (run := next_ws(ws, byte)) is not None:
            out.append((self, (phase, run), parent))
        elif phase == VALUE:
            if byte in self.value.first:
                self.value.feed(self.value.init, byte, (self, (AFTER_VALUE, 0), parent), out)
        elif phase == COLON:
            if byte == COLON_BYTE:
                out.append((self, (VALUE, 0), parent))
        elif phase == AFTER_VALUE and byte == COMMA:
            out.append((self, (BEFORE_KEY, 0), parent))
        elif byte == 0x7D:
            if phase != BEFORE_KEY:
                out.append(parent)
        elif byte == QUOTE and phase != AFTER_VALUE and not self.value.empty:
            self.key.feed(self.key.init, byte, (self, (COLON, 0), parent), out)


SCALARS = LiteralSet([b"true", b"false", b"null"])
_ANY: list[Node] = []


def any_value(depth: int) -> Node:
    """Any JSON value with containers nested at most `depth` deep (at depth 0, only empty ones).
    Shared by every grammar, so that their masks are cached together."""
    while len(_ANY) <= depth:
        inner = _ANY[-1] if _ANY else NEVER
        _ANY.append(Union([String(), Number(), SCALARS, FreeObject(inner), Array(inner)]))
    return _ANY[depth]
