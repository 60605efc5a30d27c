"""llama.cpp's Unigram model (llm_tokenizer_ugm, GGUF `t5` vocabularies): text -> token ids.

Text is normalized SentencePiece's way (the precompiled charsmap, user-defined tokens kept as
they are, spaces as "▁" with one prepended, optionally runs of spaces merged), then cut by
Viterbi into the tokens with the highest total score. A character no token covers is the unknown
token, scored below every token; consecutive unknown tokens become one.
"""

from __future__ import annotations

import struct

from ..charsmap import CharsMap
from ..viterbi import best_path

_SPACE = "\u2581"
_UNKNOWN_PENALTY = 10.0


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


class UnigramSession:
    def __init__(
        self,
        tokens: list[str],
        scores: list[float],
        *,
        candidates: dict[str, int],
        user_defined: set[str],
        normal_ids: list[int],
        unk_id: int | None,
        charsmap: CharsMap | None,
        add_space_prefix: bool,
        merge_spaces: bool,
        escape_spaces: bool,
    ):
        """`candidates`: text -> id of the tokens Viterbi may use (normal, user-defined, unused)."""
        self._candidates = candidates
        self._max_chars = max((len(t) for t in candidates), default=1)
        # llama.cpp passes on unnormalized the longest text shared with the start of any
        # user-defined token, complete or not.
        self._user_prefixes = {token[:end] for token in user_defined for end in range(1, len(token) + 1)}
        self._longest_user_token = max(map(len, user_defined), default=0)
        self._scores = [0.0 if t in user_defined else s for t, s in zip(tokens, scores)]
        # llama.cpp computes this in float: min over normal tokens, less the penalty.
        min_score = min((scores[i] for i in normal_ids), default=3.4028234663852886e38)
        self._unknown_score = _float32(_float32(min_score) - _UNKNOWN_PENALTY)
        self._unk_id = unk_id
        self._charsmap = charsmap
        self._prepend = add_space_prefix
        self._merge = merge_spaces
        self._space = _SPACE if escape_spaces else " "

    def tokenize(self, text: str) -> list[int]:
        normalized = self.normalize(text)
        if not normalized:
            return []
        path = best_path(normalized, self._candidates, self._max_chars, self._scores.__getitem__, self._unknown_score)
        out: list[int] = []
        for _, _, token in path:
            token = self._unk_id if token is None else token
            if not (token == self._unk_id and out and out[-1] == self._unk_id):
                out.append(token)
        return [token for token in out if token is not None]

    def normalize(self, text: str) -> str:
        data = text.encode("utf-8")
        out: list[str] = []
        space_prepended = in_word = False
        position = 0
        while position < len(data):
            consumed, replacement = self._normalize_prefix(data, position)
            position += consumed
            for char in replacement:
                if char != " ":
                    if not in_word:
                        in_word = True
                        if (self._prepend and not space_prepended) or self._merge:
                            out.append(self._space)
                            space_prepended = True
                    out.append(char)
                else:
                    in_word = False
                    if not self._merge:
                        out.append(self._space)
        return "".join(out)

    def _normalize_prefix(self, data: bytes, position: int) -> tuple[int, str]:
        """(bytes consumed, their normalized text) for the longest known prefix at `position`."""
        rest = data[position : position + 4 * max(self._longest_user_token, 1)]
        shared = self._shared_with_user_token(rest)
        if shared:
            return len(shared.encode("utf-8")), shared
        if self._charsmap is not None:
            match = self._charsmap.longest_match(data, position)
            if match is not None:
                length, replacement = match
                return length, replacement.decode("utf-8", errors="replace")
        char_length = 1 + (rest[0] >= 0xC0) + (rest[0] >= 0xE0) + (rest[0] >= 0xF0)
        return char_length, rest[:char_length].decode("utf-8")

    def _shared_with_user_token(self, rest: bytes) -> str:
        text = rest[: 4 * self._longest_user_token].decode("utf-8", errors="ignore")
        end = 0
        while end < len(text) and text[: end + 1] in self._user_prefixes:
            end += 1
        return text[:end]
