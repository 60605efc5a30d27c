"""shaders/image_resample.wgsl through py_engine/vision/resample.py against Pillow's Image.resize, bit
for bit: random 8-bit RGB pictures of odd sizes, down, up and mixed (a one-pass case and a vertical-
first one among them), under each filter the HF processors use; a 4-band (RGBa) picture for the
alpha byte. The planning code alone: its fixed-point taps against those Pillow resamples with
(a delta of 2^22 in an "I" image comes out as the tap itself, its 32-bit path rounding as the
8-bit path's taps are rounded), the pass order, and its errors."""

import asyncio

import numpy as np
import pytest
from gpu_harness import device
from PIL import Image

from py_engine.vision import resample

PIL_FILTERS = {
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
}
SIZES = [  # (in_w, in_h) -> (out_w, out_h)
    ((37, 53), (16, 24)),
    ((13, 7), (40, 31)),
    ((64, 48), (64, 20)),  # the vertical pass alone
    ((101, 3), (7, 9)),
    ((1, 1), (5, 3)),
    ((512, 384), (37, 29)),
    ((20, 90), (18, 30)),  # the vertical pass first
]


def gpu_resize(pixels: np.ndarray, out_w: int, out_h: int, filter_name: str) -> np.ndarray:
    """pixels: uint8 [h, w, 4]; the GPU's [out_h, out_w, 4]."""
    dev, kernels = device()
    in_h, in_w = pixels.shape[:2]
    src = dev.create_buffer(pixels.nbytes)
    dev.write_buffer(src, 0, np.ascontiguousarray(pixels).tobytes())
    out = asyncio.run(resample.resize(dev, kernels, src, in_w, in_h, out_w, out_h, filter_name))
    raw = asyncio.run(dev.read_buffer(out, 0, out_w * out_h * 4))
    dev.destroy_buffer(src)
    dev.destroy_buffer(out)
    return np.frombuffer(raw, np.uint8).reshape(out_h, out_w, 4)


@pytest.mark.parametrize("filter_name", PIL_FILTERS)
@pytest.mark.parametrize("size_in,size_out", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_rgb_matches_pillow(size_in, size_out, filter_name):
    (in_w, in_h), (out_w, out_h) = size_in, size_out
    rng = np.random.default_rng(in_w * 1000 + in_h)
    rgb = rng.integers(0, 256, (in_h, in_w, 3), dtype=np.uint8)
    want = np.asarray(Image.fromarray(rgb).resize((out_w, out_h), PIL_FILTERS[filter_name]))
    rgba = np.concatenate([rgb, np.full((in_h, in_w, 1), 255, np.uint8)], axis=2)  # as ImageData
    got = gpu_resize(rgba, out_w, out_h, filter_name)
    np.testing.assert_array_equal(got[..., :3], want)
    assert (got[..., 3] == 255).all()  # opaque stays opaque


@pytest.mark.parametrize("filter_name", PIL_FILTERS)
def test_four_bands_match_pillow(filter_name):
    """All four bytes through the same arithmetic: Pillow's RGBa (premultiplied) mode, resized as is."""
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, (29, 45, 4), dtype=np.uint8)
    image = Image.frombytes("RGBa", (45, 29), pixels.tobytes())
    want = np.frombuffer(image.resize((17, 40), PIL_FILTERS[filter_name]).tobytes(), np.uint8).reshape(40, 17, 4)
    np.testing.assert_array_equal(gpu_resize(pixels, 17, 40, filter_name), want)


def test_same_size_is_a_copy():
    rng = np.random.default_rng(8)
    pixels = rng.integers(0, 256, (5, 9, 4), dtype=np.uint8)
    np.testing.assert_array_equal(gpu_resize(pixels, 9, 5, "lanczos"), pixels)


def pillow_taps(in_size: int, out_size: int, filter_name: str) -> np.ndarray:
    """[out_size, in_size] fixed-point taps as Pillow computes them: source index j's column from
    resizing a 1-row "I" image holding 2^22 at j (ROUND_UP of 2^22 * k: the 8-bit path's rounding)."""
    taps = np.zeros((out_size, in_size), np.int64)
    for j in range(in_size):
        delta = np.zeros((1, in_size), np.int32)
        delta[0, j] = 1 << resample.PRECISION_BITS
        out = Image.fromarray(delta, "I").resize((out_size, 1), PIL_FILTERS[filter_name])
        taps[:, j] = np.asarray(out)[0]
    return taps


@pytest.mark.parametrize("filter_name", PIL_FILTERS)
@pytest.mark.parametrize("in_size,out_size", [(37, 16), (13, 40), (101, 7), (1, 5), (90, 30), (7, 8)])
def test_taps_match_pillow(in_size, out_size, filter_name):
    ours = np.zeros((out_size, in_size), np.int64)
    for xx, (first, weights) in enumerate(resample.coefficients(in_size, out_size, filter_name)):
        ours[xx, first : first + len(weights)] = [resample.fixed_point(w) for w in weights]
    np.testing.assert_array_equal(ours, pillow_taps(in_size, out_size, filter_name))


def test_plan_layout():
    stride, plan = resample.pass_plan(4, 2, "bilinear")  # 2x down: 4 taps a side, 2 inside the image
    words = np.frombuffer(plan, np.int32).reshape(2, stride)
    assert stride == 2 + 3 and list(words[:, :2].ravel()) == [0, 3, 1, 3]
    assert words[:, 2:].sum(axis=1).tolist() == [1 << 22, 1 << 22]


def test_pass_order():
    assert resample.passes(37, 53, 16, 24) == ["horizontal", "vertical"]
    assert resample.passes(20, 90, 18, 30) == ["vertical", "horizontal"]  # 60 rows lost > 2 x 2 columns
    assert resample.passes(64, 48, 64, 20) == ["vertical"]
    assert resample.passes(64, 48, 30, 48) == ["horizontal"]
    assert resample.passes(9, 5, 9, 5) == []


def test_errors():
    with pytest.raises(ValueError, match="'nearest'"):
        resample.coefficients(10, 5, "nearest")
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match=">= 1"):
            resample.coefficients(bad, 5, "bilinear")
    dev, kernels = device()
    src = dev.create_buffer(16)
    with pytest.raises(ValueError, match="out_h"):
        asyncio.run(resample.resize(dev, kernels, src, 2, 2, 3, 0, "bicubic"))
    with pytest.raises(ValueError, match="'box'"):
        asyncio.run(resample.resize(dev, kernels, src, 2, 2, 3, 3, "box"))
    dev.destroy_buffer(src)
