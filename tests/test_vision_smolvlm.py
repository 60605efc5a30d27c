"""py_engine/vision/smolvlm.py against transformers' SmolVLM processor: for pictures of many sizes (1x1,
slivers, exactly a tile, a tile and one, large, portrait and landscape), with splitting on and off and
several size / max_image_size pairs, image_plan's sizes are the ones SmolVLMImageProcessorPil resizes to
(each resize's input and output, recorded), its tiles are the processor's crops (pixel for pixel), its
image count and size are pixel_values' and pixel_attention_mask's shapes, its grid the rows / cols the
processor returns; and image_prompt is the processor's own expansion (get_image_prompt_string and
SmolVLMProcessor.replace_image_token, the tokens read from a tokenizer as the processor reads them).
Then the settings: read from the files' fields, each bad or missing one an error naming it."""

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("PIL")
transformers = pytest.importorskip("transformers")

from PIL import Image  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from tokenizers.models import WordLevel  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from transformers.models.smolvlm import processing_smolvlm  # noqa: E402
from transformers.models.smolvlm.image_processing_pil_smolvlm import SmolVLMImageProcessorPil  # noqa: E402

from py_engine.errors import ModelFileError, WispError  # noqa: E402
from py_engine.vision.smolvlm import (  # noqa: E402
    ImageTokens,
    image_plan,
    image_prompt,
    image_tokens,
    smolvlm_settings,
)

# The image processor's fields as SmolVLM-256M-Instruct's preprocessor_config.json carries them, its
# processor_config.json's image_seq_len, and its config.json's vision geometry.
PREPROCESSOR_256M = {
    "do_convert_rgb": True,
    "do_image_splitting": True,
    "do_normalize": True,
    "do_pad": True,
    "do_rescale": True,
    "do_resize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_processor_type": "Idefics3ImageProcessor",
    "image_std": [0.5, 0.5, 0.5],
    "max_image_size": {"longest_edge": 512},
    "processor_class": "Idefics3Processor",
    "resample": 1,
    "rescale_factor": 0.00392156862745098,
    "size": {"longest_edge": 2048},
}
PROCESSOR_256M = {"image_seq_len": 64, "processor_class": "SmolVLMProcessor"}
MODEL_256M = {"scale_factor": 4, "vision_config": {"image_size": 512, "patch_size": 16}}
PROCESSOR_KEYS = ("do_convert_rgb", "do_image_splitting", "do_normalize", "do_pad", "do_rescale", "do_resize")
PROCESSOR_KEYS += ("image_mean", "image_std", "max_image_size", "resample", "rescale_factor", "size")


def config(longest: int, tile: int, **flags) -> dict:
    return {**PREPROCESSOR_256M, "size": {"longest_edge": longest}, "max_image_size": {"longest_edge": tile}, **flags}


