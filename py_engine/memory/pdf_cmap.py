"""CMaps (ISO 32000-1 §9.7.5, §9.10.3): a ToUnicode CMap's code -> text maps (bfchar, bfrange) and any
CMap's codespace ranges, which say how a string's bytes split into codes (one byte, two, or a mix)."""

from .pdf_syntax import Lexer


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
                if isinstance(target, list):
                    item = target[value - first] if value - first < len(target) else b""
                    return _unicode(item) if isinstance(item, bytes) else ""
                bits = 8 * len(target)  # the offset adds to the target's last character, wrapping like a counter
                return _unicode(
                    ((int.from_bytes(target, "big") + value - first) % (1 << bits)).to_bytes(len(target), "big")
                )
        return None


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
                if isinstance(code, bytes) and isinstance(target, bytes):
                    cmap.chars[code] = _unicode(target)
        elif operator == "endbfrange":
            for first, last, target in zip(strings[::3], strings[1::3], strings[2::3]):
                if isinstance(first, bytes) and isinstance(last, bytes) and first and len(first) == len(last):
                    if isinstance(target, list) or target:
                        low, high = int.from_bytes(first, "big"), int.from_bytes(last, "big")
                        cmap.ranges.append((len(first), low, high, target))
    cmap.codespace.sort()
    return cmap
