"""shaders/image_patches.wgsl through py_engine/vision/patches.py against numpy doing what transformers'
SmolVLM processors do, bit for bit: Pillow-resized (LANCZOS) uint8 pictures of odd sizes, rescaled
and normalized in the processor's float order (SmolVLMImageProcessorPil's image_transforms.rescale
and normalize; the torchvision processor's fused form), channel-first, cut into tiles and the tiles
into the patch embedding's rows. Tile grids of several shapes (a SmolVLM plan's tiles and global
view, one from an inner origin, one dispatched tile by tile), patches of 14 and 8, a row offset,
and the alpha byte ignored. The
host side alone: the level table against numpy under each do_rescale / do_normalize setting, the
grids a plan makes, and the errors."""

import asyncio
from dataclasses import dataclass

import numpy as np
import pytest
from gpu_harness import device
from PIL import Image

from py_engine.vision import patches
from py_engine.vision.smolvlm import SmolVLMSettings, image_plan

SMOLVLM = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
CLIP = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))


@dataclass(frozen=True)
class Pixels:
    """What patches.level_values reads of the processor's settings."""

    image_mean: tuple
    image_std: tuple
    rescale_factor: float = 1 / 255
    do_rescale: bool = True
    do_normalize: bool = True


def processor_floats(rgb: np.ndarray, pixels: Pixels, arithmetic: str = "pil") -> np.ndarray:
    """uint8 [h, w, 3] -> float32 [3, h, w], in the processor's order of float operations."""
    image = rgb.transpose(2, 0, 1)
    mean, std = np.array(pixels.image_mean, np.float32), np.array(pixels.image_std, np.float32)
    if arithmetic == "torchvision":  # SmolVLMImageProcessor: x * scale, or rescale folded into mean/std
        x = image.astype(np.float32)
        if pixels.do_rescale and pixels.do_normalize:
            factor = np.float32(1.0 / pixels.rescale_factor)
            return ((x.T - mean * factor) / (std * factor)).T
        if pixels.do_rescale:
            return x * np.float32(pixels.rescale_factor)
        return ((x.T - mean) / std).T if pixels.do_normalize else x
    x = image  # image_transforms.rescale, then .normalize
    if pixels.do_rescale:
        x = (image.astype(np.float64) * pixels.rescale_factor).astype(np.float32)
    x = x.astype(np.float32)
    return ((x.T - mean) / std).T if pixels.do_normalize else x


def reference_rows(floats: np.ndarray, grid: patches.TileGrid, patch: int) -> np.ndarray:
    """[tiles * (tile / patch)^2, 3 * patch^2]: each tile's Conv2d patches, flattened (c, ky, kx)."""
    n, rows = grid.tile // patch, []
    for r in range(grid.rows):
        for c in range(grid.cols):
            top, left = grid.top + r * grid.tile, grid.left + c * grid.tile
            tile = floats[:, top : top + grid.tile, left : left + grid.tile]
            rows.append(tile.reshape(3, n, patch, n, patch).transpose(1, 3, 0, 2, 4).reshape(n * n, -1))
    return np.concatenate(rows)


def picture(width: int, height: int, seed: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8))


def upload(dev, rgb: np.ndarray, seed: int):
    """The picture as the browser's RGBA8 (a random alpha byte: the kernel must not read it)."""
    alpha = np.random.default_rng(seed).integers(0, 256, rgb.shape[:2] + (1,), dtype=np.uint8)
    data = np.concatenate([rgb, alpha], axis=2).tobytes()
    buffer = dev.create_buffer(len(data))
    dev.write_buffer(buffer, 0, data)
    return buffer


def gpu_rows(images: list, pixels: Pixels, patch: int, arithmetic: str = "pil") -> np.ndarray:
    """images: (uint8 [h, w, 3], TileGrid) pairs; the kernel's rows."""
    dev, kernels = device()
    uploaded = [(upload(dev, rgb, i), grid) for i, (rgb, grid) in enumerate(images)]
    out, rows = asyncio.run(patches.patch_rows(dev, kernels, uploaded, pixels, patch, arithmetic))
    raw = asyncio.run(dev.read_buffer(out, 0, rows * 3 * patch * patch * 4))
    for buffer in [out, *(b for b, _ in uploaded)]:
        dev.destroy_buffer(buffer)
    return np.frombuffer(raw, np.float32).reshape(rows, 3 * patch * patch)


