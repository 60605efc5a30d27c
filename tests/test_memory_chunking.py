"""memory/chunking.py: windows within the token budget, cut at the coarsest boundary that fits,
every word of the document in some passage, overlaps within their budget, offsets that cite."""

import random

import pytest

from py_engine.memory.chunking import chunk_text


def words(text: str) -> int:
    return len(text.split())


def check(text: str, chunks, window: int, overlap: int, count=words):
    covered = [False] * len(text)
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text and chunk.text.strip() == chunk.text
        assert chunk.tokens == count(chunk.text) <= window
        for i in range(chunk.start, chunk.end):
            covered[i] = True
    assert all(covered[i] for i, c in enumerate(text) if not c.isspace())
    for a, b in zip(chunks, chunks[1:]):
        assert a.start < b.start and a.end < b.end  # always forward
        if b.start < a.end:
            assert count(text[b.start : a.end]) <= overlap


def test_paragraphs_then_sentences_then_words():
    rng = random.Random(3)

    def sentence():
        return " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(rng.randrange(3, 12))) + "."

    paragraphs = [" ".join(sentence() for _ in range(rng.randrange(1, 6))) for _ in range(40)]
    paragraphs[7] = " ".join(["word"] * 90)  # no sentence boundary: cut at words
    text = "\n\n".join(paragraphs)
    for window, overlap in [(64, 8), (30, 0), (200, 40)]:
        chunks = chunk_text(text, words, window, overlap)
        check(text, chunks, window, overlap)
    # Whole paragraphs that fit a window are never split.
    chunks = chunk_text(text, words, 200, 0)
    ends = {chunk.end for chunk in chunks}
    paragraph_ends = {text.index(p) + len(p) for p in paragraphs}
    assert ends <= paragraph_ends | {len(text)}

    # A join costs tokens of its own (a line break a token here): windows are counted whole.
    def breaks(t):
        return words(t) + t.count("\n")

    check(text, chunk_text(text, breaks, 64, 8), 64, 8, breaks)


def test_a_word_longer_than_a_window_is_cut_by_characters():
    def letters(t):
        return len(t.replace(" ", ""))  # a token a character

    text = "short words " + "x" * 50 + " end"
    chunks = chunk_text(text, letters, 16, 0)
    check(text, chunks, 16, 0, letters)
    assert "".join(c.text for c in chunks if "x" in c.text).count("x") == 50


def test_edges():
    assert chunk_text("", words) == [] and chunk_text(" \n\n ", words) == []
    assert [c.text for c in chunk_text("one two", words, 5, 1)] == ["one two"]
    with pytest.raises(ValueError, match="overlap < window"):
        chunk_text("text", words, 8, 8)


def test_long_pieces_are_cut_finer_without_being_counted():
    """A 200-page PDF's pages were each counted before being cut at lines: a third of the work."""
    page = "\n".join(" ".join(["river"] * 12) for _ in range(40))  # 40 lines, ~2,900 characters
    text = "\n\n".join([page] * 3)
    counted = []
    chunks = chunk_text(text, lambda t: counted.append(len(t)) or words(t), 32, 4)
    check(text, chunks, 32, 4)
    assert max(counted) <= 8 * 32
