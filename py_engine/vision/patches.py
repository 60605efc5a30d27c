"""A picture's resized 8-bit images as the vision tower's input rows, on the GPU (shaders/image_patches.wgsl).

After the resizes (resample.py), the image processor rescales and normalizes each image to float32,
channel-first, and the tower's patch embedding (a Conv2d of stride `patch`) reads it patch by patch.
Here that is one step: each tile of an image is cut into patch x patch patches, each patch becomes
one row of 3 * patch * patch floats in the Conv2d weight's order (channel, ky, kx), tiles in order,
so the patch embedding is a matmul over the rows. `picture_grids` says which tiles of which image,
from a SmolVLM ImagePlan; `encode` makes the dispatches (a grid's `each_tile`: one a tile);
`patch_rows` runs them into a new buffer.

The floats are the processor's bits exactly: a channel byte has only 256 levels, so `level_values`
computes each level's float on the host with the processor's arithmetic and the kernel looks them
up (a GPU has no f64 and need not round f32 division correctly). The arithmetic, per backend:
- "pil" (SmolVLMImageProcessorPil, transformers' choice for SmolVLM unless torchvision >= 0.27
  is installed, and the one whose Pillow resize resample.py reproduces): image_transforms.rescale
  makes f32(f64(byte) * rescale_factor); normalize makes (r - f32(mean)) / f32(std), each operation
  rounded to f32.
- "torchvision" (SmolVLMImageProcessor): rescale_and_normalize fuses the two, (f32(byte) - m) / s
  in f32 with m = f32(f32(mean) * f32(1 / rescale_factor)) and s likewise from std. It lands up to
  6e-8 from "pil" at mean = std = 0.5, 2.4e-7 at CLIP's or ImageNet's.
Without do_normalize the value is the rescaled byte (torchvision's: f32(byte) * f32(rescale_factor));
without do_rescale the byte is normalized as f32; without either it is the byte as f32.
Every f32 operation here is done in Python's f64 and rounded once to f32 (struct), which is the
correctly rounded f32 result (53 >= 2 * 24 + 2 bits: double rounding is harmless for + - * /).
Pure Python (Pyodide has no numpy) and host-neutral (the device seam only).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, replace

from ..gpu import Dispatch

LEVELS = 256  # an 8-bit channel's values: one table row of the kernel's level_values per channel
GROUP = 16  # the kernel's workgroup is GROUP x GROUP pixels of the tile grid
ARITHMETICS = ("pil", "torchvision")


@dataclass(frozen=True)
class TileGrid:
    """rows x cols square tiles of `tile` pixels, row-major, cut from an image of width x height
    pixels from its pixel (top, left); one tile covering a tile x tile image is its global view."""

    width: int
    height: int
    tile: int
    rows: int = 1
    cols: int = 1
    top: int = 0
    left: int = 0

    @property
    def tiles(self) -> int:
        return self.rows * self.cols

    def each_tile(self) -> list[TileGrid]:
        """Its tiles in order, each a grid of one: a dispatch per tile (e.g. straight into a vision
        tower's input of one tile's rows) writes what the whole grid's dispatch writes."""
        return [
            replace(self, rows=1, cols=1, top=self.top + r * self.tile, left=self.left + c * self.tile)
            for r in range(self.rows)
            for c in range(self.cols)
        ]


@dataclass
class Encoded:
    """What `encode` made: the dispatches, in order; how many patch rows they write; and the
    buffers they own (their Params), to destroy once the dispatches are submitted."""

    commands: list
    rows: int
    temporaries: list


def picture_grids(plan) -> list[TileGrid]:
    """The images a picture's plan (a SmolVLM ImagePlan: rows, cols, encoder, tile) feeds the tower,
    each as the grid cut from it, in pixel_values' order: when it is split, the encoder-sized
    image's rows x cols tiles; then the global view, a tile x tile image of one tile."""
    grids = []
    if plan.rows > 0:
        height, width = plan.encoder
        grids.append(TileGrid(width, height, plan.tile, plan.rows, plan.cols))
    grids.append(TileGrid(plan.tile, plan.tile, plan.tile))
    return grids


