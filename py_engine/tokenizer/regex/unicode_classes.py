"""Unicode character classes (\\p{L}, \\s, ...) as code point ranges, built from `unicodedata`.

Tokenizer split patterns are written for Oniguruma / Rust regex, which know Unicode properties;
stdlib `re` does not, and the `regex` module has no Pyodide wheel. So we compute the ranges of
each general category once and spell them out as explicit character-class ranges.
"""

import unicodedata
from functools import cache, lru_cache

Range = tuple[int, int]  # inclusive bounds

MAX_CODE_POINT = 0x10FFFF

# Planes 4-13 hold no assigned character in any Unicode version so far; skipping them
# (they are all "Cn") halves the scan, which matters in Pyodide.
_UNASSIGNED_PLANES = (0x40000, 0xDFFFF)

# Oniguruma's and Rust's \s is the Unicode White_Space property. Python's \s differs
# (it includes U+001C..U+001F), so we spell the property out. It is small and stable.
WHITE_SPACE: list[Range] = [
    (0x09, 0x0D),
    (0x20, 0x20),
    (0x85, 0x85),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
]

_LONG_NAMES = {
    "Letter": "L",
    "Mark": "M",
    "Number": "N",
    "Punctuation": "P",
    "Symbol": "S",
    "Separator": "Z",
    "Other": "C",
    "Uppercase_Letter": "Lu",
    "Lowercase_Letter": "Ll",
    "Decimal_Number": "Nd",
    "Nonspacing_Mark": "Mn",
    "Space_Separator": "Zs",
}


@lru_cache(maxsize=1)
def _ranges_by_category() -> dict[str, list[Range]]:
    """Runs of equal general category over all code points, grouped by category."""
    category = unicodedata.category
    by_category: dict[str, list[Range]] = {}

    def scan(first: int, last: int) -> None:
        run_start, run_category = first, category(chr(first))
        for code_point in range(first + 1, last + 1):
            cat = category(chr(code_point))
            if cat != run_category:
                by_category.setdefault(run_category, []).append((run_start, code_point - 1))
                run_start, run_category = code_point, cat
        by_category.setdefault(run_category, []).append((run_start, last))

    scan(0, _UNASSIGNED_PLANES[0] - 1)
    by_category.setdefault("Cn", []).append(_UNASSIGNED_PLANES)
    scan(_UNASSIGNED_PLANES[1] + 1, MAX_CODE_POINT)
    return by_category


def merge_ranges(ranges: list[Range]) -> list[Range]:
    """Sorted, non-overlapping, non-adjacent union of `ranges`."""
    merged: list[Range] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + 1:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def complement(ranges: list[Range]) -> list[Range]:
    result: list[Range] = []
    next_start = 0
    for start, end in merge_ranges(ranges):
        if start > next_start:
            result.append((next_start, start - 1))
        next_start = end + 1
    if next_start <= MAX_CODE_POINT:
        result.append((next_start, MAX_CODE_POINT))
    return result


@cache
def category_ranges(name: str) -> list[Range]:
    """Ranges of a general category given as `L`, `Lu`, or a long name like `Letter`.

    Raises KeyError for names we cannot compute (scripts, binary properties)."""
    name = _LONG_NAMES.get(name, name)
    by_category = _ranges_by_category()
    if len(name) == 2 and name in by_category:
        return by_category[name]
    if len(name) == 1:
        parts = [ranges for cat, ranges in by_category.items() if cat[0] == name]
        if parts:
            return merge_ranges([r for ranges in parts for r in ranges])
    raise KeyError(name)
