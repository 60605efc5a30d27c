"""Compile the regexes found in tokenizer.json (Oniguruma / Rust syntax) with stdlib `re`.

The split patterns of GPT-2, Llama-3, Qwen and friends differ from Python syntax only in their
character-class escapes: `\\p{L}`, `\\p{N}`, `\\s`, ... Everything else they use (alternation,
`(?i:...)`, `(?!...)`, `{1,3}`, possessive quantifiers) means the same in `re`, which also
backtracks leftmost-first like Oniguruma. So we rewrite each class escape into explicit code
point ranges and leave the rest of the pattern as it is. Unknown patterns that stick to these
constructs therefore work too; anything `re` cannot parse raises SpecError.

The patterns come from the model's files, so before one runs, guard.py proves that it cannot
backtrack for longer than quadratic time in the text length; one that could is a SpecError too.
"""

import re
import warnings
from functools import lru_cache

from ..spec_error import SpecError
from .guard import check_backtracking
from .unicode_classes import WHITE_SPACE, Range, category_ranges, complement, merge_ranges


def _word_ranges() -> list[Range]:
    # Oniguruma's Unicode \w: letters, marks, decimal digits and connector punctuation.
    return merge_ranges(category_ranges("L") + category_ranges("M") + category_ranges("Nd") + category_ranges("Pc"))


_SHORTHAND_CLASSES = {
    "s": lambda: WHITE_SPACE,
    "d": lambda: category_ranges("Nd"),
    "w": _word_ranges,
}


def _escape_code_point(code_point: int) -> str:
    # The character itself (escaped where `re` gives it a meaning): `re` parses it several times
    # faster than a \uXXXX escape, which counts for classes of some 700 ranges.
    return re.escape(chr(code_point))


def class_body(ranges: list[Range]) -> str:
    """Ranges written as the inside of a `[...]` class."""
    parts = []
    for start, end in ranges:
        parts.append(_escape_code_point(start))
        if end != start:
            parts.append("-" + _escape_code_point(end))
    return "".join(parts)


def _property_ranges(pattern: str, pos: int) -> tuple[list[Range], int]:
    """Parse what follows `\\p` / `\\P` at `pos`: `{Name}`, `{^Name}` or a one-letter name."""
    negate = pattern[pos - 1] == "P"
    if pos < len(pattern) and pattern[pos] == "{":
        close = pattern.find("}", pos)
        if close < 0:
            raise SpecError(f"unterminated \\p{{...}} in regex {pattern!r}")
        name, pos = pattern[pos + 1 : close], close + 1
        if name.startswith("^"):
            negate, name = not negate, name[1:]
    elif pos < len(pattern):
        name, pos = pattern[pos], pos + 1
    else:
        raise SpecError(f"regex {pattern!r} ends inside \\p")
    try:
        ranges = category_ranges(name)
    except KeyError:
        raise SpecError(f"unsupported Unicode property \\p{{{name}}} in regex {pattern!r}") from None
    return (complement(ranges) if negate else ranges), pos


def translate(pattern: str) -> str:
    """Rewrite an Oniguruma-style pattern into an equivalent stdlib `re` pattern."""
    out: list[str] = []
    in_class = False
    pos = 0
    while pos < len(pattern):
        char = pattern[pos]
        if char == "\\" and pos + 1 < len(pattern):
            escaped = pattern[pos + 1]
            ranges = None
            if escaped in "pP":
                ranges, pos = _property_ranges(pattern, pos + 2)
            elif escaped.lower() in _SHORTHAND_CLASSES:
                ranges = _SHORTHAND_CLASSES[escaped.lower()]()
                if escaped.isupper():
                    ranges = complement(ranges)
                pos += 2
            elif escaped == "x" and pattern.startswith("{", pos + 2):
                close = pattern.find("}", pos)
                if close < 0:
                    raise SpecError(f"unterminated \\x{{...}} in regex {pattern!r}")
                try:
                    out.append(_escape_code_point(int(pattern[pos + 3 : close], 16)))
                except ValueError:
                    raise SpecError(f"bad \\x{{...}} escape in regex {pattern!r}") from None
                pos = close + 1
            elif escaped == "z":
                out.append(r"\Z")  # Oniguruma's absolute end of string
                pos += 2
            else:
                out.append(pattern[pos : pos + 2])
                pos += 2
            if ranges is not None:
                body = class_body(ranges)
                out.append(body if in_class else f"[{body}]")
            continue
        if char == "[":
            if in_class:
                raise SpecError(f"nested character classes are not supported: {pattern!r}")
            in_class = True
            # A `]` right after `[` or `[^` is a literal in both syntaxes; copy it with the opener.
            opener_end = pos + 1 + pattern.startswith("^", pos + 1)
            opener_end += pattern.startswith("]", opener_end)
            out.append(pattern[pos:opener_end])
            pos = opener_end
            continue
        if char == "]" and in_class:
            in_class = False
        out.append(char)
        pos += 1
    return "".join(out)


# Real pre-tokenizer patterns are under 1,000 characters (under 100 KB once translated: each
# \p{L} spells out some 700 ranges); beyond these, compiling alone would take seconds.
MAX_PATTERN_CHARS = 20_000
MAX_TRANSLATED_CHARS = 1_000_000


def compile_pattern(pattern: str) -> re.Pattern:
    """The stdlib regex for tokenizer regex `pattern`, checked for runaway backtracking."""
    if not isinstance(pattern, str):
        raise SpecError(f"a regex must be a string, got {type(pattern).__name__}")
    return _compile(pattern)


@lru_cache(maxsize=64)
def _compile(pattern: str) -> re.Pattern:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise SpecError(f"regex of {len(pattern)} characters is longer than {MAX_PATTERN_CHARS}")
    translated = translate(pattern)
    if len(translated) > MAX_TRANSLATED_CHARS:
        raise SpecError(f"regex {pattern[:200]!r} spells out too many character ranges")
    try:
        with warnings.catch_warnings():  # "possible set difference", "bad character in group name":
            warnings.simplefilter("ignore")  # the model's business, not the user's console's
            regex = re.compile(translated)
    except (re.error, ValueError, OverflowError, RecursionError) as err:
        raise SpecError(f"unsupported regex {pattern[:200]!r}: {err}") from None
    check_backtracking(translated, pattern)
    return regex
