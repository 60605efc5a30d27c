"""A small PDF writer for the PDF reader's tests (py_engine/memory/pdf.py): numbered objects written with a
classic xref table, or with an xref stream (PNG-Up predicted, as real writers do) and some objects packed
into an object stream; incremental updates appended to a file. Deliberately plain: each test builds the
few objects it needs, so what a test feeds the reader is visible in the test."""

import re
import zlib


def stream(data: bytes, extra: str = "", flate: bool = False) -> bytes:
    """A stream object's body; `extra` adds dictionary entries (a /Filter of your own, /Type ...)."""
    if flate:
        data, extra = zlib.compress(data), f"{extra} /Filter /FlateDecode"
    return f"<< /Length {len(data)} {extra} >>\nstream\n".encode() + data + b"\nendstream"


class PdfWriter:
    def __init__(self):
        self.objects: list[bytes | None] = []

    def add(self, body: str | bytes | None = None) -> int:
        """A new object's number; None reserves the number for set() (objects referring forward)."""
        self.objects.append(None)
        if body is not None:
            self.set(len(self.objects), body)
        return len(self.objects)

    def set(self, num: int, body: str | bytes) -> None:
        self.objects[num - 1] = body.encode("latin-1") if isinstance(body, str) else body

    def build(
        self,
        root: int,
        *,
        xref_stream: bool = False,
        packed: tuple[int, ...] = (),
        trailer: str = "",
        hybrid: bool = False,
    ) -> bytes:
        """The file. `packed` objects go into an object stream, which needs an xref stream; `hybrid`
        writes a classic table too, showing the packed objects as free, with the stream named by the
        trailer's /XRefStm (as files meant for old readers as well are written)."""
        out, offsets = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"), {}
        if packed:
            bodies, pairs, pos = [], [], 0
            for num in packed:
                pairs.append(b"%d %d" % (num, pos))
                bodies.append(self.objects[num - 1] + b"\n")
                pos += len(bodies[-1])
            head = b" ".join(pairs) + b"\n"
            holder = self.add(
                stream(head + b"".join(bodies), f"/Type /ObjStm /N {len(packed)} /First {len(head)}", True)
            )
        for num, body in enumerate(self.objects, 1):
            if num not in packed:
                offsets[num] = len(out)
                out += b"%d 0 obj\n" % num + body + b"\nendobj\n"
        count = len(self.objects)
        if xref_stream or hybrid:
            count += 1
            offsets[count] = stream_at = len(out)
            rows = [bytes(7)]
            for num in range(1, count + 1):
                if num in packed:
                    rows.append(bytes([2]) + holder.to_bytes(4, "big") + packed.index(num).to_bytes(2, "big"))
                else:
                    rows.append(bytes([1]) + offsets[num].to_bytes(4, "big") + bytes(2))
            body = stream(
                png_up(rows),
                f"/Type /XRef /Size {count + 1} /W [1 4 2] /Root {root} 0 R {trailer}"
                " /DecodeParms << /Predictor 12 /Columns 7 >>",
                flate=True,
            )
            out += b"%d 0 obj\n" % count + body + b"\nendobj\n"
            if not hybrid:
                return bytes(out + b"startxref\n%d\n%%%%EOF\n" % stream_at)
            trailer += f" /XRefStm {stream_at}"
        start = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (count + 1)
        for num in range(1, count + 1):
            out += b"0000000000 00001 f \n" if num in packed else b"%010d 00000 n \n" % offsets[num]
        out += f"trailer\n<< /Size {count + 1} /Root {root} 0 R {trailer} >>\n".encode()
        return bytes(out + b"startxref\n%d\n%%%%EOF\n" % start)


def png_up(rows: list[bytes]) -> bytes:
    """Rows under PNG's Up predictor: each byte less the byte above it, behind a filter-type byte 2."""
    out, above = bytearray(), bytes(len(rows[0]))
    for row in rows:
        out += bytes([2]) + bytes((b - a) & 0xFF for a, b in zip(above, row))
        above = row
    return bytes(out)


def append_update(base: bytes, objects: dict[int, str | bytes], root: int, trailer: str = "") -> bytes:
    """`base` with an incremental update: new bodies for `objects`, a table of just those, /Prev to the old one."""
    prev = int(re.findall(rb"startxref\s+(\d+)", base)[-1])
    size = int(re.findall(rb"/Size (\d+)", base)[-1])
    out, offsets = bytearray(base), {}
    for num, body in sorted(objects.items()):
        offsets[num] = len(out)
        out += b"%d 0 obj\n" % num + (body.encode("latin-1") if isinstance(body, str) else body) + b"\nendobj\n"
    start = len(out)
    out += b"xref\n"
    for num in sorted(objects):
        out += b"%d 1\n%010d 00000 n \n" % (num, offsets[num])
    size = max(size, max(objects) + 1)
    out += f"trailer\n<< /Size {size} /Root {root} 0 R /Prev {prev} {trailer} >>\nstartxref\n{start}\n%%EOF\n".encode()
    return bytes(out)


HELVETICA = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
# Courier's glyphs are all 600 units wide, so tests can place strings exactly.
COURIER = "<< /Type /Font /Subtype /Type1 /BaseFont /Courier /Encoding /WinAnsiEncoding >>"


def document(
    pages: list[bytes],
    font: str = HELVETICA,
    flate: bool = False,
    xref_stream: bool = False,
    packed: bool = False,
    hybrid: bool = False,
) -> bytes:
    """A PDF of `pages` (each a content stream) sharing font /F1 through resources on the page tree's root."""
    w = PdfWriter()
    catalog, tree, font_num = w.add(), w.add(), w.add(font)
    kids = [w.add() for _ in pages]
    for kid, content in zip(kids, pages):
        w.set(
            kid,
            f"<< /Type /Page /Parent {tree} 0 R /MediaBox [0 0 612 792] /Contents {w.add(stream(content, flate=flate))} 0 R >>",
        )
    refs = " ".join(f"{k} 0 R" for k in kids)
    w.set(tree, f"<< /Type /Pages /Kids [{refs}] /Count {len(kids)} /Resources << /Font << /F1 {font_num} 0 R >> >> >>")
    w.set(catalog, f"<< /Type /Catalog /Pages {tree} 0 R >>")
    return w.build(catalog, xref_stream=xref_stream, packed=(tree, font_num, *kids) if packed else (), hybrid=hybrid)
