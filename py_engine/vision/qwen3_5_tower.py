"""Qwen3.5's vision tower on the GPU (models/qwen3_5_vision.py's graph), one picture a forward: its patch
rows (in merge-block order: vision/pictures.py's qwen3_5_embeddings writes them from a picture's pixels),
the grid's RoPE angles and position-embedding taps beside them (vision/qwen3_5_grid.py), and its tokens'
embeddings copied into the text engine's image_embeds. Unlike SmolVLM's and Gemma 3's towers, whose tiles
are one size, a forward's rows are its picture's patches (at most max_patches), and its output rows a
merge^2-th of them (Step.logit_rows)."""

from __future__ import annotations

from array import array

from ..gpu import Copy, Read
from ..models.rope import Rotary
from .qwen3_5_grid import merged_order, position_taps, rope_table


class Qwen35VisionEncoder:
    def __init__(self, device, executor, kernels, cfg, geometry: dict):
        self.device, self.executor, self.kernels, self.cfg, self.geometry = device, executor, kernels, cfg, geometry
        self.rows = geometry["max_patches"]  # the most patches a forward takes
        self.merge, self.patch = geometry["merge"], geometry["patch_size"]
        self.frames = geometry["frames"]  # frames a patch row holds (models/qwen3_5_vision.py)
        self.row_values = 3 * self.frames * self.patch**2  # f32 values a patch row
        self.tokens = geometry["tokens"]  # the most tokens a forward makes
        self.width = geometry["out_hidden"]  # the text tower's hidden size
        self.features = executor.buffer("image_features")
        self.patches = executor.buffer("patches")
        # The 2D RoPE's frequencies: head_dim / 4 of them, turning by the row and then by the column.
        self.inv_freq = Rotary(cfg.head_dim // 2, geometry["theta"], None).inv_freq

    def commands_into(self, grid: tuple[int, int], buffer, first_row: int) -> list:
        """One picture's forward over the patch rows in the `patches` input (a grid of rows x cols patches,
        in merge-block order), its inputs for that grid written now; its tokens' embeddings then copied into
        `buffer` (an Engine's image_embeds) from row first_row. Submit before the next picture's are written."""
        rows, cols = grid
        order = merged_order(rows, cols, self.merge)
        count = len(order)
        if not 0 < count <= self.rows:
            raise ValueError(f"a picture of {rows} x {cols} patches: the vision tower takes 1 to {self.rows}")
        write, ex = self.device.write_buffer, self.executor
        taps, weights = position_taps(order, rows, cols, self.geometry["side"])
        write(ex.buffer("pos_taps"), 0, taps)
        write(ex.buffer("pos_weights"), 0, weights)
        write(ex.buffer("vision_rope"), 0, rope_table(order, self.inv_freq))
        write(ex.buffer("spans"), 0, array("I", [0, count] * count).tobytes())
        tokens = count // self.merge**2
        size = 4 * tokens * self.width
        return ex.commands(count, 0, logit_rows=tokens) + [
            Copy(self.features, 0, buffer, first_row * self.width * 4, size)
        ]

    async def encode(self, pictures: list[tuple[bytes, tuple[int, int]]]) -> list[list[float]]:
        """Each picture's patch rows (f32 bytes, merge-block order) and its grid through the tower: its
        tokens' embeddings, width floats each, picture after picture (tests; what wants them on the host)."""
        out = []
        for rows_bytes, grid in pictures:
            count = grid[0] * grid[1]
            if len(rows_bytes) != 4 * count * self.row_values:
                raise ValueError(f"{grid[0]} x {grid[1]} patches are {count} rows of {self.row_values} f32 values")
            scratch = self.device.create_buffer(4 * (count // self.merge**2) * self.width, label="image features")
            self.device.write_buffer(self.patches, 0, rows_bytes)
            read = Read(scratch, 0, 4 * (count // self.merge**2) * self.width)
            values = array("f")
            values.frombytes(
                await self.device.fetch(self.device.submit(self.commands_into(grid, scratch, 0) + [read])[0])
            )
            self.device.destroy_buffer(scratch)
            flat = values.tolist()
            out += [flat[i * self.width : (i + 1) * self.width] for i in range(len(flat) // self.width)]
        return out
