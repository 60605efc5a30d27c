"""A vision-language model's pictures as runs of a prompt's positions, for the engine (pure Python).

Gemma 3's picture tokens attend to every token of their own picture in a prompt's forward, later ones
too (transformers' token_type_ids mask; GraphOptions.picture_spans): the prompt attention
(attention_tiled.wgsl PICTURE_SPANS) reads each position's picture end, and a picture must lie within
one forward (its later keys are then in the caches when its first rows attend), of more rows than a
few-rows forward takes (attention.wgsl, which is causal)."""

from __future__ import annotations

from ..errors import WispError
from ..models.attention_grid import FEW_ROWS

NO_IMAGE = 0xFFFFFFFF  # a text position's slot in image_slots (shaders/embedding.wgsl BY_POSITION)


def picture_runs(slots: list[int]) -> list[tuple[int, int]]:
    """The runs of consecutive picture positions in a context's image slots, as [start, end): a
    picture, as transformers groups token_type_ids (a new one where a picture token follows text)."""
    runs, first = [], None
    for pos, slot in enumerate([*slots, NO_IMAGE]):
        if slot != NO_IMAGE and first is None:
            first = pos
        elif slot == NO_IMAGE and first is not None:
            runs.append((first, pos))
            first = None
    return runs


def prefill_chunks(pos: int, count: int, max_rows: int, spans: list[tuple[int, int]] = ()) -> list[int]:
    """The sizes of the forwards that prefill `count` tokens from position `pos`: max_rows each
    and the rest last, but a forward ends before a picture (a span [start, end)) it would cut, so
    that each picture lies in one forward (its tokens see each other: attention_tiled.wgsl
    PICTURE_SPANS). A prompt that starts inside a picture is refused."""
    end = pos + count
    if any(first < pos < last for first, last in spans):
        raise WispError(f"a prompt's forward starts at position {pos}, inside a picture")
    sizes = []
    while pos < end:
        stop = min(pos + max_rows, end)
        cut = next((first for first, last in spans if first < stop < last), None)
        if cut is not None:
            if cut <= pos:  # the picture alone passes max_rows (place_images refuses such a one)
                raise WispError(f"a picture at position {cut} does not fit one forward of {max_rows} rows")
            stop = cut
        sizes.append(stop - pos)
        pos = stop
    return sizes


def picture_ends(spans: list[tuple[int, int]], context: int, max_rows: int) -> list[int]:
    """Each of the context's positions' picture end (exclusive; 0 for text): the picture_ends input.
    A picture of at most FEW_ROWS tokens (its forward could be a few rows', which is causal) or of
    more than a forward's max_rows is refused (gemma3_vision_config checks the model's count)."""
    ends = [0] * context
    for first, end in spans:
        if end - first <= FEW_ROWS or end - first > max_rows:
            raise WispError(
                f"a picture of {end - first} tokens at position {first}: its tokens must be more than "
                f"{FEW_ROWS} and fit one prompt forward ({max_rows} rows)"
            )
        ends[first:end] = [end] * (end - first)
    return ends
