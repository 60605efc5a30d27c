"""Decoders: token strings -> text (HF `decoder` section), plus incremental decoding.

Like HF, each step maps the list of token strings to a new list; the text is their join.
"""

import re
from collections.abc import Callable

from ..byte_level import token_bytes
from ..spec_error import SpecError
from .normalize import compose, replacer

DecodeStep = Callable[[list[str]], list[str]]

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _byte_level(tokens: list[str]) -> list[str]:
    data = b"".join(token_bytes(token) for token in tokens)
    return [data.decode("utf-8", errors="replace")]


def _byte_fallback(tokens: list[str]) -> list[str]:
    """Turn runs of <0xNN> tokens back into text; an invalid run gives one U+FFFD per byte."""
    out: list[str] = []
    pending = bytearray()

    def flush() -> None:
        try:
            out.append(pending.decode("utf-8"))
        except UnicodeDecodeError:
            out.extend("\ufffd" * len(pending))
        pending.clear()

    for token in tokens:
        match = _BYTE_TOKEN.fullmatch(token)
        if match:
            pending.append(int(match.group(1), 16))
            continue
        if pending:
            flush()
        out.append(token)
    if pending:
        flush()
    return out


def _fuse(tokens: list[str]) -> list[str]:
    return ["".join(tokens)]


def _stripper(content: str, start: int, stop: int) -> DecodeStep:
    """Remove up to `start` leading and `stop` trailing `content` characters from each token."""

    def strip(token: str) -> str:
        begin, end = 0, len(token)
        while begin < min(start, len(token)) and token[begin] == content:
            begin += 1
        while len(token) - end < stop and end > begin and token[end - 1] == content:
            end -= 1
        return token[begin:end]

    return lambda tokens: [strip(token) for token in tokens]


def _metaspace(replacement: str, prepend_scheme: str) -> DecodeStep:
    def decode(tokens: list[str]) -> list[str]:
        out = [token.replace(replacement, " ") for token in tokens]
        if out and prepend_scheme != "never":
            # HF drops every replacement character of the first token, not only the leading one.
            out[0] = tokens[0].replace(replacement, "")
        return out

    return decode


# HF's WordPiece decoder cleanup, applied to each token with its joining space.
_WORDPIECE_CLEANUPS = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


def _wordpiece(prefix: str, cleanup: bool) -> DecodeStep:
    """Continuation tokens ("##ing") join the previous one; other tokens get a space before them."""

    def decode(tokens: list[str]) -> list[str]:
        out = []
        for index, token in enumerate(tokens):
            if index:
                token = token[len(prefix) :] if token.startswith(prefix) else " " + token
            if cleanup:
                for dirty, clean in _WORDPIECE_CLEANUPS:
                    token = token.replace(dirty, clean)
            out.append(token)
        return out

    return decode


def _replace(pattern: dict, content: str) -> DecodeStep:
    replace = replacer(pattern, content)
    return lambda tokens: [replace(token) for token in tokens]


def build_decoder(config: dict | None) -> DecodeStep | None:
    if config is None:
        return None
    kind = config.get("type")
    if kind == "ByteLevel":
        return _byte_level
    if kind == "ByteFallback":
        return _byte_fallback
    if kind == "Fuse":
        return _fuse
    if kind == "Strip":
        return _stripper(config["content"], config.get("start", 0), config.get("stop", 0))
    if kind == "Replace":
        return _replace(config["pattern"], config["content"])
    if kind == "WordPiece":
        return _wordpiece(config.get("prefix", "##"), config.get("cleanup", True))
    if kind == "Metaspace":
        scheme = config.get("prepend_scheme")
        if scheme is None:  # files written before prepend_scheme existed
            scheme = "always" if config.get("add_prefix_space", True) else "never"
        return _metaspace(config.get("replacement", "\u2581"), scheme)
    if kind == "Sequence":
        return compose([build_decoder(step) for step in config["decoders"]])
    raise SpecError(f"unsupported decoder type {kind!r}")