def rows_per_tile(tile: int, patch: int) -> int:
    """Patch rows one tile makes: (tile / patch)^2; the tile must be a multiple of the patch."""
    for what, value in (("tile", tile), ("patch", patch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{what} must be an integer >= 1, not {value!r}")
    if tile % patch:
        raise ValueError(f"a tile of {tile} pixels is not a whole number of {patch}-pixel patches")
    return (tile // patch) ** 2


def row_count(grids: list[TileGrid], patch: int) -> int:
    """Patch rows all the grids make together."""
    return sum(g.tiles * rows_per_tile(g.tile, patch) for g in grids)


def _f32(value: float) -> float:
    """`value` rounded to the nearest float32 (ties to even), as a Python float."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        raise ValueError(f"{value!r} is out of float32's range (an image_std near zero?)") from None


def level_values(settings, arithmetic: str = "pil") -> list[float]:
    """[3][256] floats (flat): the processor's float32 for each channel's each 8-bit level. `settings`
    holds image_mean, image_std (3 each), rescale_factor, do_rescale, do_normalize (SmolVLMSettings'
    names; the flags are True where absent); `arithmetic` names the processor backend (ARITHMETICS)."""
    if arithmetic not in ARITHMETICS:
        raise ValueError(f"unknown arithmetic {arithmetic!r} (known: {', '.join(ARITHMETICS)})")
    do_rescale = getattr(settings, "do_rescale", True)
    do_normalize = getattr(settings, "do_normalize", True)
    scale = float(settings.rescale_factor)
    torchvision = arithmetic == "torchvision"
    fused = torchvision and do_rescale and do_normalize  # the rescale folded into mean and std
    out = []
    for channel in range(3):
        mean, std = _f32(settings.image_mean[channel]), _f32(settings.image_std[channel])
        if fused:
            mean, std = _f32(mean * _f32(1.0 / scale)), _f32(std * _f32(1.0 / scale))
        for level in range(LEVELS):
            value = float(level)
            if do_rescale and not fused:
                value = _f32(value * _f32(scale)) if torchvision else _f32(value * scale)
            if do_normalize:
                value = _f32(_f32(value - mean) / std)
            out.append(value)
    return out


def level_buffer(device, settings, arithmetic: str = "pil"):
    """A new buffer of level_values(settings, arithmetic) as f32: `encode`'s `levels`; the caller owns it."""
    table = array("f", level_values(settings, arithmetic)).tobytes()
    levels = device.create_buffer(len(table), label="image_patches.levels")
    device.write_buffer(levels, 0, table)
    return levels


def encode(device, kernels, images: list, levels, out, out_rows: int, patch: int, row_offset: int = 0) -> Encoded:
    """The dispatches that write the patch rows of `images`, a list of (buffer of RGBA8 pixels, its
    TileGrid), one dispatch each, into `out` (f32 [out_rows][3 * patch^2]) from row `row_offset` on,
    image after image. `levels` is a buffer of level_values' floats; `kernels` the engine's
    KernelCache for `device`. Nothing is submitted."""
    row_floats = 3 * patch * patch
    total = row_count([grid for _, grid in images], patch)
    if row_offset < 0 or row_offset + total > out_rows:
        raise ValueError(f"rows {row_offset} .. {row_offset + total} do not fit in {out_rows} rows")
    limits = device.caps.limits
    if out_rows * row_floats * 4 > limits.max_storage_binding:
        raise ValueError(f"{out_rows} patch rows of {row_floats} floats: more than one storage binding holds")
    for _, grid in images:  # all checked before any buffer is made
        _check_grid(grid, limits)
    kernel = kernels.get("image_patches")
    commands, temporaries, row = [], [], row_offset
    for pixels, grid in images:
        params = kernel.pack_params(
            {"image_w": grid.width, "top": grid.top, "left": grid.left, "grid_rows": grid.rows}
            | {"grid_cols": grid.cols, "tile_side": grid.tile, "patch_side": patch, "row_offset": row}
        )
        uniform = device.create_buffer(len(params), "uniform", label="image_patches.params")
        device.write_buffer(uniform, 0, params)
        temporaries.append(uniform)
        resources = [
            (uniform, 0, len(params)),
            (pixels, 0, grid.width * grid.height * 4),
            (levels, 0, 3 * LEVELS * 4),
            (out, 0, out_rows * row_floats * 4),
        ]
        group = device.create_bind_group(kernel.handle, resources)
        grid_size = (-(-grid.cols * grid.tile // GROUP), -(-grid.rows * grid.tile // GROUP), 1)
        commands.append(Dispatch(kernel.handle, group, grid_size))
        row += grid.tiles * rows_per_tile(grid.tile, patch)
    return Encoded(commands, total, temporaries)


def _check_grid(grid: TileGrid, limits) -> None:
    for what in ("width", "height", "tile", "rows", "cols"):
        value = getattr(grid, what)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"a tile grid's {what} must be an integer >= 1, not {value!r}")
    for what in ("top", "left"):
        value = getattr(grid, what)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"a tile grid's {what} must be an integer >= 0, not {value!r}")
    if grid.top + grid.rows * grid.tile > grid.height or grid.left + grid.cols * grid.tile > grid.width:
        raise ValueError(
            f"{grid.rows} x {grid.cols} tiles of {grid.tile} from ({grid.top}, {grid.left}) "
            f"overrun a {grid.width} x {grid.height} image"
        )
    if grid.width * grid.height * 4 > limits.max_storage_binding:
        raise ValueError(f"a {grid.width} x {grid.height} image: more than one storage binding holds")
    if -(-max(grid.rows, grid.cols) * grid.tile // GROUP) > limits.max_workgroups_per_dim:
        raise ValueError(f"{grid.rows} x {grid.cols} tiles of {grid.tile}: too many pixels along an axis")


async def patch_rows(device, kernels, images: list, settings, patch: int, arithmetic: str = "pil"):
    """(a new buffer of f32 [rows][3 * patch^2], rows): the patch rows of `images` ((buffer, TileGrid)
    pairs, e.g. the resized images of picture_grids(plan)) with `settings`' rescale and normalize (see
    level_values). The work is submitted, not awaited; the caller owns the returned buffer."""
    rows = row_count([grid for _, grid in images], patch)
    levels = level_buffer(device, settings, arithmetic)
    out = device.create_buffer(max(rows, 1) * 3 * patch * patch * 4, label="image_patches.out")
    try:
        encoded = encode(device, kernels, images, levels, out, rows, patch)
    except Exception:
        device.destroy_buffer(levels)
        device.destroy_buffer(out)
        raise
    await device.prepare()  # the browser compiles kernels asynchronously
    device.submit(encoded.commands)
    for buffer in [levels, *encoded.temporaries]:  # WebGPU frees them once the submitted work is done
        device.destroy_buffer(buffer)
    return out, rows
