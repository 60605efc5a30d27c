"""llama.cpp's SentencePiece BPE (llm_tokenizer_spm): one piece of text -> token ids.

Starting from single characters, the adjacent pair whose joined text is a token with the highest
score is merged, leftmost first on ties, until no pair joins into a token. Any token counts,
whatever its type. A leftover character that is no token is spelled with byte tokens.
"""

import heapq


def spm_tokenize(text: str, ids: dict[str, int], scores: list[float], byte_ids: list[int | None]) -> list[int]:
    """`ids`: text -> token id; `byte_ids[b]`: the token for byte b (llama.cpp's byte_to_token)."""
    count = len(text)
    starts = list(range(count))
    ends = list(range(1, count + 1))
    next_index = list(range(1, count + 1))
    next_index[-1] = -1
    previous_index = list(range(-1, count - 1))
    heap: list[tuple[float, int, int, int]] = []

    def add_pair(left: int, right: int) -> None:
        if left == -1 or right == -1:
            return
        token = ids.get(text[starts[left] : ends[right]])
        if token is not None:
            # Highest score first, then the leftmost; the length marks the entry stale once
            # either side has grown.
            heapq.heappush(heap, (-scores[token], left, right, ends[right] - starts[left]))

    for index in range(1, count):
        add_pair(index - 1, index)
    while heap:
        _, left, right, length = heapq.heappop(heap)
        if ends[left] == starts[left] or ends[right] == starts[right]:
            continue  # a side was merged away
        if ends[right] - starts[left] != length or next_index[left] != right:
            continue
        ends[left] = ends[right]
        ends[right] = starts[right]  # empty: merged into the left symbol
        next_index[left] = next_index[right]
        if next_index[right] != -1:
            previous_index[next_index[right]] = left
        add_pair(previous_index[left], left)
        add_pair(left, next_index[left])

    out: list[int] = []
    index = 0
    while index != -1:
        piece = text[starts[index] : ends[index]]
        token = ids.get(piece)
        if token is not None:
            out.append(token)
        else:
            # A byte with no token is dropped (llama.cpp would abort on it).
            out.extend(byte_ids[byte] for byte in piece.encode("utf-8") if byte_ids[byte] is not None)
        index = next_index[index]
    return out
