"""What Qwen3.5's vision tower reads about a picture's patch grid besides its pixels, computed on the host
as transformers computes it (vision_utils.get_vision_position_ids and
get_vision_interpolation_indices_and_weights; Qwen3_5VisionRotaryEmbedding). Pure Python.

A forward is one picture: rows x cols patches, one row each, in merge-block order (the merge x merge patches
the merger joins are consecutive; shaders/image_patches_merged.wgsl writes them so). For each row:
- its 2D RoPE: head_dim / 2 angles, the first half the patch's row times the frequencies, the second its
  column times them (frequencies theta^(-2i / (head_dim / 2))), each angle f32(position * f), as
  transformers' float32 product; shaders/rope_rows.wgsl turns q and k by them;
- its learned position embedding: the tower's square table of side x side embeddings resampled to the
  picture's grid, bilinear with corners aligned (torch's F.interpolate), as 4 taps into the table and
  their weights, every step rounded to float32 as torch's; shaders/embed_interp.wgsl sums them.
"""

from __future__ import annotations

import math
from array import array

from ..models.rope import f32


def merged_order(rows: int, cols: int, merge: int) -> list[tuple[int, int]]:
    """(row, column) of each patch of a rows x cols grid in merge-block order."""
    if rows % merge or cols % merge:
        raise ValueError(f"a {rows} x {cols} patch grid is not whole {merge} x {merge} blocks")
    return [
        (block_row * merge + r, block_col * merge + c)
        for block_row in range(rows // merge)
        for block_col in range(cols // merge)
        for r in range(merge)
        for c in range(merge)
    ]


def rope_table(order: list[tuple[int, int]], inv_freq: list[float]) -> bytes:
    """[patches, 2 * len(inv_freq), 2] float32 (cos, sin): a patch's row angles, then its column angles."""
    angles = array("f")
    for row, col in order:
        angles.extend([float(row) * f for f in inv_freq])
        angles.extend([float(col) * f for f in inv_freq])
    values = array("f", bytes(8 * len(angles)))
    values[0::2] = array("f", map(math.cos, angles))
    values[1::2] = array("f", map(math.sin, angles))
    return values.tobytes()


def _axis(index: int, size: int, side: int) -> tuple[tuple[int, int], tuple[float, float]]:
    """Two taps into a side-long axis and their float32 weights for target `index` of a size-long axis
    (transformers' _interpolation_axis_taps_weights, bilinear, align_corners)."""
    src = f32(f32(float(index) * (side - 1)) / max(size - 1, 1))
    floor = float(math.floor(src))
    taps = tuple(min(max(int(floor) + o, 0), side - 1) for o in (0, 1))
    weights = tuple(max(f32(1.0 - abs(f32(f32(src - floor) - o))), 0.0) for o in (0, 1))
    return taps, weights


def position_taps(order: list[tuple[int, int]], rows: int, cols: int, side: int) -> tuple[bytes, bytes]:
    """(u32 [patches, 4] table rows, f32 [patches, 4] weights): each patch's position embedding as the
    weighted sum of 4 rows of the side x side table, (top, left), (top, right), (bottom, left), (bottom,
    right), each weight the f32 product of its row's and its column's."""
    row_axis = [_axis(r, rows, side) for r in range(rows)]
    col_axis = [_axis(c, cols, side) for c in range(cols)]
    taps, weights = array("I"), array("f")
    for row, col in order:
        (row_taps, row_weights), (col_taps, col_weights) = row_axis[row], col_axis[col]
        taps.extend([r * side + c for r in row_taps for c in col_taps])
        weights.extend([f32(a * b) for a in row_weights for b in col_weights])
    return taps.tobytes(), weights.tobytes()
