"""HF's WordPiece model (BERT): one pre-tokenized word -> token ids.

Greedy longest match first: the longest vocabulary entry starting the word, then the longest
continuing it (written with the `##` prefix), and so on. A word that cannot be covered, or is
longer than `max_input_chars_per_word` characters, becomes the unknown token.
"""

from ..spec_error import SpecError

CACHE_WORDS = 50_000


class WordPiece:
    def __init__(self, vocab: dict[str, int], unk_token: str, prefix: str = "##", max_input_chars_per_word: int = 100):
        if unk_token not in vocab:
            raise SpecError(f"WordPiece unk_token {unk_token!r} is not in the vocab")
        self.vocab = vocab
        self._unk_id = vocab[unk_token]
        self._prefix = prefix
        self._max_chars = max_input_chars_per_word
        self._longest = max(map(len, vocab), default=1)
        self._cache: dict[str, tuple] = {}

    def tokenize(self, word: str) -> list[int]:
        # A text repeats its words: each is matched once (a bounded cache, emptied when full).
        ids = self._cache.get(word)
        if ids is None:
            if len(self._cache) >= CACHE_WORDS:
                self._cache.clear()
            ids = self._cache[word] = tuple(self._match(word))
        return list(ids)

    def _match(self, word: str) -> list[int]:
        if len(word) > self._max_chars:
            return [self._unk_id]
        ids: list[int] = []
        start = 0
        while start < len(word):
            for end in range(min(len(word), start + self._longest), start, -1):
                piece = word[start:end] if start == 0 else self._prefix + word[start:end]
                token = self.vocab.get(piece)
                if token is not None:
                    ids.append(token)
                    start = end
                    break
            else:
                return [self._unk_id]
        return ids