class Recording(SmolVLMImageProcessorPil):
    """The PIL processor, noting each resize's input and output size and the image it splits."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.resizes, self.split_inputs = [], []

    def resize(self, image, size, resample=None, **kwargs):
        out = super().resize(image, size, resample=resample, **kwargs)
        self.resizes.append((tuple(image.shape[-2:]), tuple(out.shape[-2:])))
        return out

    def split_images(self, image, max_image_size, resample=None):
        self.split_inputs.append(image)
        return super().split_images(image, max_image_size, resample=resample)


def normalized(image: np.ndarray) -> np.ndarray:
    return (image.astype(np.float64) / 255 - 0.5) / 0.5


def check_against_processor(height: int, width: int, cfg: dict, pixels: bool = True):
    settings = smolvlm_settings(cfg, PROCESSOR_256M)
    plan = image_plan(height, width, settings)
    processor = Recording(**{k: cfg[k] for k in PROCESSOR_KEYS})
    rng = np.random.default_rng(height * 10007 + width)
    picture = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
    out = processor(images=[picture], return_row_col_info=True, return_tensors="np")
    tile = settings.tile

    expected = [((height, width), plan.resized)] if settings.do_resize else []
    if not settings.do_image_splitting:
        assert plan.encoder is None
        expected.append((plan.resized, (tile, tile)))
    else:
        expected.append((plan.resized, plan.encoder))
        if plan.split:
            expected.append((plan.encoder, (tile, tile)))  # the global view, from the encoder-sized image
    assert processor.resizes == expected
    assert plan.global_from == ("encoder" if plan.split else "resized")

    assert out["pixel_values"].shape == plan.pixel_values_shape == (1, plan.num_images, 3, tile, tile)
    assert out["pixel_attention_mask"].shape == (1, plan.num_images, tile, tile)
    assert out["pixel_attention_mask"].all()
    assert (out["rows"], out["cols"]) == ([[plan.rows]], [[plan.cols]])
    assert len(plan.tiles) == plan.rows * plan.cols == plan.num_images - 1
    if plan.split and pixels:
        (encoder_image,) = processor.split_inputs
        assert encoder_image.shape[-2:] == plan.encoder
        for k, (top, left, bottom, right) in enumerate(plan.tiles):
            assert (bottom - top, right - left) == (tile, tile)
            crop = normalized(encoder_image[:, top:bottom, left:right])
            np.testing.assert_allclose(out["pixel_values"][0, k], crop, atol=1e-6)

    tokenizer = tiny_tokenizer({})
    fake_self = SimpleNamespace(
        image_seq_len=settings.image_seq_len,
        fake_image_token=getattr(tokenizer, "fake_image_token", "<fake_token_around_image>"),
        image_token=getattr(tokenizer, "image_token", "<image>"),
        global_image_token=getattr(tokenizer, "global_image_token", "<global-img>"),
    )
    prompt = image_prompt(plan, settings, image_tokens({}))
    assert prompt == processing_smolvlm.SmolVLMProcessor.replace_image_token(fake_self, out, 0)
    assert prompt.count("<image>") == plan.num_image_tokens == plan.num_images * settings.image_seq_len
    return plan


SMALL_SIZES = [(1, 1), (1, 2), (2, 1), (17, 300), (300, 17), (32, 32), (33, 33), (31, 64), (64, 31), (65, 64)]
SMALL_SIZES += [(96, 72), (72, 96), (99, 101), (101, 99), (3, 500), (500, 3), (128, 97), (37, 41), (200, 199)]


@pytest.mark.parametrize("longest, tile", [(96, 32), (80, 32), (45, 16), (32, 32), (33, 32), (40, 48)])
@pytest.mark.parametrize("splitting", [True, False])
def test_small_settings_many_sizes(longest, tile, splitting):
    """Scaled-down settings, where every size is cheap to resize: the same arithmetic, every path."""
    for height, width in SMALL_SIZES:
        check_against_processor(height, width, config(longest, tile, do_image_splitting=splitting))


@pytest.mark.parametrize("splitting", [True, False])
def test_without_the_first_resize(splitting):
    """do_resize false: the picture keeps its size until resize_for_vision_encoder (no 4096 cap)."""
    for height, width in [(1, 1), (17, 300), (300, 17), (32, 32), (33, 33), (100, 40), (40, 100), (97, 64)]:
        check_against_processor(height, width, config(96, 32, do_resize=False, do_image_splitting=splitting))


SMOLVLM_256M_SIZES = [(1, 1), (17, 300), (300, 17), (512, 512), (513, 513), (2048, 1536), (999, 1001)]


@pytest.mark.parametrize("size", SMOLVLM_256M_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_smolvlm_256m_settings(size):
    """SmolVLM-256M-Instruct's own settings (2048, tiles of 512, 64 tokens): every picture is scaled so
    its longest side is 2048, up or down, so at most 4 x 4 tiles and the global view."""
    plan = check_against_processor(*size, PREPROCESSOR_256M, pixels=size == (999, 1001))
    assert plan.split and max(plan.rows, plan.cols) == 4


@pytest.mark.parametrize("size", [(512, 512), (513, 513), (1536, 2048), (7, 5000)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_smolvlm_256m_without_splitting_and_a_tile_sized_longest_edge(size):
    check_against_processor(*size, config(2048, 512, do_image_splitting=False))
    check_against_processor(*size, config(512, 512), pixels=False)  # longest side a tile: never split


def test_the_4096_cap():
    """After the first resize no side passes 4096 (a longest_edge above it is capped, the other side
    truncated to the aspect ratio); without the first resize a picture keeps its size."""
    assert check_against_processor(3, 5000, config(5000, 512), pixels=False).resized == (3, 4096)
    # int(5000 * (3 / 5000)) is 2, not 3: the float truncation is the processor's too.
    assert check_against_processor(5000, 3, config(5000, 512), pixels=False).resized == (4096, 1)
    settings = smolvlm_settings(config(4096, 512, do_resize=False), PROCESSOR_256M)
    plan = image_plan(5000, 20, settings)
    assert plan.resized == (5000, 20) and plan.encoder == (5120, 512) and (plan.rows, plan.cols) == (10, 1)


def tiny_tokenizer(named: dict):
    vocab = {"[UNK]": 0, "<image>": 1, "<fake_token_around_image>": 2, "<global-img>": 3, "<img>": 4, "<g>": 5}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(WordLevel(vocab, unk_token="[UNK]")), extra_special_tokens=named or None
    )


@pytest.mark.parametrize(
    "named",
    [{}, {"image_token": "<img>"}, {"image_token": "<img>", "global_image_token": "<g>", "fake_image_token": "<f>"}],
)
def test_prompt_tokens_come_from_the_tokenizer(named):
    """The processor takes its tokens from the tokenizer's named special tokens (its defaults where it
    names none); image_tokens reads the same names from tokenizer_config.json's extra_special_tokens."""
    tokenizer = tiny_tokenizer(named)
    tokens = image_tokens({"extra_special_tokens": named})
    assert tokens == ImageTokens(
        getattr(tokenizer, "fake_image_token", "<fake_token_around_image>"),
        getattr(tokenizer, "image_token", "<image>"),
        getattr(tokenizer, "global_image_token", "<global-img>"),
    )
    settings = smolvlm_settings(config(96, 32), {"image_seq_len": 3})
    for height, width in [(10, 10), (10, 70), (70, 10), (64, 96)]:
        plan = image_plan(height, width, settings)
        expected = processing_smolvlm.get_image_prompt_string(
            plan.rows, plan.cols, 3, tokens.fake_image, tokens.image, tokens.global_image
        )
        assert image_prompt(plan, settings, tokens) == expected


