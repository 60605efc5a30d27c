"""SmolVLM's (Idefics3's) image geometry and prompt text, as transformers' SmolVLMProcessor decides them.

No pixels here: `image_plan` says, for a picture of a given size, every size the processor resizes it
to, the tiles it cuts and the global view it adds; `image_prompt` is the text one `<image>` placeholder
becomes. The pixel side (resizes on the GPU, rescale, normalize) follows the plan.

What the processor does to one picture (image_processing_pil_smolvlm.py, SmolVLMImageProcessorPil):

1. convert to RGB (transparency composited onto white), then, when do_resize, resize it so that its
   longest edge is size.longest_edge (up or down; the other edge int()-truncated, then made even),
   kept under 4096 a side;
2. when do_image_splitting: resize it again so that both sides are multiples of max_image_size
   (`resize_for_vision_encoder`); if a side is then above max_image_size, cut it into rows x cols
   square tiles of max_image_size (row-major) and add the whole of it, resized to a square
   max_image_size, as the global view after them; else it is the one image, already that square;
3. when not do_image_splitting: resize it to a square max_image_size, the one image (rows = cols = 0);
4. rescale (1/255) and normalize ((x - mean) / std), channel-first.

Every resize uses the one filter `resample` (LANCZOS in SmolVLM's files) on the uint8 result of the
one before it; a resize to the size the image already has is a copy. Every image the vision tower
sees is a square of max_image_size, so one picture's pixel_values are [1, images, 3, M, M] and its
pixel_attention_mask [1, images, M, M] all ones (zeros only pad a batch's pictures with fewer images).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ModelFileError, WispError
from ..formats.json_file import describe

MAX_IMAGE_SIZE = 4096  # the processor's cap on either side after the first resize
PREPROCESSOR_FILE = "preprocessor_config.json"
PROCESSOR_FILE = "processor_config.json"
MODEL_FILE = "config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
# PIL's filter numbers, as image processors' `resample` holds them.
RESAMPLE_FILTERS = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
# The processor's tokens where the tokenizer names none (SmolVLMProcessor.__init__'s getattr defaults).
DEFAULT_TOKENS = {
    "fake_image_token": "<fake_token_around_image>",
    "image_token": "<image>",
    "global_image_token": "<global-img>",
}


@dataclass(frozen=True)
class SmolVLMSettings:
    """What the processor's files say about a picture's geometry, pixels and tokens."""

    longest_edge: int  # size.longest_edge: the first resize's longest side
    tile: int  # max_image_size.longest_edge: every image the vision tower sees is this square
    image_seq_len: int  # image tokens per image (tile or global view)
    do_resize: bool = True
    do_image_splitting: bool = True
    resample: str = "lanczos"  # one of RESAMPLE_FILTERS' names
    do_convert_rgb: bool = True
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class ImageTokens:
    """The token strings the prompt is made of, as the tokenizer names them."""

    fake_image: str = DEFAULT_TOKENS["fake_image_token"]
    image: str = DEFAULT_TOKENS["image_token"]
    global_image: str = DEFAULT_TOKENS["global_image_token"]


@dataclass(frozen=True)
class ImagePlan:
    """Everything the processor decides for one picture; sizes are (height, width)."""

    original: tuple[int, int]
    resized: tuple[int, int]  # after the first resize (the original when not do_resize)
    encoder: tuple[int, int] | None  # after resize_for_vision_encoder (None when not do_image_splitting)
    rows: int  # the tile grid; 0 x 0 when the picture is not split
    cols: int
    tiles: tuple[tuple[int, int, int, int], ...]  # (top, left, bottom, right) in the encoder-sized image
    global_from: str  # what the global view is resized from: "resized" or "encoder"
    tile: int  # the side of every image: tiles and the global view are tile x tile
    image_seq_len: int

    @property
    def split(self) -> bool:
        return self.rows > 0

    @property
    def num_images(self) -> int:
        """Images fed to the vision tower: the tiles, then the global view."""
        return self.rows * self.cols + 1

    @property
    def pixel_values_shape(self) -> tuple[int, int, int, int, int]:
        return (1, self.num_images, 3, self.tile, self.tile)

    @property
    def num_image_tokens(self) -> int:
        """How many image tokens the prompt holds for it (the vision tower's rows it is replaced by)."""
        return self.num_images * self.image_seq_len


def smolvlm_settings(
    preprocessor: dict,
    processor: dict | None = None,
    model: dict | None = None,
    paths: tuple = (PREPROCESSOR_FILE, PROCESSOR_FILE, MODEL_FILE),
) -> SmolVLMSettings:
    """The settings from the image processor's config (preprocessor_config.json), the processor's
    (processor_config.json: image_seq_len) and, when given, the model's config.json.

    The processor takes image_seq_len from processor_config.json alone (transformers' default, 169,
    when absent); the model makes (vision image_size // patch_size)**2 / scale_factor**2 features an
    image. Given the model's config, both are checked to agree (and max_image_size to be the vision
    tower's image_size), and image_seq_len missing from processor_config.json is the model's count."""
    pre_path, proc_path, model_path = paths
    if not isinstance(preprocessor, dict):
        raise ModelFileError(pre_path, f"expected an object, got {describe(preprocessor)}")
    processor = {} if processor is None else processor
    if not isinstance(processor, dict):
        raise ModelFileError(proc_path, f"expected an object, got {describe(processor)}")
    field = _Fields(preprocessor, pre_path)
    longest_edge = field.edge("size")
    tile = field.edge("max_image_size")
    flags = {
        key: field.flag(key, default)
        for key, default in (
            ("do_resize", True),
            ("do_image_splitting", True),
            ("do_convert_rgb", True),
            ("do_rescale", True),
            ("do_normalize", True),
        )
    }
    resample = preprocessor.get("resample", 1)
    if not isinstance(resample, int) or isinstance(resample, bool) or resample not in RESAMPLE_FILTERS:
        raise ModelFileError(pre_path, f"resample should be a PIL filter number 0-5, got {describe(resample)}")
    rescale_factor = field.number("rescale_factor", 1 / 255)
    mean, std = field.triple("image_mean"), field.triple("image_std")
    if 0.0 in std:
        raise ModelFileError(pre_path, f"image_std should have no zero, got {describe(list(std))}")

    features = _model_features(model, tile, model_path) if model is not None else None
    seq_len = processor.get("image_seq_len")
    if seq_len is None:
        if features is None:
            raise ModelFileError(proc_path, "image_seq_len is missing (and no model config to count it from)")
        seq_len = features
    if not isinstance(seq_len, int) or isinstance(seq_len, bool) or seq_len < 1:
        raise ModelFileError(proc_path, f"image_seq_len should be a positive integer, got {describe(seq_len)}")
    if features is not None and seq_len != features:
        raise ModelFileError(
            proc_path, f"image_seq_len is {seq_len}, but the model makes {features} features of an image"
        )
    return SmolVLMSettings(
        longest_edge,
        tile,
        seq_len,
        resample=RESAMPLE_FILTERS[resample],
        rescale_factor=rescale_factor,
        image_mean=mean,
        image_std=std,
        **flags,
    )


class _Fields:
    """Reads one config dict's fields, each error naming the file and the field."""

    def __init__(self, config: dict, path):
        self.config, self.path = config, path

    def fail(self, key: str, expected: str, value):
        raise ModelFileError(self.path, f"{key} should be {expected}, got {describe(value)}")

    def edge(self, key: str) -> int:
        """A required {"longest_edge": N} size."""
        value = self.config.get(key)
        if value is None:
            raise ModelFileError(self.path, f"{key} is missing")
        if not isinstance(value, dict) or "longest_edge" not in value:
            self.fail(key, 'an object with "longest_edge"', value)
        edge = value["longest_edge"]
        if not isinstance(edge, int) or isinstance(edge, bool) or edge < 1:
            self.fail(f"{key}.longest_edge", "a positive integer", edge)
        return edge

    def flag(self, key: str, default: bool) -> bool:
        value = self.config.get(key, default)
        if not isinstance(value, bool):
            self.fail(key, "true or false", value)
        return value

    def number(self, key: str, default: float) -> float:
        value = self.config.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
            self.fail(key, "a positive number", value)
        return float(value)

    def triple(self, key: str) -> tuple[float, float, float]:
        value = self.config.get(key, [0.5, 0.5, 0.5])
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value] * 3
        if not isinstance(value, list) or len(value) != 3:
            self.fail(key, "a list of 3 numbers", value)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            self.fail(key, "a list of 3 numbers", value)
        return tuple(float(v) for v in value)


