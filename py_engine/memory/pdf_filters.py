"""Stream filters (ISO 32000-1 §7.4) for the streams a text reader decodes: content streams, object and
cross-reference streams, CMaps. Every decoded stream is held to a cap, and a document's streams to a
total (Budget), checked while decoding: a Flate bomb is refused after inflating at most the cap, never
in full. Picture-only filters (DCT, JPX, CCITT, JBIG2) are never needed for text and are refused."""

import base64
import zlib

from .limits import size_text
from .pdf_syntax import PdfLimit, PdfProblem

_CHUNK = 1 << 16  # compressed bytes fed to zlib at a time, so the output cap is checked as it grows
_WHITESPACE = b"\x00\t\n\f\r "


class Budget:
    """The decoded bytes a document may still spend, and the most one stream may take."""

    def __init__(self, per_stream: int, total: int):
        self.per_stream = per_stream
        self.total = total
        self.left = total

    def cap(self) -> int:
        return min(self.per_stream, self.left)

    def check(self, n: int) -> None:
        """Refuse output of n bytes past the cap."""
        if n > self.per_stream:
            raise PdfLimit(f"a stream decodes to more than {size_text(self.per_stream)} (a compression bomb?)")
        if n > self.left:
            raise PdfLimit(f"its streams decode to more than {size_text(self.total)} in all (a compression bomb?)")

    def spend(self, n: int) -> None:
        self.check(n)
        self.left -= n


def decode(raw: memoryview, filters, parms, budget: Budget) -> bytes:
    """A stream's bytes after its filters, in order. `filters`: a name, a list of names or None;
    `parms`: the matching /DecodeParms (a dictionary, a list of them, or None)."""
    filters = filters if isinstance(filters, list) else [] if filters is None else [filters]
    parms = parms if isinstance(parms, list) else [parms] * len(filters)
    data = raw
    for name, parm in zip(filters, parms + [None] * len(filters)):
        parm = parm if isinstance(parm, dict) else {}
        if name not in ("FlateDecode", "Fl"):  # zlib reads the view in place; the others need bytes
            data = bytes(data)
        if name in ("FlateDecode", "Fl"):
            data = _unpredict(_inflate(data, budget), parm)
        elif name in ("LZWDecode", "LZW"):
            data = _unpredict(_lzw(data, parm.get("EarlyChange", 1), budget), parm)
        elif name in ("ASCIIHexDecode", "AHx"):
            digits = data.split(b">", 1)[0].translate(None, _WHITESPACE)
            try:
                data = bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode("latin-1"))
            except ValueError:
                raise PdfProblem("an ASCIIHex stream holds other characters than hex digits") from None
        elif name in ("ASCII85Decode", "A85"):
            text = data.translate(None, _WHITESPACE).removeprefix(b"<~").split(b"~>", 1)[0]
            try:
                data = base64.a85decode(text)
            except ValueError:
                raise PdfProblem("an ASCII85 stream is damaged") from None
        elif name in ("RunLengthDecode", "RL"):
            data = _run_length(data, budget)
        else:
            raise PdfProblem(f"a stream needed for text is encoded with {name!r}, which is not read")
        budget.spend(len(data))
    return bytes(data)


def _inflate(raw: memoryview, budget: Budget) -> bytes:
    """Flate-decoded bytes, within the budget's cap (more: PdfLimit). A damaged stream gives what came
    before the damage; a stream without the zlib header (raw deflate, from some writers) is read too."""
    view, cap = memoryview(raw), budget.cap()
    for wbits in (zlib.MAX_WBITS, -zlib.MAX_WBITS):
        inflater, out = zlib.decompressobj(wbits), bytearray()
        try:
            for start in range(0, len(view), _CHUNK):
                out += inflater.decompress(view[start : start + _CHUNK], cap + 1 - len(out))
                if len(out) > cap:  # output stopped at max_length with input left (unconsumed_tail): refuse
                    budget.check(len(out))
                if inflater.eof:
                    break
        except zlib.error as e:
            if not out:
                problem = e
                continue
        return bytes(out)
    raise PdfProblem(f"a Flate stream is damaged ({problem})")


def _unpredict(data: bytes, parm: dict) -> bytes:
    """Undo a PNG (10-15) or TIFF (2) predictor, as xref streams use (PNG Up, mostly)."""
    predictor = parm.get("Predictor", 1)
    if predictor not in (2, 10, 11, 12, 13, 14, 15):
        return data
    colors, bits, columns = parm.get("Colors", 1), parm.get("BitsPerComponent", 8), parm.get("Columns", 1)
    if not all(isinstance(v, int) and 0 < v <= 1 << 16 for v in (colors, bits, columns)):
        raise PdfProblem("a predictor's parameters are not small positive integers")
    step = max(1, colors * bits // 8)  # bytes from one pixel to the next
    width = (colors * bits * columns + 7) // 8
    if predictor == 2:
        if bits != 8:
            raise PdfProblem("a TIFF predictor with other than 8 bits per component is not read")
        out = bytearray(data)
        for row in range(0, len(out), width):
            for i in range(row + step, min(row + width, len(out))):
                out[i] = (out[i] + out[i - step]) & 0xFF
        return bytes(out)
    out, above = bytearray(), bytearray(width)
    for start in range(0, len(data), width + 1):
        kind, row = data[start], bytearray(data[start + 1 : start + 1 + width])
        for i in range(len(row)):
            left = row[i - step] if i >= step else 0
            if kind == 1:
                row[i] = (row[i] + left) & 0xFF
            elif kind == 2:
                row[i] = (row[i] + above[i]) & 0xFF
            elif kind == 3:
                row[i] = (row[i] + (left + above[i]) // 2) & 0xFF
            elif kind == 4:
                corner = above[i - step] if i >= step else 0
                guess = left + above[i] - corner
                near = min(
                    (abs(guess - left), 0, left), (abs(guess - above[i]), 1, above[i]), (abs(guess - corner), 2, corner)
                )
                row[i] = (row[i] + near[2]) & 0xFF
        out += row
        above = row + bytearray(width - len(row))
    return bytes(out)


def _lzw(data: bytes, early_change, budget: Budget) -> bytes:
    cap = budget.cap()
    table = [bytes([i]) for i in range(256)] + [b"", b""]
    out, previous, width, bits, held = bytearray(), None, 9, 0, 0
    for byte in data:
        bits, held = (bits << 8) | byte, held + 8
        while held >= width:
            held -= width
            code, bits = bits >> held, bits & ((1 << held) - 1)
            if code == 256:  # clear the table
                del table[258:]
                previous, width = None, 9
                continue
            if code == 257:  # end of data
                return bytes(out)
            if code < len(table):
                entry = table[code]
                if previous is not None:
                    table.append(previous + entry[:1])
            elif code == len(table) and previous is not None:
                entry = previous + previous[:1]
                table.append(entry)
            else:
                raise PdfProblem("an LZW stream is damaged")
            out += entry
            if len(out) > cap:
                budget.check(len(out))
            previous = entry
            if len(table) + (early_change == 1) >= 1 << width and width < 12:
                width += 1
    return bytes(out)


def _run_length(data: bytes, budget: Budget) -> bytes:
    cap, out, i = budget.cap(), bytearray(), 0
    while i < len(data) and data[i] != 128:
        n = data[i]
        if n < 128:
            out += data[i + 1 : i + 2 + n]
            i += n + 2
        else:
            out += data[i + 1 : i + 2] * (257 - n)
            i += 2
        if len(out) > cap:
            budget.check(len(out))
    return bytes(out)
