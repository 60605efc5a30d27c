"""Qwen3.5's picture geometry and prompt text, as transformers' Qwen3VLProcessor decides them (its image
processor Qwen2VLImageProcessor; the PIL backend's Pillow resize is the one vision/resample.py reproduces).

What the processor does to one picture:

1. convert to RGB (transparency composited onto white);
2. resize it to (h, w) = smart_resize(height, width): each side rounded to a multiple of patch_size x
   merge_size, then, where the area passes size.longest_edge (max pixels) or falls short of
   size.shortest_edge (min pixels), both scaled by one factor and floored (ceiled) to multiples again;
   with the file's filter, BICUBIC where it names none;
3. rescale (1/255) and normalize ((x - mean) / std), cut into patch_size patches in merge-block order,
   each patch's frame repeated temporal_patch_size times (a still picture fills the temporal patch):
   (h / patch) x (w / patch) rows for the vision tower (shaders/image_patches_merged.wgsl).

Its prompt text: the chat template writes <|vision_start|><|image_pad|><|vision_end|> where a picture
goes; the processor repeats the <|image_pad|> once per merged token, (h / patch) x (w / patch) / merge^2.

Wisp's vision tower takes at most geometry["max_patches"] patches a picture (models/qwen3_5_vision.py):
where the processor's max pixels would allow more, the smaller bound is the one smart_resize gets, so a
picture larger than that is resized smaller than transformers would (a 1024 x 1024 area at patch 16).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ModelFileError, WispError
from ..formats.json_file import describe
from ..models.config_values import ConfigKeys
from .resample import FILTERS
from .smolvlm import RESAMPLE_FILTERS, check_picture_size, named_tokens, three_numbers

# The processor's token strings where the tokenizer names none (Qwen3VLProcessor's defaults), and the ids
# transformers' Qwen3_5Config gives them where config.json names none.
DEFAULT_TOKENS = {
    "vision_start_token": "<|vision_start|>",
    "image_token": "<|image_pad|>",
    "vision_end_token": "<|vision_end|>",
}
DEFAULT_IDS = {"vision_start_token_id": 248053, "image_token_id": 248056, "vision_end_token_id": 248054}
MAX_ASPECT = 200  # smart_resize's bound on the longer side over the shorter


@dataclass(frozen=True)
class Qwen35Settings:
    """What preprocessor_config.json says (SmolVLMSettings' names for what vision/patches.py reads), with
    the pixel bounds smart_resize takes (max_pixels: the processor's or the tower's, the smaller)."""

    min_pixels: int
    max_pixels: int
    patch_size: int
    temporal: int
    merge: int
    do_resize: bool = True
    resample: str = "bicubic"
    do_convert_rgb: bool = True
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: tuple[float, float, float] = (0.48145466, 0.4578275, 0.40821073)  # OPENAI_CLIP_MEAN
    image_std: tuple[float, float, float] = (0.26862954, 0.26130258, 0.27577711)  # OPENAI_CLIP_STD

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge


@dataclass(frozen=True)
class Qwen35Tokens:
    vision_start: str = DEFAULT_TOKENS["vision_start_token"]
    image: str = DEFAULT_TOKENS["image_token"]
    vision_end: str = DEFAULT_TOKENS["vision_end_token"]


@dataclass(frozen=True)
class Qwen35Plan:
    """One picture as the processor takes it: sizes (height, width) in pixels, its patch grid (rows, cols)."""

    original: tuple[int, int]
    resized: tuple[int, int]
    grid: tuple[int, int]
    merge: int

    @property
    def merged(self) -> tuple[int, int]:
        """Its tokens' grid: the patch grid over the merge (where the text tower's RoPE puts them)."""
        return self.grid[0] // self.merge, self.grid[1] // self.merge

    @property
    def patches(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def num_image_tokens(self) -> int:
        return self.patches // self.merge**2


def qwen3_5_settings(preprocessor: dict, geometry: dict, path) -> Qwen35Settings:
    """The settings from preprocessor_config.json, checked against the vision tower's geometry
    (models/qwen3_5_vision.py: patch_size, temporal, merge, max_patches). Absent keys are
    Qwen2VLImageProcessor's defaults; min_pixels / max_pixels (older files) override size's, as there."""
    if not isinstance(preprocessor, dict):
        raise ModelFileError(path, f"expected an object, got {describe(preprocessor)}")
    pre = ConfigKeys(preprocessor, path)
    size = pre.section("size")
    min_pixels = pre.int("min_pixels", size.int("shortest_edge", 56 * 56))
    max_pixels = pre.int("max_pixels", size.int("longest_edge", 28 * 28 * 1280))
    if not 1 <= min_pixels <= max_pixels:
        pre.fail("size", "shortest_edge (min pixels) from 1 to longest_edge (max pixels)", size.raw)
    sizes = {}
    for key, tower, default in (("patch_size", "patch_size", 14), ("temporal_patch_size", "temporal", 2)):
        sizes[key] = pre.int(key, default)
        if sizes[key] != geometry[tower]:
            pre.fail(key, f"the vision tower's {geometry[tower]}", sizes[key])
    merge = pre.int("merge_size", 2)
    if merge != geometry["merge"]:
        pre.fail("merge_size", f"the vision tower's spatial_merge_size {geometry['merge']}", merge)
    flags = {key: pre.bool(key, True) for key in ("do_resize", "do_convert_rgb", "do_rescale", "do_normalize")}
    resample = pre.int("resample", 3)  # BICUBIC
    if RESAMPLE_FILTERS.get(resample) not in FILTERS:
        known = ", ".join(
            f"{n} ({RESAMPLE_FILTERS[n]})" for n in sorted(RESAMPLE_FILTERS) if RESAMPLE_FILTERS[n] in FILTERS
        )
        pre.fail("resample", f"a PIL filter Wisp resizes with: {known}", resample)
    mean, std = (
        three_numbers(pre, "image_mean", Qwen35Settings.image_mean),
        three_numbers(pre, "image_std", Qwen35Settings.image_std),
    )
    if 0.0 in std:
        pre.fail("image_std", "three numbers, none zero", list(std))
    factor = pre.number("rescale_factor", 1 / 255)
    if not factor > 0:
        pre.fail("rescale_factor", "a positive number", factor)
    most = geometry["max_patches"] * geometry["patch_size"] ** 2
    return Qwen35Settings(
        min(min_pixels, most),
        min(max_pixels, most),
        sizes["patch_size"],
        sizes["temporal_patch_size"],
        merge,
        resample=RESAMPLE_FILTERS[resample],
        rescale_factor=factor,
        image_mean=mean,
        image_std=std,
        **flags,
    )


def qwen3_5_tokens(tokenizer_config: dict | None, path) -> Qwen35Tokens:
    """The prompt's picture tokens: tokenizer_config.json's vision_start_token / image_token /
    vision_end_token (top-level, or in an extra_special_tokens object), else Qwen3VLProcessor's."""
    found = named_tokens(tokenizer_config, DEFAULT_TOKENS, path)
    return Qwen35Tokens(found["vision_start_token"], found["image_token"], found["vision_end_token"])


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """transformers' smart_resize (Qwen2VLImageProcessor), in its float arithmetic."""
    if max(height, width) / min(height, width) > MAX_ASPECT:
        raise WispError(f"a {width} x {height} picture: its sides' ratio passes {MAX_ASPECT}, which Qwen refuses")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def qwen3_5_plan(height: int, width: int, settings: Qwen35Settings, max_patches: int) -> Qwen35Plan:
    """The processor's decisions for a picture of height x width; refused where its patches would pass the
    tower's max_patches (smart_resize can pass max pixels for a very thin picture)."""
    check_picture_size(height, width)
    factor = settings.factor
    if settings.do_resize:
        resized = smart_resize(height, width, factor, settings.min_pixels, settings.max_pixels)
    elif height % factor or width % factor:
        raise WispError(
            f"a {width} x {height} picture: this model's processor does not resize, and takes multiples of {factor}"
        )
    else:
        resized = (height, width)
    grid = (resized[0] // settings.patch_size, resized[1] // settings.patch_size)
    if grid[0] * grid[1] > max_patches:
        raise WispError(
            f"a {width} x {height} picture becomes {grid[0] * grid[1]} patches, more than the vision tower's {max_patches}"
        )
    return Qwen35Plan((height, width), resized, grid, settings.merge)


def qwen3_5_prompt(plan: Qwen35Plan, tokens: Qwen35Tokens) -> str:
    """The text one <|image_pad|> becomes (Qwen3VLProcessor.replace_image_token)."""
    return tokens.image * plan.num_image_tokens
