"""SentencePiece's precompiled normalization map ("precompiled_charsmap").

The blob is a uint32 size, a double-array trie of that many bytes (XOR-compressed, each node one
little-endian uint32), then NUL-terminated replacement strings. The trie maps UTF-8 prefixes of
the input to the offset of their replacement. GGUF `t5` vocabularies carry it in
`tokenizer.ggml.precompiled_charsmap`, tokenizer.json in a `Precompiled` normalizer (base64).
"""

import struct

from .spec_error import SpecError


class CharsMap:
    def __init__(self, blob: bytes):
        """Raises SpecError for a blob that cannot be a charsmap. Lookups never fail: a trie whose
        nodes lead out of it (which SentencePiece would read past) just has no such entry."""
        if len(blob) < 4:
            raise SpecError("precompiled charsmap is too small")
        (trie_size,) = struct.unpack_from("<I", blob)
        if trie_size < 4 or trie_size % 4 or 4 + trie_size >= len(blob):
            raise SpecError("precompiled charsmap is malformed (trie size out of bounds)")
        if blob[-1] != 0:
            raise SpecError("precompiled charsmap is malformed (its replacements are not NUL-terminated)")
        self._nodes = struct.unpack_from(f"<{trie_size // 4}I", blob, 4)
        self._replacements = blob[4 + trie_size :]

    def _node(self, index: int) -> int | None:
        return self._nodes[index] if index < len(self._nodes) else None

    @staticmethod
    def _base(node: int) -> int:
        return (node >> 10) << ((node & (1 << 9)) >> 6)

    def _matches(self, data: bytes, start: int):
        """(length, replacement offset) of each prefix of data[start:] the map rewrites, shortest first."""
        index = self._base(self._nodes[0])
        for position in range(start, len(data)):
            byte = data[position]
            if byte == 0:
                break
            index ^= byte
            node = self._node(index)
            if node is None or node & ((1 << 31) | 0xFF) != byte:  # not a child of the previous node
                break
            is_leaf = (node >> 8) & 1
            index ^= self._base(node)
            if is_leaf:
                value = self._node(index)
                if value is None:
                    break
                offset = value & ((1 << 31) - 1)
                if offset < len(self._replacements):  # NUL-terminated: the blob ends with one
                    yield position - start + 1, offset

    def longest_match(self, data: bytes, start: int) -> tuple[int, bytes] | None:
        """(length, replacement) of the longest prefix of data[start:] the map rewrites, if any
        (SentencePiece's and llama.cpp's normalization)."""
        matches = list(self._matches(data, start))
        return (matches[-1][0], self._replacement(matches[-1][1])) if matches else None

    def shortest_match(self, data: bytes) -> bytes | None:
        """The replacement of the shortest prefix of `data` the map rewrites (HF's lookup)."""
        match = next(self._matches(data, 0), None)
        return None if match is None else self._replacement(match[1])

    def _replacement(self, offset: int) -> bytes:
        return self._replacements[offset : self._replacements.index(b"\0", offset)]
