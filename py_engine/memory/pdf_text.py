"""A page's text from its content streams (ISO 32000-1 §9.3-9.4): the text operators run with the state
they need (text and graphics matrices, font, size, spacing, q/Q), Form XObjects are followed, and each
shown string is placed in device space: a move across the baseline of more than half the font size is
a line break, a gap along it wider than _SPACE_GAP of the font size (a TJ kerning gap, a Td to the next
word) a space. Strings come out in content-stream order, which is reading order for most writers."""

import math
import re

from .limits import ReadLimits, size_text
from .pdf_fonts import Font
from .pdf_objects import PdfFile
from .pdf_syntax import Lexer, PdfLimit, Ref, Stream

IDENTITY = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
_SPACE_GAP = 0.15  # word spaces are ~0.25 em and more; kerning and letter spacing stay under ~0.1 em
_LINE_GAP = 0.5
_RUN = 4096
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
# Latin ligatures are the font's glyphs, not the author's letters: "ﬁnd" must match a search for "find".
_LIGATURES = str.maketrans(
    {
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
        "\u00a0": " ",
    }
)


def multiply(m, n):
    a, b, c, d, e, f = m
    p, q, r, s, t, u = n
    return (a * p + b * r, a * q + b * s, c * p + d * r, c * q + d * s, e * p + f * r + t, e * q + f * s + u)


def numbers(operands: list, count: int) -> tuple | None:
    values = operands[-count:]
    if len(values) == count and all(isinstance(v, (int, float)) for v in values):
        return tuple(values)
    return None


class _State:
    """The part of the graphics state that places text; q saves a copy, Q restores it."""

    __slots__ = ("ctm", "font", "size", "char_spacing", "word_spacing", "scale", "leading", "rise")

    def __init__(self):
        self.ctm, self.font, self.size = IDENTITY, None, 1.0
        self.char_spacing = self.word_spacing = self.leading = self.rise = 0.0
        self.scale = 1.0

    def copy(self) -> "_State":
        other = _State()
        for name in self.__slots__:
            setattr(other, name, getattr(self, name))
        return other


class Quota:
    """What a document's pages may still produce together: forms drawn, characters of text."""

    def __init__(self, limits: ReadLimits):
        self.limits = limits
        self.forms = limits.max_form_draws
        self.chars = limits.max_text_bytes


