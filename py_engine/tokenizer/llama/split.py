"""Pre-tokenizer splits exactly as llama.cpp's unicode_regex_split cuts text (see pre.py).

Each regex splits every piece into its matches and the text between them, both kept. llama.cpp
runs most regexes with C++ std::regex (ECMAScript, C locale) over a copy of the text in which each
non-ASCII character stands for its Unicode category and each non-ASCII white space character is
"\\v". We get the same matches from stdlib `re` with re.ASCII (C-locale \\s \\d \\w \\b), the
\\p{...} classes spelled out as code point ranges, and the same white space substitution. Where
llama.cpp notes the distinction, \\p{Lu}, \\p{Ll}, ... all mean \\p{L} (its category table has only
"letter"); `$` is the end of the piece and `.` excludes the ECMAScript line terminators.

llama.cpp replaces a few regexes by hand-written splitters, recognised by their exact text. Those
for GPT-2, Llama-3, Qwen2 and Qwen3.5 cut exactly where their regexes match, so they run as regexes
here; Kimi-K2's and the AFMoE / Tiny Aya digit groups implement something other than their
regex, and are reproduced below.
"""

import re
from collections.abc import Callable
from functools import cache

from ..regex.compat import class_body
from ..regex.unicode_classes import WHITE_SPACE, Range, category_ranges, complement, merge_ranges
from ..spec_error import SpecError
from .pre import AFMOE_DIGITS, KIMI_K2, SPLITS, TINY_AYA_DIGITS

_NON_ASCII_SPACE_TO_VT = {c: "\x0b" for start, end in WHITE_SPACE for c in range(max(start, 0x80), end + 1)}

# llama.cpp's categories: the five it knows, and its letter subclasses, which collapse to letter.
_PROPERTY_CATEGORY = {
    **{name: name for name in ("L", "N", "P", "S", "M")},
    **dict.fromkeys(("Lu", "Ll", "Lt", "Lm", "Lo"), "L"),
}

# ECMAScript's `.`: anything but a line terminator.
_DOT = "[^\\n\\r\\u2028\\u2029]"

# Kimi-K2's Han characters (llama.cpp's unicode_cpt_is_han).
_HAN: list[Range] = [
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0x2CEB0, 0x2EBEF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
]

Span = tuple[int, int]
SplitStep = Callable[[str, int, int], list[Span]]


def translate(pattern: str) -> str:
    """A llama.cpp pre-tokenizer regex as a stdlib `re` pattern, to be compiled with re.ASCII."""
    out: list[str] = []
    in_class = False
    pos = 0
    while pos < len(pattern):
        char = pattern[pos]
        if char == "\\" and pattern.startswith("p{", pos + 1):
            close = pattern.find("}", pos)
            name = pattern[pos + 3 : close]
            if close < 0 or name not in _PROPERTY_CATEGORY:
                raise SpecError(f"unsupported property in llama.cpp regex {pattern!r}")
            body = class_body(category_ranges(_PROPERTY_CATEGORY[name]))
            out.append(body if in_class else f"[{body}]")
            pos = close + 1
            continue
        if char == "\\":
            out.append(pattern[pos : pos + 2])
            pos += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        elif not in_class and char in "$.":
            char = "\\Z" if char == "$" else _DOT
        out.append(char)
        pos += 1
    return "".join(out)


def _regex_step(pattern: str) -> SplitStep:
    try:
        regex = re.compile(translate(pattern), re.ASCII)
    except re.error as err:
        raise SpecError(f"cannot compile llama.cpp regex {pattern!r}: {err}") from None

    def step(text: str, start: int, end: int) -> list[Span]:
        spans, previous = [], start
        # Each piece on its own, as a whole string: `^`, `$` and lookarounds stop at its ends.
        for match in regex.finditer(text[start:end]):
            match_start, match_end = match.start() + start, match.end() + start
            spans += [(previous, match_start), (match_start, match_end)]
            previous = match_end
        spans.append((previous, end))
        return [(a, b) for a, b in spans if b > a]

    return step


_NUMBER_RUN = re.compile(f"[{class_body(category_ranges('N'))}]+")


def _digit_groups(text: str, start: int, end: int) -> list[Span]:
    """llama.cpp's AFMoE digit splitter: each run of \\p{N} is cut into groups of three from the
    right. As in llama.cpp, text before a run joins the run's first group."""
    spans, previous = [], start
    for match in _NUMBER_RUN.finditer(text, start, end):
        run_start, run_end = match.span()
        first_cut = run_start + ((run_end - run_start) % 3 or 3)
        for cut in range(first_cut, run_end + 1, 3):
            spans.append((previous, cut))
            previous = cut
    if previous < end:
        spans.append((previous, end))
    return spans


def _body(ranges: list[Range]) -> str:
    return class_body(merge_ranges(ranges))


@cache
def _kimi_regex() -> re.Pattern:
    """Kimi-K2's split as llama.cpp hand-codes it: Han runs, then words of other letters (case is
    not distinguished) with an optional contraction, then the Llama-3 alternatives."""
    letters, numbers = category_ranges("L"), category_ranges("N")
    han = _body(_HAN)
    other_letters = _body(_intersect(letters, complement(_HAN)))
    not_word = f"[^\\r\\n{_body(letters)}{_body(numbers)}]"
    contraction = "(?:'[sS]|'[tT]|'[mM]|'[dD]|'[rR][eE]|'[vV][eE]|'[lL][lL])"
    return re.compile(
        f"[{han}]+|{not_word}?[{other_letters}]+{contraction}?|[{_body(numbers)}]{{1,3}}"
        f"| ?[^\\s{_body(letters)}{_body(numbers)}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        re.ASCII,
    )


def _intersect(a: list[Range], b: list[Range]) -> list[Range]:
    return [(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b if max(s1, s2) <= min(e1, e2)]


def _kimi_step(text: str, start: int, end: int) -> list[Span]:
    # Every character matches one of the alternatives, so the matches cover the piece.
    return [(m.start() + start, m.end() + start) for m in _kimi_regex().finditer(text[start:end])]


_HAND_WRITTEN: dict[str, SplitStep] = {KIMI_K2: _kimi_step, AFMOE_DIGITS: _digit_groups, TINY_AYA_DIGITS: _digit_groups}


class Splitter:
    """Cuts text into the pieces one llama.cpp pre-tokenizer type gives (see pre.SPLITS)."""

    def __init__(self, regexes: tuple[str, ...]):
        self._steps = [_HAND_WRITTEN.get(pattern) or _regex_step(pattern) for pattern in regexes]

    def __call__(self, text: str) -> list[str]:
        matched = text.translate(_NON_ASCII_SPACE_TO_VT)
        spans = [(0, len(text))] if text else []
        for step in self._steps:
            spans = [span for start, end in spans for span in step(matched, start, end)]
        return [text[start:end] for start, end in spans]


@cache
def splitter(split: str) -> Splitter:
    """The Splitter of pre.SPLITS[split], compiled once."""
    return Splitter(SPLITS[split][0])
