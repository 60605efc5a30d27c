"""HF's Unigram model (SentencePiece unigram, e.g. T5): one pre-tokenized word -> token ids.

The word is cut into the pieces with the highest total score (see viterbi). Characters no piece
covers score the lowest piece score less 10; runs of them are fused into one string, which
becomes its byte tokens (byte_fallback) or the unknown token.
"""

from ...errors import WispError
from ..spec_error import SpecError
from ..viterbi import best_path

_UNKNOWN_PENALTY = 10.0


class Unigram:
    def __init__(self, pieces: list[tuple[str, float]], unk_id: int | None, byte_fallback: bool = False):
        if unk_id is not None and not 0 <= unk_id < len(pieces):
            raise SpecError(f"Unigram unk_id {unk_id} is outside the vocab")
        self.vocab = {piece: index for index, (piece, _) in enumerate(pieces)}
        self._scores = [float(score) for _, score in pieces]
        self._unknown_score = min(self._scores, default=0.0) - _UNKNOWN_PENALTY
        self._max_chars = max((len(piece) for piece, _ in pieces), default=1)
        self._unk_id = unk_id
        self._byte_fallback = byte_fallback

    def tokenize(self, word: str) -> list[int]:
        if not word:
            return []
        path = best_path(word, self.vocab, self._max_chars, self._scores.__getitem__, self._unknown_score)
        ids: list[int] = []
        unknown_start = None
        for start, _, token in path:
            if token is None:
                unknown_start = start if unknown_start is None else unknown_start
                continue
            if unknown_start is not None:
                ids += self._spell(word[unknown_start:start])
                unknown_start = None
            ids.append(token)
        if unknown_start is not None:
            ids += self._spell(word[unknown_start:])
        return ids

    def _spell(self, text: str) -> list[int]:
        """Ids for characters no piece covers (fused into one string, as HF does)."""
        token = self.vocab.get(text)
        if token is not None:
            return [token]
        if self._byte_fallback:
            byte_ids = [self.vocab.get(f"<0x{byte:02X}>") for byte in text.encode("utf-8")]
            if None not in byte_ids:
                return byte_ids
        if self._unk_id is None:
            raise WispError(f"the Unigram vocabulary has no unknown token to spell {text!r}")
        return [self._unk_id]
