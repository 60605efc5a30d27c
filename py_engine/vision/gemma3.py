"""Gemma 3's picture geometry and prompt text, as transformers' Gemma3Processor decides them.

What the processor does to one picture (Gemma3ImageProcessor, pan-and-scan off: the processor's default
where preprocessor_config.json leaves do_pan_and_scan null, as google/gemma-3-*-it's do):

1. convert to RGB (transparency composited onto white; do_convert_rgb null is the processor's default,
   true);
2. resize it to size.height x size.width (the vision tower's image_size square, whatever the picture's
   aspect) with the one filter `resample` (BILINEAR in Gemma 3's files);
3. rescale (1/255) and normalize ((x - mean) / std), channel-first: one image, one forward of the tower.

Its prompt text: the chat template writes `<start_of_image>` (the boi token) where a picture goes; the
processor replaces each by "\\n\\n<start_of_image>" + mm_tokens_per_image x "<image_soft_token>" +
"<end_of_image>\\n\\n", and the soft tokens are the ones the image embeddings replace (after Gemma's
embedding scale, which they do not get) and which attend to each other both ways (engine.py).

transformers picks a torchvision backend for Gemma3ImageProcessor where torchvision is installed, whose
antialiased bilinear resize can differ from Pillow's by a level here and there; the PIL backend's resize
is the one vision/resample.py reproduces bit for bit (tests/test_vision_gemma3.py: its pixel values).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelFileError, WispError
from ..formats.json_file import describe
from ..models.config_values import ConfigKeys
from .resample import FILTERS
from .smolvlm import RESAMPLE_FILTERS, ImagePlan, check_picture_size, named_tokens, three_numbers

# The processor's token strings where the tokenizer names none (Gemma 3's vocabulary's).
DEFAULT_TOKENS = {"boi_token": "<start_of_image>", "image_token": "<image_soft_token>", "eoi_token": "<end_of_image>"}
IMAGE_SEQ_LENGTH = 256  # Gemma3Processor's default image_seq_length


@dataclass(frozen=True)
class Gemma3Settings:
    """What the processor's files say about a picture's pixels and tokens (SmolVLMSettings' names, which
    vision/pictures.py and vision/patches.py read)."""

    size: int  # the square every picture is resized to: the vision tower's image_size
    image_seq_len: int  # soft tokens a picture: mm_tokens_per_image
    do_resize: bool = True
    resample: str = "bilinear"
    do_convert_rgb: bool = True
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class Gemma3Tokens:
    boi: str = DEFAULT_TOKENS["boi_token"]
    image: str = DEFAULT_TOKENS["image_token"]
    eoi: str = DEFAULT_TOKENS["eoi_token"]


# Flags by (absent, null), as transformers reads them: absent is the image processor's class default;
# null is the processor's default for the two Gemma3Processor names (images_kwargs), but false for the
# others (the image processor's attribute, None, skips its step).
FLAGS = {
    "do_resize": (True, False),
    "do_rescale": (True, False),
    "do_normalize": (True, False),
    "do_convert_rgb": (True, True),
    "do_pan_and_scan": (False, False),
}


def gemma3_settings(preprocessor: dict, processor: dict | None, geometry: dict, paths: tuple) -> Gemma3Settings:
    """The settings from preprocessor_config.json and processor_config.json (image_seq_length), checked
    against the vision tower's geometry (models/gemma3_vision.py: image_size, tokens). Null values as
    transformers reads them (FLAGS; a null mean, std or rescale factor that a step needs is refused,
    where transformers fails)."""
    pre_path, proc_path = paths
    for value, path in ((preprocessor, pre_path), (processor, proc_path)):
        if value is not None and not isinstance(value, dict):
            raise ModelFileError(path, f"expected an object, got {describe(value)}")
    pre, proc = ConfigKeys(preprocessor, pre_path), ConfigKeys(processor or {}, proc_path)
    image = geometry["image_size"]
    size = pre.section("size")
    height, width = size.int("height", 224), size.int("width", 224)
    if (height, width) != (image, image):
        raise ModelFileError(
            pre_path, f"size is {height} x {width}, but the vision tower's images are {image} x {image}"
        )
    flags = {}
    for key, (absent, null) in FLAGS.items():
        flags[key] = preprocessor.get(key, absent)
        flags[key] = null if flags[key] is None else flags[key]
        if not isinstance(flags[key], bool):
            pre.fail(key, "true, false or null", flags[key])
    if flags.pop("do_pan_and_scan"):
        pre.fail("do_pan_and_scan", "false or null (pan-and-scan crops are not supported)", True)
    for key, step in (("image_mean", "do_normalize"), ("image_std", "do_normalize"), ("rescale_factor", "do_rescale")):
        if key in preprocessor and preprocessor[key] is None and flags[step]:
            pre.fail(key, f"given where {step} is true", None)
    resample = pre.int("resample", 2)  # null: the PIL backend's BILINEAR
    if RESAMPLE_FILTERS.get(resample) not in FILTERS:
        known = ", ".join(
            f"{n} ({RESAMPLE_FILTERS[n]})" for n in sorted(RESAMPLE_FILTERS) if RESAMPLE_FILTERS[n] in FILTERS
        )
        pre.fail("resample", f"a PIL filter Wisp resizes with: {known}", resample)
    seq_len = proc.int("image_seq_length", pre.int("image_seq_length", IMAGE_SEQ_LENGTH))
    if seq_len != geometry["tokens"]:
        raise ModelFileError(
            proc_path, f"image_seq_length is {seq_len}, but the model makes {geometry['tokens']} tokens of a picture"
        )
    # IMAGENET_STANDARD_MEAN / _STD, Gemma3ImageProcessor's defaults
    mean, std = three_numbers(pre, "image_mean", (0.5,) * 3), three_numbers(pre, "image_std", (0.5,) * 3)
    if 0.0 in std:
        pre.fail("image_std", "three numbers, none zero", list(std))
    factor = pre.number("rescale_factor", 1 / 255)
    if not factor > 0:
        pre.fail("rescale_factor", "a positive number", factor)
    return Gemma3Settings(
        image,
        seq_len,
        resample=RESAMPLE_FILTERS[resample],
        rescale_factor=factor,
        image_mean=mean,
        image_std=std,
        **flags,
    )


def gemma3_tokens(tokenizer_config: dict | None, path) -> Gemma3Tokens:
    """The prompt's picture tokens: tokenizer_config.json's boi_token / image_token / eoi_token (top-level
    keys, as the hub's and transformers 5's files have them, or an extra_special_tokens object), else
    Gemma 3's."""
    found = named_tokens(tokenizer_config, DEFAULT_TOKENS, path)
    return Gemma3Tokens(found["boi_token"], found["image_token"], found["eoi_token"])


def gemma3_plan(height: int, width: int, settings: Gemma3Settings) -> ImagePlan:
    """One picture as the processor takes it: resized to the square `size` (an unsplit ImagePlan whose
    global view is that square; vision/pictures.py copies it, as a resize to its own size)."""
    check_picture_size(height, width)
    side = settings.size
    if not settings.do_resize and (height, width) != (side, side):
        raise WispError(
            f"a {width} x {height} picture: this model's processor does not resize, and takes {side} x {side}"
        )
    return ImagePlan((height, width), (side, side), None, 0, 0, (), "resized", side, settings.image_seq_len)


def gemma3_prompt(settings: Gemma3Settings, tokens: Gemma3Tokens) -> str:
    """The text one <start_of_image> becomes (Gemma3Processor.full_image_sequence)."""
    return f"\n\n{tokens.boi}{tokens.image * settings.image_seq_len}{tokens.eoi}\n\n"
