"""PDF tokens and objects (ISO 32000-1 §7.2-7.3), read in place from one bytes object: numbers, strings
(bytes), names (Name), arrays (list), dictionaries (dict keyed by Name), references (Ref), null (None) and
bare keywords (Keyword: `obj`, `stream`, a content stream's operators). The same lexer reads content
streams and CMaps, which are sequences of operands each followed by an operator."""

import re
from typing import NamedTuple


class PdfProblem(Exception):
    """Why a PDF cannot be read; pdf.py turns it into a DocumentError naming the document."""


class PdfLimit(PdfProblem):
    """A document passed one of ReadLimits' caps: never repaired around, always reported."""


class Name(str):
    __slots__ = ()


class Keyword(str):
    __slots__ = ()


class Ref(NamedTuple):
    num: int
    gen: int


class Stream:
    """A stream object: its dictionary and its raw (still encoded) bytes, a view into the file's
    (a decrypted copy in an encrypted file)."""

    __slots__ = ("dict", "raw")

    def __init__(self, dictionary: dict, raw: memoryview | bytes):
        self.dict = dictionary
        self.raw = raw


_GAP = re.compile(rb"(?:[\x00\t\n\f\r ]+|%[^\r\n]*)*")
_REGULAR = re.compile(rb"[^\x00\t\n\f\r ()<>\[\]{}/%]+")
_INT = re.compile(rb"[+-]?\d+\Z")
_REAL = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)\Z")
_REF_TAIL = re.compile(rb"[\x00\t\n\f\r ]+(\d+)[\x00\t\n\f\r ]+R(?![^\x00\t\n\f\r ()<>\[\]{}/%])")
_NAME_ESCAPE = re.compile(rb"#([0-9A-Fa-f]{2})")
_NOT_HEX = re.compile(rb"[^0-9A-Fa-f]")
_STRING_SPECIAL = re.compile(rb"[()\\\r]")
_OCTAL = re.compile(rb"[0-7]{1,3}")
# An inline image's data runs from `ID` to an `EI` standing alone (BI ... ID data EI).
_INLINE_IMAGE_END = re.compile(rb"[\x00\t\n\f\r ]EI(?![^\x00\t\n\f\r ()<>\[\]{}/%])")
_ESCAPES = {ord(k): v for k, v in zip("nrtbf()\\", b"\n\r\t\b\f()\\")}
_CONSTANTS = {b"true": True, b"false": False, b"null": None}


class Lexer:
    def __init__(self, data: bytes, max_depth: int):
        self.data = data
        self.max_depth = max_depth

    def skip(self, pos: int) -> int:
        """The position after any whitespace and comments at `pos`."""
        return _GAP.match(self.data, pos).end()

    def read(self, pos: int, depth: int = 0):
        """(the object at or after `pos`, the position after it)."""
        data = self.data
        pos = self.skip(pos)
        if pos >= len(data):
            raise PdfProblem("the data ends in the middle of an object")
        c = data[pos]
        if c == 0x2F:  # /Name
            m = _REGULAR.match(data, pos + 1)
            end = m.end() if m else pos + 1
            raw = data[pos + 1 : end]
            if b"#" in raw:
                raw = _NAME_ESCAPE.sub(lambda e: bytes([int(e[1], 16)]), raw)
            return Name(raw.decode("latin-1")), end
        if c == 0x28:
            return self._literal(pos + 1)
        if c == 0x3C:
            if data.startswith(b"<<", pos):
                return self._dictionary(pos + 2, depth)
            end = data.find(b">", pos)
            if end < 0:
                raise PdfProblem("a hex string is not closed")
            digits = _NOT_HEX.sub(b"", data[pos + 1 : end])
            return bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode()), end + 1
        if c == 0x5B:
            return self._array(pos + 1, depth)
        m = _REGULAR.match(data, pos)
        if m is None:  # a delimiter out of place: ) > ] { }
            return Keyword(chr(c)), pos + 1
        token, end = m.group(), m.end()
        if _INT.match(token):
            tail = _REF_TAIL.match(data, end)
            if tail:
                return Ref(int(token), int(tail[1])), tail.end()
            return int(token), end
        if _REAL.match(token):
            return float(token), end
        if token in _CONSTANTS:
            return _CONSTANTS[token], end
        return Keyword(token.decode("latin-1")), end

    def _nest(self, depth: int) -> None:
        if depth >= self.max_depth:
            raise PdfLimit(f"objects are nested more than {self.max_depth} deep")

    def _array(self, pos: int, depth: int):
        self._nest(depth)
        data, out = self.data, []
        while True:
            pos = self.skip(pos)
            if data.startswith(b"]", pos):
                return out, pos + 1
            item, pos = self.read(pos, depth + 1)
            out.append(item)

    def _dictionary(self, pos: int, depth: int):
        self._nest(depth)
        data, out = self.data, {}
        while True:
            pos = self.skip(pos)
            if data.startswith(b">>", pos):
                return out, pos + 2
            key, pos = self.read(pos, depth + 1)
            if type(key) is not Name:
                raise PdfProblem(f"a dictionary key is {key!r}, not a name")
            pos = self.skip(pos)
            if data.startswith(b">>", pos):  # a key without a value: read as null
                out[key] = None
                return out, pos + 2
            out[key], pos = self.read(pos, depth + 1)

    def _literal(self, pos: int):
        """A (literal string) from after its `(`: nested parentheses balance, escapes are undone."""
        data, out, depth = self.data, bytearray(), 1
        while True:
            m = _STRING_SPECIAL.search(data, pos)
            if m is None:
                raise PdfProblem("a string is not closed")
            i = m.start()
            out += data[pos:i]
            c = data[i]
            pos = i + 1
            if c == 0x28:
                depth += 1
                out.append(c)
            elif c == 0x29:
                depth -= 1
                if depth == 0:
                    return bytes(out), pos
                out.append(c)
            elif c == 0x0D:  # an end of line inside a string reads as \n, whatever it was
                out.append(0x0A)
                pos += data.startswith(b"\n", pos)
            elif pos < len(data):
                e = data[pos]
                pos += 1
                if e in _ESCAPES:
                    out.append(_ESCAPES[e])
                elif e == 0x0D:  # a backslash before an end of line continues the string
                    pos += data.startswith(b"\n", pos)
                elif 0x30 <= e <= 0x37:
                    digits = _OCTAL.match(data, pos - 1).group()
                    out.append(int(digits, 8) & 0xFF)
                    pos += len(digits) - 1
                elif e != 0x0A:  # an unknown escape is the character itself
                    out.append(e)

    def operations(self):
        """(operands, operator) for each operator of a content stream or CMap; an inline image's
        data (between ID and EI) is skipped."""
        data, operands, pos = self.data, [], 0
        while (pos := self.skip(pos)) < len(data):
            obj, pos = self.read(pos)
            if type(obj) is not Keyword:
                operands.append(obj)
                continue
            if obj == "ID":
                m = _INLINE_IMAGE_END.search(data, pos)
                pos = m.end() if m else len(data)
            yield operands, obj
            operands = []