def test_prompt_text():
    settings = smolvlm_settings(config(64, 32), {"image_seq_len": 2})
    tokens = ImageTokens("<f>", "<i>", "<g>")
    assert image_prompt(image_plan(32, 64, settings), settings, tokens) == (
        "<f><row_1_col_1><i><i><f><row_1_col_2><i><i>\n\n<f><g><i><i><f>"
    )
    unsplit = smolvlm_settings(config(32, 32), {"image_seq_len": 2})
    assert image_prompt(image_plan(9, 9, unsplit), unsplit, tokens) == "<f><g><i><i><f>"
    assert image_tokens({"extra_special_tokens": ["<a>", "<b>"]}) == ImageTokens()
    assert image_tokens({"extra_special_tokens": {"image_token": {"content": "<x>"}}}).image == "<x>"
    # transformers 5's save_pretrained writes them as top-level keys, beside an empty list
    assert image_tokens({"image_token": "<y>", "extra_special_tokens": []}).image == "<y>"


def test_settings_of_smolvlm_256m():
    settings = smolvlm_settings(PREPROCESSOR_256M, PROCESSOR_256M, MODEL_256M)
    assert (settings.longest_edge, settings.tile, settings.image_seq_len) == (2048, 512, 64)
    assert settings.resample == "lanczos" and settings.rescale_factor == pytest.approx(1 / 255)
    assert settings.image_mean == settings.image_std == (0.5, 0.5, 0.5)
    assert settings.do_resize and settings.do_image_splitting and settings.do_convert_rgb
    # image_seq_len missing from processor_config.json: the model's count, (512 // 16)**2 / 4**2.
    assert smolvlm_settings(PREPROCESSOR_256M, {}, MODEL_256M).image_seq_len == 64
    defaults = {k: v for k, v in PREPROCESSOR_256M.items() if k in ("size", "max_image_size")}
    assert smolvlm_settings(defaults, PROCESSOR_256M) == settings


@pytest.mark.parametrize(
    "pre, proc, model, message",
    [
        ({"size": None}, None, None, "preprocessor_config.json: size is missing"),
        ({"max_image_size": {"height": 512}}, None, None, 'max_image_size should be an object with "longest_edge"'),
        ({"size": {"longest_edge": 0}}, None, None, "size.longest_edge should be a positive integer, got 0"),
        ({"size": {"longest_edge": True}}, None, None, "size.longest_edge should be a positive integer, got true"),
        ({"do_image_splitting": "yes"}, None, None, "do_image_splitting should be true or false, got 'yes'"),
        ({"resample": 9}, None, None, "resample should be a PIL filter number 0-5, got 9"),
        ({"image_mean": [0.5, 0.5]}, None, None, "image_mean should be a list of 3 numbers"),
        ({"image_std": [0.5, 0, 0.5]}, None, None, "image_std should have no zero"),
        ({"rescale_factor": -1}, None, None, "rescale_factor should be a positive number, got -1"),
        ({}, {}, None, "processor_config.json: image_seq_len is missing"),
        ({}, {"image_seq_len": "64"}, None, "image_seq_len should be a positive integer, got '64'"),
        ({}, {"image_seq_len": 169}, MODEL_256M, "image_seq_len is 169, but the model makes 64 features"),
        ({}, None, {"scale_factor": 4}, "config.json: vision_config should be an object"),
        ({}, None, {"vision_config": {"image_size": 384, "patch_size": 16}}, "vision_config.image_size is 384"),
        ({}, None, {"vision_config": {"image_size": 512}}, "vision_config.patch_size should be a positive integer"),
    ],
)
def test_bad_settings_name_the_field(pre, proc, model, message):
    cfg = {k: v for k, v in {**PREPROCESSOR_256M, **pre}.items() if v is not None}
    with pytest.raises(ModelFileError, match=message.replace("(", r"\(").replace("[", r"\[")):
        smolvlm_settings(cfg, PROCESSOR_256M if proc is None else proc, model)


def test_bad_picture_sizes():
    settings = smolvlm_settings(PREPROCESSOR_256M, PROCESSOR_256M)
    for height, width in [(0, 5), (5, -1), (2.0, 5), (True, 5)]:
        with pytest.raises(WispError, match="should be a positive integer"):
            image_plan(height, width, settings)
