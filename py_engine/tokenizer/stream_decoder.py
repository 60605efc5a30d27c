"""Incremental decoding of generated tokens, for any tokenizer's decode (HF's or llama.cpp's)."""

from collections.abc import Callable


class StreamDecoder:
    """Decodes generated tokens one at a time; the pieces add up to `decode(all ids)`.

    Text is only released once it is final: while the decoded window ends in U+FFFD, the
    last tokens may be the start of a multi-byte character (byte-level BPE, or <0xNN> byte
    fallback), so they are held back. The window starts with the tokens of the previous
    release as context, so steps that look at the start of the text (like SentencePiece's
    Strip of the leading space) treat the new tokens as a full decode would.
    """

    def __init__(self, decode_ids: Callable[[list[int]], str], is_skipped: Callable[[int], bool]):
        self._decode_ids = decode_ids
        self._is_skipped = is_skipped
        self._window: list[int] = []  # context tokens, then tokens not released yet
        self._context_length = 0
        self._context_chars = 0  # length of decode(context), already released

    def push(self, token_id: int) -> str:
        """Add one token; return the text it completes (often "", never a partial character)."""
        if self._is_skipped(token_id):
            return ""
        self._window.append(token_id)
        text = self._decode_ids(self._window)
        if text.endswith("\ufffd") or len(text) <= self._context_chars:
            return ""
        new_text = text[self._context_chars :]
        # The tokens just released become the context of the next window.
        self._window = self._window[self._context_length :]
        self._context_length = len(self._window)
        self._context_chars = len(self._decode_ids(self._window))
        return new_text

    def flush(self) -> str:
        """Return whatever is held back (an incomplete character comes out as U+FFFD) and reset."""
        text = self._decode_ids(self._window)[self._context_chars :]
        self._window, self._context_length, self._context_chars = [], 0, 0
        return text
