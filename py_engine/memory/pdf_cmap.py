"""CMaps (ISO 32000-1 §9.7.5, §9.10.3): a ToUnicode CMap's code -> text maps (bfchar, bfrange) and any
CMap's codespace ranges, which say how a string's bytes split into codes (one byte, two, or a mix)."""

from .pdf_syntax import Lexer

# Codes one CMap may map: fonts have at most 65,536 glyphs, so more is a bomb (the rest are ignored).
_MAX_CODES = 1 << 17


class CMap:
    def __init__(self):
        self.codespace: list[tuple[int, int, int]] = []  # (bytes per code, lowest, highest)
        self.chars: dict[bytes, str] = {}
        self.ranges: list[tuple[int, int, int, object]] = []  # (bytes, first, last, text of first or list)

    def split(self, data: bytes, default_width: int) -> list[bytes]:
        """A string's codes, by the codespace ranges (else `default_width` bytes each)."""
        if not self.codespace:
            return [data[i : i + default_width] for i in range(0, len(data), default_width)]
        codes, i = [], 0
        shortest = min(width for width, _, _ in self.codespace)
        while i < len(data):
            for width, low, high in self.codespace:
                code = data[i : i + width]
                if len(code) == width and low <= int.from_bytes(code, "big") <= high:
                    break
            else:
                code = data[i : i + shortest]
            codes.append(code)
            i += len(code)
        return codes

    def text(self, code: bytes) -> str | None:
        """The text a code maps to; None when the CMap does not map it."""
        found = self.chars.get(code)
        if found is not None:
            return found
        value = int.from_bytes(code, "big")
        for width, first, last, target in self.ranges:
            if width == len(code) and first <= value <= last:
                return _range_text(target, value - first)
        return None

    def add_range(self, width: int, first: int, last: int, target) -> None:
        """A bfrange; one within a last byte's 256 codes, as the spec has them, goes into the dictionary
        (a CJK font's CMap has thousands of ranges: looking each code up in a list would be slow)."""
        if len(self.chars) + len(self.ranges) >= _MAX_CODES:
            return
        if last - first < 256:
            for value in range(first, last + 1):
                self.chars[value.to_bytes(width, "big")] = _range_text(target, value - first)
        else:
            self.ranges.append((width, first, last, target))


def _range_text(target, offset: int) -> str:
    """The text of the code `offset` past a bfrange's first: an item of its list, or its first
    target with the offset added to the last character, wrapping like a counter."""
    if isinstance(target, list):
        item = target[offset] if offset < len(target) else b""
        return _unicode(item) if isinstance(item, bytes) else ""
    bits = 8 * len(target)
    return _unicode(((int.from_bytes(target, "big") + offset) % (1 << bits)).to_bytes(len(target), "big"))


def _unicode(target: bytes) -> str:
    """A bf target: UTF-16BE (a surrogate pair or several characters for a ligature), or from a few
    writers one byte."""
    if len(target) == 1:
        return chr(target[0])
    return target.decode("utf-16-be", "ignore")


def parse_cmap(data: bytes, max_depth: int) -> CMap:
    cmap = CMap()
    for operands, operator in Lexer(data, max_depth).operations():
        strings = [o for o in operands if isinstance(o, (bytes, list))]
        if operator == "endcodespacerange":
            for low, high in zip(strings[::2], strings[1::2]):
                if isinstance(low, bytes) and isinstance(high, bytes) and 0 < len(low) == len(high) <= 4:
                    cmap.codespace.append((len(low), int.from_bytes(low, "big"), int.from_bytes(high, "big")))
        elif operator == "endbfchar":
            for code, target in zip(strings[::2], strings[1::2]):
                if isinstance(code, bytes) and isinstance(target, bytes) and len(cmap.chars) < _MAX_CODES:
                    cmap.chars[code] = _unicode(target)
        elif operator == "endbfrange":
            for first, last, target in zip(strings[::3], strings[1::3], strings[2::3]):
                if isinstance(first, bytes) and isinstance(last, bytes) and first and len(first) == len(last):
                    if isinstance(target, list) or target:
                        low, high = int.from_bytes(first, "big"), int.from_bytes(last, "big")
                        cmap.add_range(len(first), low, high, target)
    cmap.codespace.sort()
    return cmap
