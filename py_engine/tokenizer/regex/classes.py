"""Character classes of a parsed stdlib regex as code point ranges, for guard.py: which
characters each position of a pattern can match, and which characters no position tells apart.
Where a class cannot be computed exactly it is widened, never narrowed, so the guard over-counts.
"""

from re import _constants as sre

from .unicode_classes import MAX_CODE_POINT, Range, complement, merge_ranges

_ALL: tuple[Range, ...] = ((0, MAX_CODE_POINT),)
_BIG_CASELESS_CLASS = 1024  # a caseless class this big is taken as "any character"

try:  # the extra case-insensitive equivalences `re` applies (e.g. "s", "S" and "ſ")
    from re._casefix import _EXTRA_CASES
except ImportError:  # pragma: no cover - present on every supported Python
    _EXTRA_CASES = {}


def atoms(classes: list[tuple[Range, ...]]) -> list[int]:
    """The distinct sets of classes a single character can belong to, as bit masks: the pattern
    cannot tell apart two characters with the same mask."""
    events: dict[int, int] = {}
    for index, ranges in enumerate(classes):
        for start, end in ranges:
            events[start] = events.get(start, 0) ^ (1 << index)
            events[end + 1] = events.get(end + 1, 0) ^ (1 << index)
    masks, mask = set(), 0
    for point in sorted(events):
        mask ^= events[point]
        if mask and point <= MAX_CODE_POINT:
            masks.add(mask)
    return sorted(masks)


def character_class(op, av, flags: int) -> tuple[Range, ...]:
    caseless = bool(flags & sre.SRE_FLAG_IGNORECASE)
    if op is sre.ANY:
        return _ALL
    if op is sre.LITERAL:
        return _caseless([(av, av)]) if caseless else ((av, av),)
    if op is sre.NOT_LITERAL:
        return tuple(complement([(av, av)]))  # a superset when caseless too
    negate = bool(av) and av[0][0] is sre.NEGATE
    ranges: list[Range] = []
    for item_op, item in av[negate:]:
        if item_op is sre.LITERAL:
            ranges.append((item, item))
        elif item_op is sre.RANGE:
            ranges.append(item)
        elif item_op is sre.CATEGORY and not negate:
            return _ALL  # \d, \s, \w left as they are: "any character" over-counts safely
    if negate:  # caseless or not, the complement of the listed characters is a superset
        return tuple(complement(ranges))
    return _caseless(ranges) if caseless else tuple(merge_ranges(ranges))


def _caseless(ranges: list[Range]) -> tuple[Range, ...]:
    if sum(end - start + 1 for start, end in ranges) > _BIG_CASELESS_CLASS:
        return _ALL
    chars = set()
    for start, end in ranges:
        for code in range(start, end + 1):
            for variant in (chr(code), chr(code).lower(), chr(code).upper()):
                if len(variant) == 1:
                    chars.add(ord(variant))
                    chars.update(_EXTRA_CASES.get(ord(variant), ()))
    return tuple(merge_ranges([(c, c) for c in chars]))
