"""Normalizers: text -> text rewrites run before pre-tokenization (HF `normalizer` section)."""

import unicodedata
from collections.abc import Callable

from .regex_compat import compile_pattern
from .spec_error import SpecError

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
        return str.lower
    if kind == "Prepend":
        return _prepender(config["prepend"])
    if kind == "Replace":
        return replacer(config["pattern"], config["content"])
    if kind == "Sequence":
        steps = [build_normalizer(step) for step in config["normalizers"]]
        return compose([step for step in steps if step is not None])
    raise SpecError(f"unsupported normalizer type {kind!r}")
