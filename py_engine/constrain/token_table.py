"""The vocabulary as the mask walk needs it, built once per tokenizer (and vocabulary size).

- `sorted_pieces` / `sorted_ids`: the allowed tokens' bytes in byte order, an implicit trie: tokens
  that share a prefix are a contiguous range, found with bisect (`children`), so the walk needs no
  trie nodes (building one for 152k tokens costs seconds and much memory in CPython).
- `classes` (token_classes.py): the shortcuts for JSON strings and whitespace.
- `masks`: an LRU cache of masks by parser state, shared by every request on this table.
"""

import weakref
from bisect import bisect_left

from .nodes import BYTE
from .token_classes import TokenClasses, string_marks
from .vocab_bytes import vocab_bytes

MASK_CACHE = 256  # masks kept (each vocab_size / 8 bytes: 19 KB for Qwen's 152k)
_TABLES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


class TokenTable:
    def __init__(self, pieces: list, vocab_size: int | None = None):
        """pieces[i]: the bytes of token i, or None where it is never allowed (special, out of range)."""
        self.vocab_size = len(pieces) if vocab_size is None else vocab_size
        self.pieces = (list(pieces) + [None] * self.vocab_size)[: self.vocab_size]
        self.mask_bytes = 4 * ((self.vocab_size + 31) // 32)
        allowed = [i for i, piece in enumerate(self.pieces) if piece]
        allowed.sort(key=self.pieces.__getitem__)
        self.sorted_ids = allowed
        self.sorted_pieces = [self.pieces[i] for i in allowed]
        self.max_piece = max(map(len, self.sorted_pieces), default=0)
        self.marks = string_marks(self.sorted_pieces)
        self.classes = TokenClasses(self.sorted_ids, self.sorted_pieces, self.bits)
        self.masks: dict = {}

    @classmethod
    def from_tokenizer(cls, tokenizer, vocab_size: int | None = None) -> "TokenTable":
        """The table of `tokenizer` (py_engine.tokenizer's Tokenizer or LlamaTokenizer) for a model
        with `vocab_size` embedding rows (default: the tokenizer's size); cached per tokenizer."""
        vocab_size = tokenizer.vocab_size if vocab_size is None else vocab_size
        per_tokenizer = _TABLES.setdefault(tokenizer, {})
        table = per_tokenizer.get(vocab_size)
        if table is None:
            table = per_tokenizer[vocab_size] = cls(vocab_bytes(tokenizer, vocab_size), vocab_size)
        return table

    def bits(self, ids) -> int:
        """A bitset (bit i = token i) of `ids`."""
        data = bytearray(self.mask_bytes)
        for token_id in ids:
            data[token_id >> 3] |= 1 << (token_id & 7)
        return int.from_bytes(data, "little")


def children(pieces: list, lo: int, hi: int, depth: int):
    """(byte, start, end) of each child range of the prefix that pieces[lo:hi] share at `depth`
    (the pieces of exactly `depth` bytes, which come first, are skipped)."""
    i = lo
    while i < hi and len(pieces[i]) == depth:
        i += 1
    while i < hi:
        piece = pieces[i]
        byte = piece[depth]
        end = hi if byte == 255 else bisect_left(pieces, piece[:depth] + BYTE[byte + 1], i, hi)
        yield byte, i, end
        i = end