def assert_same_bits(got: np.ndarray, want: np.ndarray):
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize(
    "size,longest,tile,patch,grid",
    [
        ((61, 45), 56, 28, 14, (2, 2)),  # 61 x 45 -> 56 x 42 -> 56 x 56: 2 x 2 tiles, global from it
        ((37, 83), 90, 32, 8, (3, 2)),  # taller than wide: 40 x 90 -> 64 x 96
        ((23, 17), 20, 28, 14, (0, 0)),  # smaller than a tile: the global view alone
    ],
)
@pytest.mark.parametrize("means", [SMOLVLM, CLIP], ids=["smolvlm", "clip"])
def test_smolvlm_picture_matches_processor(size, longest, tile, patch, grid, means):
    """A picture's images as the plan says (Pillow's resizes), each through the kernel, in order."""
    settings = SmolVLMSettings(longest_edge=longest, tile=tile, image_seq_len=1)
    plan = image_plan(size[1], size[0], settings)
    assert (plan.rows, plan.cols) == grid
    first = picture(*size, seed=size[0]).resize(plan.resized[::-1], Image.Resampling.LANCZOS)
    encoder = first.resize(plan.encoder[::-1], Image.Resampling.LANCZOS)
    whole = (encoder if plan.global_from == "encoder" else first).resize((tile, tile), Image.Resampling.LANCZOS)
    grids = patches.picture_grids(plan)
    rgbs = ([np.asarray(encoder)] if plan.split else []) + [np.asarray(whole)]
    pixels = Pixels(*means)
    want = np.concatenate([reference_rows(processor_floats(rgb, pixels), g, patch) for rgb, g in zip(rgbs, grids)])
    assert want.shape[0] == plan.num_images * (tile // patch) ** 2
    assert_same_bits(gpu_rows(list(zip(rgbs, grids)), pixels, patch), want)


@pytest.mark.parametrize("arithmetic", patches.ARITHMETICS)
def test_inner_grid_and_arithmetic(arithmetic):
    """A 3 x 4 grid of 16-pixel tiles from (5, 3) of an odd-sized image, after a 1 x 1 one of 24."""
    rgb = np.asarray(picture(53, 41, seed=3).resize((71, 57), Image.Resampling.LANCZOS))
    small = np.asarray(picture(30, 25, seed=4))
    grids = [patches.TileGrid(71, 57, 16, 3, 4, top=5, left=3), patches.TileGrid(30, 25, 24, top=1, left=6)]
    pixels = Pixels(*CLIP, rescale_factor=1 / 127.5)
    want = np.concatenate(
        [reference_rows(processor_floats(x, pixels, arithmetic), g, 8) for x, g in zip([rgb, small], grids)]
    )
    assert_same_bits(gpu_rows([(rgb, grids[0]), (small, grids[1])], pixels, 8, arithmetic), want)


def test_each_tile_writes_what_the_grid_writes():
    """A dispatch per tile (a one-tile grid from the tile's corner) makes the grid's rows, in order."""
    rgb = np.asarray(picture(61, 47, seed=6))
    grid = patches.TileGrid(61, 47, 28, 1, 2, top=9, left=2)
    pixels = Pixels(*SMOLVLM)
    tiles = grid.each_tile()
    assert [(t.rows, t.cols, t.top, t.left) for t in tiles] == [(1, 1, 9, 2), (1, 1, 9, 30)]
    want = reference_rows(processor_floats(rgb, pixels), grid, 14)
    assert_same_bits(gpu_rows([(rgb, t) for t in tiles], pixels, 14), want)


def test_row_offset_leaves_rows_before_it():
    dev, kernels = device()
    rgb = np.asarray(picture(28, 28, seed=5))
    grid, patch, offset = patches.TileGrid(28, 28, 28), 14, 3
    pixels = Pixels(*SMOLVLM)
    row_bytes = 3 * patch * patch * 4
    levels = patches.level_buffer(dev, pixels)
    out = dev.create_buffer(9 * row_bytes)
    dev.write_buffer(out, 0, np.full(9 * row_bytes // 4, 7.0, np.float32).tobytes())
    image = upload(dev, rgb, 0)
    encoded = patches.encode(dev, kernels, [(image, grid)], levels, out, 9, patch, row_offset=offset)
    assert encoded.rows == 4 and len(encoded.commands) == 1
    dev.submit(encoded.commands)
    got = np.frombuffer(asyncio.run(dev.read_buffer(out, 0, 9 * row_bytes)), np.float32).reshape(9, -1)
    for buffer in [levels, out, image, *encoded.temporaries]:
        dev.destroy_buffer(buffer)
    assert (got[:offset] == 7.0).all() and (got[offset + 4 :] == 7.0).all()
    assert_same_bits(got[offset : offset + 4], reference_rows(processor_floats(rgb, pixels), grid, patch))


@pytest.mark.parametrize("arithmetic", patches.ARITHMETICS)
@pytest.mark.parametrize("do_rescale,do_normalize", [(True, True), (True, False), (False, True), (False, False)])
def test_level_values_match_numpy(arithmetic, do_rescale, do_normalize):
    levels = np.broadcast_to(np.arange(256, dtype=np.uint8)[:, None], (256, 3))[None]  # [1, 256, 3]
    for means, scale in (
        (SMOLVLM, 1 / 255),
        (CLIP, 1 / 255),
        (((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)), 0.0039215),
    ):
        pixels = Pixels(*means, rescale_factor=scale, do_rescale=do_rescale, do_normalize=do_normalize)
        want = processor_floats(np.ascontiguousarray(levels), pixels, arithmetic)[:, 0, :]
        assert_same_bits(np.array(patches.level_values(pixels, arithmetic), np.float32).reshape(3, 256), want)


def test_picture_grids():
    settings = SmolVLMSettings(longest_edge=1536, tile=512, image_seq_len=64)
    split = image_plan(1080, 1920, settings)
    assert patches.picture_grids(split) == [patches.TileGrid(1536, 1024, 512, 2, 3), patches.TileGrid(512, 512, 512)]
    assert patches.row_count(patches.picture_grids(split), 16) == 7 * 32 * 32
    alone = image_plan(1080, 1920, SmolVLMSettings(1536, 512, 64, do_image_splitting=False))
    assert patches.picture_grids(alone) == [patches.TileGrid(512, 512, 512)]


def test_errors():
    with pytest.raises(ValueError, match="whole number of 14-pixel patches"):
        patches.rows_per_tile(32, 14)
    with pytest.raises(ValueError, match="'bilinear'"):
        patches.level_values(Pixels(*SMOLVLM), "bilinear")
    dev, kernels = device()
    image = dev.create_buffer(64 * 64 * 4)
    for grid, match in (
        (patches.TileGrid(64, 64, 32, 2, 2, top=1), "overrun"),
        (patches.TileGrid(64, 64, 32, 0, 2), "rows must be"),
    ):
        with pytest.raises(ValueError, match=match):
            asyncio.run(patches.patch_rows(dev, kernels, [(image, grid)], Pixels(*SMOLVLM), 8))
    dev.destroy_buffer(image)