class PageText:
    """Reads the content of one page. Its text is kept as runs of at most _RUN strings joined, so a
    page of a million one-letter strings costs its characters, not a million string objects."""

    def __init__(self, pdf: PdfFile, fonts: dict, quota: Quota):
        self.pdf, self.fonts, self.quota = pdf, fonts, quota
        self.runs: list[str] = []
        self.parts: list[str] = []
        self.last = ""  # the last character added
        self.end = None  # where the last shown string ended, in device space
        self.tm = self.tlm = IDENTITY
        self.open_forms: set[int] = set()

    def run(self, content: bytes, resources: dict, state: _State | None = None, depth: int = 0) -> None:
        state, saved = state or _State(), []
        for operands, op in Lexer(content, self.pdf.limits.max_depth).operations():
            if op == "q":
                saved.append(state.copy())
            elif op == "Q" and saved:
                state = saved.pop()
            elif op == "cm" and (m := numbers(operands, 6)):
                state.ctm = multiply(m, state.ctm)
            elif op == "BT":
                self.tm = self.tlm = IDENTITY
            elif op in ("Td", "TD") and (move := numbers(operands, 2)):
                if op == "TD":
                    state.leading = -move[1]
                self._next_line(*move)
            elif op == "Tm" and (m := numbers(operands, 6)):
                self.tm = self.tlm = m
            elif op == "T*":
                self._next_line(0, -state.leading)
            elif op == "Tf" and len(operands) >= 2 and isinstance(operands[-1], (int, float)):
                state.font, state.size = self._font(resources, operands[-2]), operands[-1]
            elif op in ("Tc", "Tw", "Tz", "TL", "Ts") and (value := numbers(operands, 1)):
                self._set_spacing(state, op, value[0])
            elif op == "Tj" and operands and isinstance(operands[-1], bytes):
                self._show(operands[-1], state)
            elif op in ("'", '"') and operands and isinstance(operands[-1], bytes):
                if op == '"' and (spacing := numbers(operands[:-1], 2)):
                    state.word_spacing, state.char_spacing = spacing
                self._next_line(0, -state.leading)
                self._show(operands[-1], state)
            elif op == "TJ" and operands and isinstance(operands[-1], list):
                for item in operands[-1]:
                    if isinstance(item, bytes):
                        self._show(item, state)
                    elif isinstance(item, (int, float)):  # thousandths of an em, leftwards
                        self.tm = multiply((1, 0, 0, 1, -item / 1000 * state.size * state.scale, 0), self.tm)
            elif op == "Do" and operands:
                self._draw_form(operands[-1], resources, state, depth)

    def text(self) -> str:
        text = _CONTROL.sub("", "".join(self.runs + self.parts)).translate(_LIGATURES)
        return _TRAILING_SPACE.sub("\n", text).strip()

    def _next_line(self, tx: float, ty: float) -> None:
        self.tm = self.tlm = multiply((1, 0, 0, 1, tx, ty), self.tlm)

    @staticmethod
    def _set_spacing(state: _State, op: str, value: float) -> None:
        if op == "Tc":
            state.char_spacing = value
        elif op == "Tw":
            state.word_spacing = value
        elif op == "Tz":
            state.scale = value / 100
        elif op == "TL":
            state.leading = value
        else:
            state.rise = value

    def _font(self, resources: dict, name) -> Font:
        fonts = self.pdf.get(resources, "Font", {})
        ref = fonts.get(name) if isinstance(fonts, dict) else None
        font = self.pdf.resolve(ref)
        key = ref if isinstance(ref, Ref) else id(font)
        if key not in self.fonts:
            self.fonts[key] = Font(self.pdf, font if isinstance(font, dict) else {})
        return self.fonts[key]

    def _show(self, data: bytes, state: _State) -> None:
        font = state.font or self._font({}, None)
        text, width, codes, spaces = font.show(data)
        size, scale = state.size, state.scale
        start = multiply((size * scale, 0, 0, size, 0, state.rise), multiply(self.tm, state.ctm))
        self._place(text, start)
        advance = (width * size + state.char_spacing * codes + state.word_spacing * spaces) * scale
        self.tm = multiply((1, 0, 0, 1, advance, 0), self.tm)
        end = multiply((1, 0, 0, 1, 0, state.rise), multiply(self.tm, state.ctm))
        self.end = (end[4], end[5])

    def _place(self, text: str, trm: tuple) -> None:
        """Add `text`, after a line break or space when it starts away from where the last string ended."""
        if self.end is not None and text and self.last:
            size = math.hypot(trm[2], trm[3]) or 1.0
            length = math.hypot(trm[0], trm[1])
            ux, uy = (trm[0] / length, trm[1] / length) if length else (1.0, 0.0)
            dx, dy = trm[4] - self.end[0], trm[5] - self.end[1]
            along, across = dx * ux + dy * uy, dy * ux - dx * uy
            if abs(across) > _LINE_GAP * size:
                if self.last != "\n":
                    self._add("\n")
            elif (along > _SPACE_GAP * size or along < -size) and not (self.last.isspace() or text[0].isspace()):
                self._add(" ")
        if text:
            self._add(text)

    def _add(self, text: str) -> None:
        self.quota.chars -= len(text)
        if self.quota.chars < 0:
            raise PdfLimit(f"its text passes {size_text(self.quota.limits.max_text_bytes)}")
        self.parts.append(text)
        self.last = text[-1]
        if len(self.parts) >= _RUN:
            self.runs.append("".join(self.parts))
            self.parts = []

    def _draw_form(self, name, resources: dict, state: _State, depth: int) -> None:
        """Run a Form XObject's content in its own matrix; a form drawing itself is drawn once."""
        xobjects = self.pdf.get(resources, "XObject", {})
        form = self.pdf.resolve(xobjects.get(name)) if isinstance(xobjects, dict) else None
        if not (isinstance(form, Stream) and form.dict.get("Subtype") == "Form") or id(form) in self.open_forms:
            return
        if depth + 1 >= self.pdf.limits.max_depth:
            raise PdfLimit(f"forms are drawn inside each other more than {self.pdf.limits.max_depth} deep")
        self.quota.forms -= 1
        if self.quota.forms < 0:
            raise PdfLimit(f"its pages draw forms more than {self.quota.limits.max_form_draws:,} times")
        inner = state.copy()
        matrix = numbers(self.pdf.get(form.dict, "Matrix", []), 6)
        inner.ctm = multiply(matrix, state.ctm) if matrix else state.ctm
        own = self.pdf.get(form.dict, "Resources")
        self.open_forms.add(id(form))
        try:
            self.run(self.pdf.decode(form), own if isinstance(own, dict) else resources, inner, depth + 1)
        finally:
            self.open_forms.discard(id(form))
