"""What the text reader needs of a font (ISO 32000-1 §9.5-9.10): how a shown string splits into codes,
each code's text (the ToUnicode CMap first, then a composite font's UCS-2 CMap or a simple font's
encoding with its /Differences) and each code's width, which places the next string and so tells a word
gap from a kerning nudge. A font missing from the resources reads as WinAnsi, a common default."""

import re

from .pdf_cmap import CMap, parse_cmap
from .pdf_encodings import ENCODINGS, glyph_text
from .pdf_objects import PdfFile
from .pdf_syntax import Name, PdfLimit, PdfProblem, Stream

_ENCODING_ENTRY = re.compile(rb"dup\s+(\d+)\s*/([^\s/\[\]{}()<>]+)\s+put")
_MAX_WIDTHS = 1 << 16  # entries a composite font's /W may spell out; more is garbage, not a font


class Font:
    def __init__(self, pdf: PdfFile, d: dict):
        self.to_unicode = self._cmap(pdf, pdf.get(d, "ToUnicode"))
        self.widths: dict[int, float] = {}
        self.scale = 0.001  # glyph space per text-space unit: 1/1000, except a Type3 font's matrix
        if pdf.get(d, "Subtype") == "Type0":
            self._composite(pdf, d)
        else:
            self._simple(pdf, d)

    def show(self, data: bytes) -> tuple[str, float, int, int]:
        """A string's (text, width in text-space units at size 1, codes, single-byte spaces): the
        width before character and word spacing, which apply per code and per space."""
        codes = self.codes.split(data, self.code_width)
        parts, width, spaces = [], 0.0, 0
        for code in codes:
            text = self.to_unicode.text(code) if self.to_unicode else None
            if text is None:
                text = self._text(code)
            parts.append(text)
            width += self.widths.get(int.from_bytes(code, "big"), self.default_width)
            spaces += code == b" "
        return "".join(parts), width * self.scale, len(codes), spaces

    def _simple(self, pdf: PdfFile, d: dict) -> None:
        self.codes, self.code_width = CMap(), 1
        encoding, subtype = pdf.get(d, "Encoding"), pdf.get(d, "Subtype")
        base = pdf.get(encoding, "BaseEncoding") if isinstance(encoding, dict) else encoding
        if base in ENCODINGS:
            table = list(ENCODINGS[base])
        elif subtype == "TrueType":  # TrueType fonts without an encoding are WinAnsi in practice
            table = list(ENCODINGS["WinAnsiEncoding"])
        else:  # a Type1 font's own encoding (TeX's fonts have theirs), else Standard
            table = self._builtin_encoding(pdf, pdf.get(d, "FontDescriptor")) or list(ENCODINGS["StandardEncoding"])
        code = 0
        for item in pdf.get(encoding, "Differences", []) if isinstance(encoding, dict) else []:
            item = pdf.resolve(item)
            if isinstance(item, int):
                code = item
            elif isinstance(item, Name):
                if 0 <= code < 256:
                    table[code] = glyph_text(item)
                code += 1
        self.table = table
        matrix = pdf.get(d, "FontMatrix")
        if subtype == "Type3" and isinstance(matrix, list) and matrix and isinstance(matrix[0], (int, float)):
            self.scale = abs(matrix[0])
        first, widths = pdf.get(d, "FirstChar", 0), pdf.get(d, "Widths", [])
        if isinstance(first, int) and isinstance(widths, list):
            for i, width in enumerate(widths[:256]):
                width = pdf.resolve(width)
                if isinstance(width, (int, float)):
                    self.widths[first + i] = width
        name = pdf.get(d, "BaseFont", "")
        # A standard font without /Widths: Courier is 600 units wide throughout; 500 is a fair mean for the rest.
        self.default_width = 600 if isinstance(name, str) and "Courier" in name else 500

    def _composite(self, pdf: PdfFile, d: dict) -> None:
        encoding = pdf.get(d, "Encoding")
        embedded = self._cmap(pdf, encoding)
        self.codes = embedded or (CMap() if encoding in ("Identity-H", "Identity-V") else self.to_unicode or CMap())
        self.code_width = 2
        # The UCS-2 and UTF-16 CMaps' codes are the text itself (UniGB-UCS2-H, UniJIS-UTF16-H, ...).
        self.ucs2 = (
            isinstance(encoding, str) and encoding.startswith("Uni") and ("UCS2" in encoding or "UTF16" in encoding)
        )
        descendants = pdf.get(d, "DescendantFonts", [])
        cid_font = pdf.resolve(descendants[0]) if isinstance(descendants, list) and descendants else {}
        cid_font = cid_font if isinstance(cid_font, dict) else {}
        default = pdf.get(cid_font, "DW", 1000)
        self.default_width = default if isinstance(default, (int, float)) else 1000
        w, i = pdf.get(cid_font, "W", []), 0
        while isinstance(w, list) and i + 1 < len(w) and len(self.widths) < _MAX_WIDTHS:
            first, then = pdf.resolve(w[i]), pdf.resolve(w[i + 1])
            if isinstance(then, list) and isinstance(first, int):  # first [w w w ...]
                self.widths.update((first + k, v) for k, v in enumerate(then) if isinstance(v, (int, float)))
                i += 2
            elif i + 2 < len(w) and isinstance(first, int) and isinstance(then, int):  # first last w
                width = pdf.resolve(w[i + 2])
                if isinstance(width, (int, float)) and then - first < _MAX_WIDTHS:
                    self.widths.update((cid, width) for cid in range(first, then + 1))
                i += 3
            else:
                break

    @staticmethod
    def _builtin_encoding(pdf: PdfFile, descriptor) -> list[str] | None:
        """The encoding an embedded Type1 font program declares in its clear-text part (`dup 58
        /period put` lines), over StandardEncoding; None without one (or a font that uses Standard)."""
        program = pdf.get(descriptor, "FontFile") if isinstance(descriptor, dict) else None
        if not isinstance(program, Stream):
            return None
        try:
            clear_length = pdf.get(program.dict, "Length1")  # the program's clear-text part, before eexec
            clear = pdf.decode(program)[: clear_length if isinstance(clear_length, int) else 1 << 16]
        except PdfLimit:
            raise
        except PdfProblem:
            return None
        entries = _ENCODING_ENTRY.findall(clear[clear.find(b"/Encoding") :]) if b"/Encoding" in clear else []
        if not entries:
            return None
        table = list(ENCODINGS["StandardEncoding"]) if b"StandardEncoding" in clear else [""] * 256
        for code, name in entries:
            if int(code) < 256:
                table[int(code)] = glyph_text(name.decode("latin-1"))
        return table

    def _text(self, code: bytes) -> str:
        if self.code_width == 1:
            return self.table[code[0]]
        return code.decode("utf-16-be", "ignore") if self.ucs2 else ""

    @staticmethod
    def _cmap(pdf: PdfFile, stream) -> CMap | None:
        """A CMap stream parsed; None for a name, nothing, or a damaged CMap (its codes then read as if
        it were not there, which loses text but not the document)."""
        if not isinstance(stream, Stream):
            return None
        try:
            return parse_cmap(pdf.decode(stream), pdf.limits.max_depth)
        except PdfLimit:
            raise
        except PdfProblem:
            return None
