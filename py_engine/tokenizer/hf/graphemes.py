"""User-perceived characters (extended grapheme clusters, Unicode UAX #29), approximately.

HF's Precompiled normalizer looks up whole grapheme clusters. `unicodedata` has no grapheme break
property, so the rules are approximated from general categories: marks, ZWJ and emoji modifiers
extend the character before them, ZWJ joins emoji, regional indicators pair up, Hangul jamo and
syllables compose, CR LF stays together. Text with prepended concatenation marks (e.g. Arabic
number signs) or unusual Indic conjuncts may be cut differently from Rust's unicode-segmentation.
"""

import unicodedata

_ZWJ = "\u200d"


def _extends(char: str) -> bool:
    code = ord(char)
    return (
        unicodedata.category(char) in ("Mn", "Me", "Mc")
        or char == _ZWJ
        or 0x1F3FB <= code <= 0x1F3FF  # emoji skin tones
        or 0xE0020 <= code <= 0xE007F  # emoji tag characters
    )


def _hangul_kind(char: str) -> str | None:
    code = ord(char)
    if 0x1100 <= code <= 0x115F or 0xA960 <= code <= 0xA97C:
        return "L"
    if 0x1160 <= code <= 0x11A7 or 0xD7B0 <= code <= 0xD7C6:
        return "V"
    if 0x11A8 <= code <= 0x11FF or 0xD7CB <= code <= 0xD7FB:
        return "T"
    if 0xAC00 <= code <= 0xD7A3:
        return "LV" if (code - 0xAC00) % 28 == 0 else "LVT"
    return None


_HANGUL_JOINS = {("L", "L"), ("L", "V"), ("L", "LV"), ("L", "LVT"), ("LV", "V"), ("LV", "T"), ("V", "V")}
_HANGUL_JOINS |= {("V", "T"), ("LVT", "T"), ("T", "T")}


def _is_regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _joins(previous: str, char: str, cluster: str) -> bool:
    if previous == "\r" and char == "\n":
        return True
    if unicodedata.category(previous) in ("Cc", "Zl", "Zp") or unicodedata.category(char) in ("Cc", "Zl", "Zp"):
        return False
    if _extends(char):
        return True
    if previous == _ZWJ and unicodedata.category(char) == "So":
        return True  # emoji ZWJ sequence
    if _is_regional_indicator(previous) and _is_regional_indicator(char):
        return sum(map(_is_regional_indicator, cluster)) % 2 == 1
    return (_hangul_kind(previous), _hangul_kind(char)) in _HANGUL_JOINS


def graphemes(text: str) -> list[str]:
    clusters: list[str] = []
    for char in text:
        if clusters and _joins(clusters[-1][-1], char, clusters[-1]):
            clusters[-1] += char
        else:
            clusters.append(char)
    return clusters