def _model_features(model: dict, tile: int, path) -> int:
    """The features the model's vision tower and connector make of one tile x tile image."""
    if not isinstance(model, dict):
        raise ModelFileError(path, f"expected an object, got {describe(model)}")
    vision = model.get("vision_config")
    if not isinstance(vision, dict):
        raise ModelFileError(path, f"vision_config should be an object, got {describe(vision)}")
    scale = model.get("scale_factor", 2)  # Idefics3Config's / SmolVLMConfig's default
    if not isinstance(scale, int) or isinstance(scale, bool) or scale < 1:
        raise ModelFileError(path, f"scale_factor should be a positive integer, got {describe(scale)}")
    size, patch = vision.get("image_size"), vision.get("patch_size")
    for key, value in (("image_size", size), ("patch_size", patch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ModelFileError(path, f"vision_config.{key} should be a positive integer, got {describe(value)}")
    if size != tile:
        raise ModelFileError(path, f"vision_config.image_size is {size}, but the processor's tiles are {tile}")
    side = size // patch
    if size % patch or side % scale:
        raise ModelFileError(
            path, f"vision_config.image_size {size} is not a multiple of patch_size {patch} x scale_factor {scale}"
        )
    return (side // scale) ** 2  # the modeling's int(side**2 / scale**2), exact here


def image_tokens(tokenizer_config: dict | None = None, path=TOKENIZER_CONFIG_FILE) -> ImageTokens:
    """The prompt's token strings: the tokenizer's named special tokens where it names them
    (tokenizer_config.json's extra_special_tokens object, or the top-level keys transformers 5's
    save_pretrained writes them as), else the processor's defaults."""
    found = named_tokens(tokenizer_config, DEFAULT_TOKENS, path, "extra_special_tokens.")
    return ImageTokens(found["fake_image_token"], found["image_token"], found["global_image_token"])


def named_tokens(tokenizer_config: dict | None, defaults: dict, path, label: str = "") -> dict:
    """Each of `defaults`' keys as the tokenizer names its token: in tokenizer_config.json's
    extra_special_tokens object, else a top-level key, else the default; an error names the key after
    `label`."""
    config = tokenizer_config or {}
    named = config.get("extra_special_tokens")
    if not isinstance(named, dict):  # absent, or a plain list of tokens: nothing named there
        named = {}
    found = {}
    for key, default in defaults.items():
        value = named.get(key, config.get(key, default))
        if isinstance(value, dict):  # an AddedToken as saved: {"content": ..., ...}
            value = value.get("content")
        if not isinstance(value, str) or not value:
            raise ModelFileError(path, f"{label}{key} should be a token string, got {describe(value)}")
        found[key] = value
    return found


def three_numbers(keys, key: str, default: tuple) -> tuple[float, float, float]:
    """A processor's per-channel setting (image_mean / image_std): 3 numbers, or one for all three."""
    value = keys.get(key, list(default))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value] * 3
    if not isinstance(value, list) or len(value) != 3 or not all(type(v) in (int, float) for v in value):
        keys.fail(key, "a list of 3 numbers", value)
    return tuple(float(v) for v in value)


def check_picture_size(height: int, width: int) -> None:
    for name, value in (("height", height), ("width", width)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise WispError(f"an image's {name} should be a positive integer, got {value!r}")


def image_plan(height: int, width: int, settings: SmolVLMSettings) -> ImagePlan:
    """The processor's decisions for one picture of height x width, to its integer arithmetic."""
    check_picture_size(height, width)
    tile = settings.tile
    resized = (height, width)
    if settings.do_resize:
        resized = _scale_below(*_rescale_to(height, width, settings.longest_edge), MAX_IMAGE_SIZE)
    if not settings.do_image_splitting:
        return ImagePlan((height, width), resized, None, 0, 0, (), "resized", tile, settings.image_seq_len)
    encoder = _multiples_of(*resized, tile)
    h, w = encoder
    if h <= tile and w <= tile:  # the picture is the one image, already tile x tile
        return ImagePlan((height, width), resized, encoder, 0, 0, (), "resized", tile, settings.image_seq_len)
    rows, cols = (h - tile) // tile + 1, (w - tile) // tile + 1
    tiles = tuple((r * tile, c * tile, (r + 1) * tile, (c + 1) * tile) for r in range(rows) for c in range(cols))
    return ImagePlan((height, width), resized, encoder, rows, cols, tiles, "encoder", tile, settings.image_seq_len)


def _rescale_to(height: int, width: int, longest: int) -> tuple[int, int]:
    """The longest side to `longest`, the other to the aspect ratio, truncated, then made even, at least 1."""
    aspect = width / height
    if width >= height:
        width = longest
        height = int(width / aspect)
        height += height % 2
    else:
        height = longest
        width = int(height * aspect)
        width += width % 2
    return max(height, 1), max(width, 1)


def _scale_below(height: int, width: int, bound: int) -> tuple[int, int]:
    """Shrunk to the aspect ratio (truncated, at least 1) when its longest side is above `bound`."""
    aspect = width / height
    if width >= height and width > bound:
        width = bound
        height = int(width / aspect)
    elif height > width and height > bound:
        height = bound
        width = int(height * aspect)
    return max(height, 1), max(width, 1)


def _multiples_of(height: int, width: int, tile: int) -> tuple[int, int]:
    """resize_for_vision_encoder: the longest side up to a multiple of `tile`, the other to the aspect
    ratio (truncated), then up to a multiple of `tile` too."""
    aspect = width / height
    if width >= height:
        width = math.ceil(width / tile) * tile
        height = math.ceil(int(width / aspect) / tile) * tile
    else:
        height = math.ceil(height / tile) * tile
        width = math.ceil(int(height * aspect) / tile) * tile
    return height, width


def image_prompt(plan: ImagePlan, settings: SmolVLMSettings, tokens: ImageTokens) -> str:
    """The text one `<image>` placeholder becomes: each tile's `<row_r_col_c>` and image tokens, rows
    ended by a newline, then a blank line and the global view's; an unsplit picture is the global view
    alone. Each image's tokens open with the fake token; the global view's also close with it."""
    images = tokens.image * settings.image_seq_len
    fake = tokens.fake_image
    text = "".join(
        "".join(f"{fake}<row_{r + 1}_col_{c + 1}>{images}" for c in range(plan.cols)) + "\n" for r in range(plan.rows)
    )
    whole = f"{fake}{tokens.global_image}{images}{fake}"
    return f"{text}\n{whole}" if plan.split else whole
