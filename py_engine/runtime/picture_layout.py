"""Where a prompt's pictures lie, for the engine (PictureLayout: Engine.place_images writes it), and the
RoPE positions of a prompt with pictures for a text tower whose RoPE is multimodal (Qwen3.5:
models/rope.py Rotary.streams), as transformers computes them (Qwen2VLModel.get_rope_index, which Qwen3.5
inherits). Pure Python but for the buffer writes (the device seam).

Every position has three: temporal, row, column. A text token's are equal and one more than the last
position before it. A picture whose merged grid is rows x cols tokens (the vision tower's patch grid over
the merge: Engine.picture_grids) starting where the next text token would be, s, puts its token (r, c)
(row-major) at (s, s + r, s + c); the text after it goes on from s + max(rows, cols). So a position of
the cache is no longer its RoPE position: after a picture of 15 tokens in a 3 x 5 grid, the text is 10
behind, and a decode token at cache position p turns by p + delta (transformers' rope_deltas: the largest
position + 1 - the prompt's tokens)."""

from __future__ import annotations

from array import array

from ..errors import WispError
from .picture_spans import NO_IMAGE, picture_ends, picture_runs


class PictureLayout:
    """A vision-language model's text graph's picture inputs (GraphOptions.image_rows) and what the engine
    keeps of the last prompt placed: each position's slot in image_embeds (image_slots: text everywhere
    until a prompt places pictures); with GraphOptions.picture_spans (Gemma 3) each position's picture end,
    for the prompt's attention, and the pictures as runs of positions [start, end), which a prefill never
    splits across forwards (spans: prefill_chunks); with a multimodal RoPE (mrope, Qwen3.5) the merged
    grids of the pictures image_embeds holds (grids: Engine.picture_grids) and the prompt's positions
    (positions; None: plain positions)."""

    def __init__(self, device, executor, context: int, max_rows: int, mrope: bool):
        self.device, self.context, self.max_rows, self.mrope = device, context, max_rows, mrope
        self.slots = executor.buffer("image_slots")
        self.ends = executor.buffer("picture_ends") if "picture_ends" in executor.graph.inputs else None
        self.spans: list[tuple[int, int]] = []
        self.grids: list[tuple[int, int]] = []
        self.positions: PicturePositions | None = None
        device.write_buffer(self.slots, 0, array("I", [NO_IMAGE] * context).tobytes())

    def place(self, start: int, ids: list[int], image_token: int) -> int:
        """Engine.place_images: every position's slot (the k-th picture token takes row k), picture end
        and RoPE position for the prompt `ids` fed from `start`. Returns the picture tokens' count."""
        if ids and ids[-1] == image_token:  # the splice skips one-row forwards (GraphBuilder.splice_images)
            raise WispError("a prompt ends with a picture token: the processor's text closes every picture")
        slots = [NO_IMAGE] * self.context
        count = 0
        for offset, token in enumerate(ids):
            if token == image_token and start + offset < self.context:
                slots[start + offset] = count
                count += 1
        self.device.write_buffer(self.slots, 0, array("I", slots).tobytes())
        if self.ends is not None:
            spans = picture_runs(slots)
            self.device.write_buffer(
                self.ends, 0, array("I", picture_ends(spans, self.context, self.max_rows)).tobytes()
            )
            self.spans = spans
        if self.mrope:
            self.positions = picture_positions(start, ids, image_token, self.grids)
        return count


class PicturePositions:
    """A prompt's positions (t, h, w) by cache position, from 0 to its end, and the delta of every
    position after it (rows())."""

    def __init__(self, triples: list[tuple[int, int, int]], delta: int):
        self.triples, self.delta = triples, delta

    def rows(self, first: int, count: int) -> list[tuple[int, int, int]]:
        """The positions of cache positions first .. first + count - 1."""
        known = self.triples[first : first + count]
        after = range(max(first, len(self.triples)), first + count)
        return known + [(p + self.delta,) * 3 for p in after]


def picture_positions(
    start: int, ids: list[int], image_token: int, grids: list[tuple[int, int]]
) -> PicturePositions | None:
    """The positions of a prompt `ids` fed from cache position `start` (the positions before it taken as
    text) whose picture tokens (image_token) belong to the pictures of `grids` ((rows, cols) of merged
    tokens each), in order, each picture's tokens one run (the prompt may hold the first of them only: a
    prompt cache's reused prefix reads the image embeddings of the pictures last encoded, which began with
    its own); None where it has no picture token (plain positions, as transformers' for a text-only prompt)."""
    if image_token not in ids:
        return None
    triples = [(p, p, p) for p in range(start)]
    at, i, pictures = start, 0, iter(grids)
    while i < len(ids):
        if ids[i] != image_token:
            triples.append((at, at, at))
            at, i = at + 1, i + 1
            continue
        grid = next(pictures, None)
        if grid is None:
            raise WispError(f"the prompt has more pictures than the {len(grids)} encoded")
        rows, cols = grid
        count = rows * cols
        if ids[i : i + count] != [image_token] * count:
            raise WispError(f"a picture of {rows} x {cols} tokens at token {i} is not one run of picture tokens")
        triples += [(at, at + r, at + c) for r in range(rows) for c in range(cols)]
        at, i = at + max(rows, cols), i + count
    return PicturePositions(triples, at - len(triples))
