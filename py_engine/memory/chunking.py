"""A document's text cut into the passages the memory embeds and cites: windows of at most `window`
tokens of the embedding model, the next starting `overlap` tokens before the last one ended, each
cut at the best boundary it can find (paragraph, then line, sentence, word; a single word longer than
a window is cut by characters) and each knowing where its text lies in the document, for citations.

Units (paragraphs, sentences, words) are counted with the embedding model's own tokenizer, and a
window is packed from whole units; a packed window is counted again as one text (tokens can merge
across a join), and a window over the budget loses units from its end until it fits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# Boundaries from coarsest to finest: a unit longer than a window is cut at the next finer one.
_BOUNDARIES = (
    re.compile(r"\n[ \t]*\n\s*"),  # paragraphs
    re.compile(r"\n\s*"),  # lines
    re.compile(r"(?<=[.!?;:。！？])\s+"),  # sentences
    re.compile(r"\s+"),  # words
)


LONG_PIECE = 8  # characters a token: English text averages 4-5 (a fitting piece cut finer only loses a boundary)


@dataclass(frozen=True)
class Chunk:
    start: int  # the passage is text[start:end] of its document
    end: int
    text: str
    tokens: int  # the embedding model's tokens in it (its special tokens not counted)
    ids: tuple | None = None  # those tokens, where count_tokens gave them (embedded without encoding again)


def _count(counted) -> int:
    return counted if isinstance(counted, int) else len(counted)


def chunk_text(text: str, count_tokens: Callable[[str], int], window: int = 256, overlap: int = 32) -> list[Chunk]:
    """The passages of `text`. count_tokens(text): the embedding model's tokens in a text (without
    its special tokens), a count or the ids themselves (then each Chunk keeps its ids). 0 <= overlap < window."""
    if window < 1 or not 0 <= overlap < window:
        raise ValueError(
            f"chunking needs a window of at least 1 token and 0 <= overlap < window, not {window}, {overlap}"
        )
    units = _units(text, 0, len(text), 0, count_tokens, window)
    chunks: list[Chunk] = []
    first = 0
    while first < len(units):
        end = first
        total = 0
        while end < len(units) and (end == first or total + units[end][2] <= window):
            total += units[end][2]
            end += 1
        # The join's own count: shrink from the end while the packed text is over the window.
        while True:
            start, stop = units[first][0], units[end - 1][1]
            counted = count_tokens(text[start:stop])
            tokens = _count(counted)
            if tokens <= window or end - first == 1:
                break
            end -= 1
        ids = None if isinstance(counted, int) else tuple(counted)
        chunks.append(Chunk(start, stop, text[start:stop], tokens, ids))
        if end == len(units):
            break
        # The next window starts with the last units of this one that fit in `overlap` tokens, but
        # always moves forward.
        back, carried = end, 0
        while back - 1 > first and carried + units[back - 1][2] <= overlap:
            back -= 1
            carried += units[back][2]
        first = back
    return chunks


def _units(text: str, start: int, end: int, level: int, count_tokens, window: int) -> list[tuple[int, int, int]]:
    """(start, end, tokens) of the pieces of text[start:end] cut at boundary `level` and finer, each
    at most `window` tokens (a word longer than that is cut by characters), whitespace-only ones left out."""
    pieces, at = [], start
    if level < len(_BOUNDARIES):
        for gap in _BOUNDARIES[level].finditer(text, start, end):
            if gap.start() > at:
                pieces.append((at, gap.start()))
            at = gap.end()
    if at < end:
        pieces.append((at, end))
    units = []
    for a, b in pieces:
        piece = text[a:b]
        if not piece.strip():
            continue
        # A piece of more than LONG_PIECE characters a token of the window is over it in any text
        # people write: cut finer without counting it (counting a 200-page PDF's pages was a third of
        # its chunking time).
        tokens = _count(count_tokens(piece)) if len(piece) <= LONG_PIECE * window else window + 1
        if tokens <= window:
            units.append((a, b, tokens))
        elif level < len(_BOUNDARIES):
            units += _units(text, a, b, level + 1, count_tokens, window)
        else:
            units += _characters(text, a, b, count_tokens, window)
    return units


def _characters(text: str, start: int, end: int, count_tokens, window: int) -> list[tuple[int, int, int]]:
    """A run without boundaries cut into the longest prefixes of at most `window` tokens."""
    units = []
    while start < end:
        low, high = start + 1, end  # the longest stop in [low, high] whose prefix fits
        while low < high:
            middle = (low + high + 1) // 2
            if _count(count_tokens(text[start:middle])) <= window:
                low = middle
            else:
                high = middle - 1
        units.append((start, low, _count(count_tokens(text[start:low]))))
        start = low
    return units
