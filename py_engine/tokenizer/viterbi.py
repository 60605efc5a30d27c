"""The best segmentation of a text into Unigram tokens (SentencePiece's optimized Viterbi)."""

from collections.abc import Callable


def best_path(
    text: str,
    candidates: dict[str, int],
    max_chars: int,
    score_of: Callable[[int], float],
    unknown_score: float,
) -> list[tuple[int, int, int | None]]:
    """(start, end, token id) covering `text` with the highest total score; the id is None for a
    character no token covers (scored `unknown_score`). Ties go to the path found first: the one
    whose last token starts earliest, then the shorter last token."""
    size = len(text)
    best_score = [float("-inf")] * (size + 1)
    best_start = [0] * (size + 1)
    best_token: list[int | None] = [None] * (size + 1)
    best_score[0] = 0.0
    for start in range(size):
        score_here = best_score[start]
        covers_one_char = False
        for end in range(start + 1, min(size, start + max_chars) + 1):
            token = candidates.get(text[start:end])
            if token is None:
                continue
            covers_one_char = covers_one_char or end == start + 1
            score = score_here + score_of(token)
            if score > best_score[end]:
                best_score[end], best_start[end], best_token[end] = score, start, token
        if not covers_one_char:
            score = score_here + unknown_score
            if score > best_score[start + 1]:
                best_score[start + 1], best_start[start + 1], best_token[start + 1] = score, start, None
    path: list[tuple[int, int, int | None]] = []
    end = size
    while end > 0:
        path.append((best_start[end], end, best_token[end]))
        end = best_start[end]
    path.reverse()
    return path
