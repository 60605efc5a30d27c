"""Normalizers: text -> text rewrites run before pre-tokenization (HF `normalizer` section)."""

import base64
import re
import unicodedata
from collections.abc import Callable

from ..charsmap import CharsMap
from ..regex.compat import compile_pattern
from ..regex.unicode_classes import WHITE_SPACE
from ..spec_error import SpecError
from .graphemes import graphemes

Normalizer = Callable[[str], str]


def replacer(pattern: dict, content: str) -> Normalizer:
    """Replace every match of an HF pattern ({"String": s} or {"Regex": r}) by `content`.

    Shared with the decoder, whose Replace step has the same shape."""
    if "String" in pattern:
        literal = pattern["String"]
        return lambda text: text.replace(literal, content)
    if "Regex" in pattern:
        regex = compile_pattern(pattern["Regex"])
        # A function replacement keeps backslashes in `content` literal.
        return lambda text: regex.sub(lambda _match: content, text)
    raise SpecError(f"Replace pattern needs 'String' or 'Regex', got {pattern!r}")


def _prepender(prefix: str) -> Normalizer:
    # HF leaves empty text empty, so the text between two special tokens gains no prefix.
    return lambda text: prefix + text if text else text


def _unicode_form(form: str) -> Normalizer:
    return lambda text: unicodedata.normalize(form, text)


_WHITE_SPACE = frozenset(chr(c) for start, end in WHITE_SPACE for c in range(start, end + 1))

# BERT's "Chinese characters" (HF keeps 0x2B920 where 0x2B820 was meant).
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F))
_CJK += ((0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
_CJK_CHAR = re.compile("([" + "".join(f"{chr(a)}-{chr(b)}" for a, b in _CJK) + "])")


def lowercase(text: str) -> str:
    """HF lowercases character by character (Rust's char::to_lowercase); Python's str.lower()
    alone would also apply Unicode's final-sigma rule ("ΟΣ" -> "ος", where HF gives "οσ")."""
    return text.lower() if "Σ" not in text else "".join(map(str.lower, text))


def _strip_marks(text: str) -> str:
    return text.translate({ord(c): None for c in set(text) if unicodedata.category(c) == "Mn"})


def _bert(config: dict) -> Normalizer:
    """HF's BertNormalizer: drop control characters, white space to " ", spaces around CJK
    ideographs, accents off (NFD, then no nonspacing marks), lowercase."""
    lower = config.get("lowercase", True)
    strip_accents = config.get("strip_accents")
    strip_accents = lower if strip_accents is None else strip_accents

    def clean(char: str) -> str:
        # HF drops control characters before it turns white space into spaces, so only tab,
        # newline and carriage return of the control characters become spaces.
        if char in "\t\n\r":
            return " "
        if char in "\0\ufffd" or unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs"):
            return ""  # unassigned code points (Cn) stay
        return " " if char in _WHITE_SPACE else char

    def normalize(text: str) -> str:
        # Character by character in Python was most of a long document's tokenizing (memory's
        # chunking of a 200-page PDF): each distinct character is cleaned once, then str.translate.
        if config.get("clean_text", True):
            text = text.translate({ord(c): clean(c) for c in set(text) if clean(c) != c})
        if config.get("handle_chinese_chars", True):
            text = _CJK_CHAR.sub(r" \1 ", text)
        if strip_accents:
            text = _strip_marks(unicodedata.normalize("NFD", text))
        return lowercase(text) if lower else text

    return normalize


def _precompiled(config: dict) -> Normalizer:
    """HF's Precompiled normalizer (SentencePiece's charsmap): each grapheme cluster shorter than
    6 bytes that starts with a mapped sequence is replaced whole by the shortest one's mapping;
    otherwise each mapped character is replaced."""
    try:
        blob = base64.b64decode(config["precompiled_charsmap"], validate=True)
    except ValueError as err:  # binascii.Error, or a character outside ASCII
        raise SpecError(f"Precompiled normalizer: precompiled_charsmap is not base64 ({err})") from None
    charsmap = CharsMap(blob)

    def replacement(chunk: str) -> str | None:
        data = chunk.encode("utf-8")
        match = charsmap.shortest_match(data)
        return None if match is None else match.decode("utf-8", errors="replace")

    def normalize(text: str) -> str:
        out = []
        for cluster in graphemes(text):
            whole = replacement(cluster) if len(cluster.encode("utf-8")) < 6 else None
            if whole is not None:
                out.append(whole)
                continue
            for char in cluster:
                mapped = replacement(char)
                out.append(char if mapped is None else mapped)
        return "".join(out)

    return normalize


def compose(steps: list):
    """Apply `steps` in order: the `Sequence` of normalizers and of decoders alike."""

    def run(value):
        for step in steps:
            value = step(value)
        return value

    return run


def build_normalizer(config: dict | None) -> Normalizer | None:
    if config is None:
        return None
    kind = config.get("type")
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return _unicode_form(kind)
    if kind == "Lowercase":
        return lowercase
    if kind == "Prepend":
        return _prepender(config["prepend"])
    if kind == "Replace":
        return replacer(config["pattern"], config["content"])
    if kind == "BertNormalizer":
        return _bert(config)
    if kind == "Precompiled":
        return _precompiled(config)
    if kind == "StripAccents":
        return _strip_marks
    if kind == "Strip":
        # HF strips Unicode white space.
        spaces = "".join(_WHITE_SPACE)
        left, right = config.get("strip_left", True), config.get("strip_right", True)
        return lambda text: (text.lstrip(spaces) if left else text).rstrip(spaces if right else "")
    if kind == "Sequence":
        steps = [build_normalizer(step) for step in config["normalizers"]]
        return compose([step for step in steps if step is not None])
    raise SpecError(f"unsupported normalizer type {kind!r}")
