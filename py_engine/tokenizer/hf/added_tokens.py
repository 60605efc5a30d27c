"""Added tokens (special and not): found in the input text and cut out before the model runs.

Mirrors HF's AddedVocabulary: tokens with normalized=False are matched in the raw text first;
the text between them is normalized, then tokens with normalized=True are matched in that.
Matching is leftmost-longest, with the lstrip / rstrip / single_word options.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass

from ..regex.compat import compile_pattern
from ..regex.unicode_classes import WHITE_SPACE
from .normalize import Normalizer


@dataclass(frozen=True)
class AddedToken:
    id: int
    content: str
    special: bool = False  # skipped by decode(skip_special_tokens=True)
    lstrip: bool = False  # the match swallows white space on its left
    rstrip: bool = False  # ... and on its right
    single_word: bool = False  # only matches when not inside a word
    normalized: bool = False  # matched against the normalized text instead of the raw text


_WHITE_SPACE_CHARS = frozenset(chr(c) for start, end in WHITE_SPACE for c in range(start, end + 1))


def _is_word_char(char: str) -> bool:
    return compile_pattern(r"\w").match(char) is not None


class _Matcher:
    """Finds one group of added tokens in text."""

    def __init__(self, tokens_by_text: dict[str, AddedToken]):
        self.tokens_by_text = tokens_by_text
        # `re` alternation is leftmost-first; listing longer tokens first makes it leftmost-longest.
        alternatives = sorted(tokens_by_text, key=len, reverse=True)
        self.regex = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None

    def split(self, text: str) -> list[tuple[str, AddedToken | None]]:
        if self.regex is None:
            return [(text, None)]
        pieces: list[tuple[str, AddedToken | None]] = []
        piece_start = 0
        for match in self.regex.finditer(text):
            start, stop = match.span()
            token = self.tokens_by_text[match.group()]
            if token.single_word and (
                (start > 0 and _is_word_char(text[start - 1])) or (stop < len(text) and _is_word_char(text[stop]))
            ):
                continue
            if token.lstrip:
                while start > piece_start and text[start - 1] in _WHITE_SPACE_CHARS:
                    start -= 1
            if token.rstrip:
                while stop < len(text) and text[stop] in _WHITE_SPACE_CHARS:
                    stop += 1
            if piece_start < start:
                pieces.append((text[piece_start:start], None))
            pieces.append((text[start:stop], token))
            piece_start = stop
        if piece_start < len(text):
            pieces.append((text[piece_start:], None))
        return pieces


class AddedTokenSplitter:
    def __init__(self, tokens: list[AddedToken], normalizer: Normalizer | None):
        self.normalizer = normalizer
        self.raw = _Matcher({t.content: t for t in tokens if t.content and not t.normalized})
        normalize = normalizer or (lambda text: text)
        self.normalized = _Matcher({normalize(t.content): t for t in tokens if t.content and t.normalized})

    def split(self, text: str) -> Iterator[tuple[str, int | None, bool]]:
        """Yield (text, added token id or None, starts the input) covering `text` in order.

        Text pieces come out normalized; empty ones are dropped, as HF does."""
        offset = 0
        for raw_piece, token in self.raw.split(text):
            at_start = offset == 0
            offset += len(raw_piece)
            if token is not None:
                yield raw_piece, token.id, at_start
                continue
            piece = self.normalizer(raw_piece) if self.normalizer else raw_piece
            sub_offset = 0
            for sub_piece, sub_token in self.normalized.split(piece):
                if sub_piece:
                    yield sub_piece, sub_token.id if sub_token else None, at_start and sub_offset == 0
                sub_offset += len(sub_piece)
