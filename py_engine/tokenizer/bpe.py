"""The BPE model: one pre-tokenized word -> token ids.

Merge order follows HF tokenizers exactly: repeatedly apply the applicable merge of lowest
rank, leftmost first (llama.cpp's order too). A heap keeps that O(n log n), which matters for
SentencePiece-style vocabularies, where a whole paragraph without pre-tokenization is a single word.
"""

import heapq
from collections.abc import Callable

from .spec_error import SpecError

# Merges are looked up by the pair of ids packed into one int: hashing an int is much
# cheaper than hashing a tuple, and this lookup is the inner loop.
_PAIR_SHIFT = 32

# Like HF: remember up to this many words, and only short ones (long ones rarely repeat).
_CACHE_CAPACITY = 10_000
_CACHE_MAX_WORD_LENGTH = 256


class BPE:
    def __init__(
        self,
        vocab: dict[str, int],
        merges: dict[int, tuple[float, int]],
        *,
        unk_id: int | None = None,
        fuse_unk: bool = False,
        byte_fallback: bool = False,
        ignore_merges: bool = False,
        spell_unknown: Callable[[str], list[int]] | None = None,
    ):
        """`merges` maps a packed pair (see `pack_pair`) to (rank, id of the merged token).

        spell_unknown: llama.cpp's way with a character missing from the vocab: it stays in the
        word (no merge crosses it) and is spelled by this function once merging is done."""
        self.vocab = vocab
        self.merges = merges
        self.unk_id = unk_id
        self.fuse_unk = fuse_unk
        self.ignore_merges = ignore_merges
        self.spell_unknown = spell_unknown
        # Ids of the <0xNN> tokens, or None where byte fallback cannot spell a byte.
        self.byte_ids = [vocab.get(f"<0x{byte:02X}>") for byte in range(256)] if byte_fallback else None
        self._cache: dict[str, tuple[int, ...]] = {}

    @classmethod
    def from_merge_list(cls, vocab: dict[str, int], merges: list, *, where: str = "merges", **options) -> "BPE":
        """Ranks from the order of `merges`: "left right" strings (merges.txt, GGUF `gpt2`
        models) or [left, right] pairs (newer tokenizer.json). `where` names the list in errors."""
        table: dict[int, tuple[float, int]] = {}
        for rank, merge in enumerate(merges):
            if isinstance(merge, str):
                left, space, right = merge.partition(" ")
                if not space or " " in right:
                    raise SpecError(
                        f"{where}[{rank}]: bad merge {merge!r:.60}: expected two tokens separated by one space"
                    )
            elif isinstance(merge, (list, tuple)) and len(merge) == 2 and all(isinstance(part, str) for part in merge):
                left, right = merge
            else:
                raise SpecError(f'{where}[{rank}]: expected "left right" or [left, right], got {merge!r:.60}')
            try:
                # HF keeps the last rank of a repeated merge.
                table[pack_pair(vocab[left], vocab[right])] = (rank, vocab[left + right])
            except KeyError as err:
                raise SpecError(
                    f"{where}[{rank}]: merge {left!r:.40} {right!r:.40} uses a token missing from the vocab: {err}"
                ) from None
        return cls(vocab, table, **options)

    def tokenize(self, word: str) -> tuple[int, ...]:
        if self.ignore_merges:
            # Llama-3 style: a word that is itself a token is never split.
            whole = self.vocab.get(word)
            if whole is not None:
                return (whole,)
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        unknown: list[str] = []
        ids = tuple(self._merge(self._initial_symbols(word, unknown)))
        if unknown:
            # Placeholder -1 - k stands for unknown[k].
            ids = tuple(
                i for token in ids for i in (self.spell_unknown(unknown[-1 - token]) if token < 0 else (token,))
            )
        if len(self._cache) < _CACHE_CAPACITY and len(word) < _CACHE_MAX_WORD_LENGTH:
            self._cache[word] = ids
        return ids

    def _initial_symbols(self, word: str, unknown: list[str]) -> list[int]:
        """One id per character; unknown characters become byte tokens or the unk token, or
        placeholders (negative: they never merge) collected in `unknown`."""
        symbols: list[int] = []
        previous_was_unk = False
        for char in word:
            char_id = self.vocab.get(char)
            if char_id is not None:
                symbols.append(char_id)
                previous_was_unk = False
                continue
            if self.spell_unknown is not None:
                symbols.append(-1 - len(unknown))
                unknown.append(char)
                continue
            if self.byte_ids is not None:
                byte_ids = [self.byte_ids[byte] for byte in char.encode("utf-8")]
                if None not in byte_ids:
                    symbols.extend(byte_ids)
                    previous_was_unk = False
                    continue
            if self.unk_id is None:
                continue  # HF drops characters it has no way to spell
            if not (self.fuse_unk and previous_was_unk):
                symbols.append(self.unk_id)
            previous_was_unk = True
        return symbols

    def _merge(self, ids: list[int]) -> list[int]:
        count = len(ids)
        if count < 2:
            return ids
        merges = self.merges
        next_index = list(range(1, count + 1))
        next_index[-1] = -1
        previous_index = list(range(-1, count - 1))
        alive = [True] * count
        heap = []
        for index in range(count - 1):
            merge = merges.get((ids[index] << _PAIR_SHIFT) | ids[index + 1])
            if merge is not None:
                heap.append((merge[0], index, merge[1]))
        heapq.heapify(heap)

        while heap:
            _, index, merged_id = heapq.heappop(heap)
            right = next_index[index]
            if not alive[index] or right == -1:
                continue
            # Skip entries made stale by an earlier merge of either side.
            current = merges.get((ids[index] << _PAIR_SHIFT) | ids[right])
            if current is None or current[1] != merged_id:
                continue
            ids[index] = merged_id
            alive[right] = False
            after = next_index[right]
            next_index[index] = after
            if after != -1:
                previous_index[after] = index
                merge = merges.get((merged_id << _PAIR_SHIFT) | ids[after])
                if merge is not None:
                    heapq.heappush(heap, (merge[0], index, merge[1]))
            before = previous_index[index]
            if before != -1:
                merge = merges.get((ids[before] << _PAIR_SHIFT) | merged_id)
                if merge is not None:
                    heapq.heappush(heap, (merge[0], before, merge[1]))
        return [ids[index] for index in range(count) if alive[index]]


def pack_pair(left_id: int, right_id: int) -> int:
    return (left_id << _PAIR_SHIFT) | right_id
