"""shaders/image_composite.wgsl against Pillow: an RGBA picture composited onto white as the HF
processors' convert_rgb does it (Image.alpha_composite(white, picture).convert("RGB")), bit for bit
over every alpha value."""

import asyncio

import numpy as np
from gpu_harness import device
from PIL import Image

from py_engine.vision.pictures import composite_on_white


def test_matches_pillow_for_every_alpha():
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, (64, 256, 4), dtype=np.uint8)
    pixels[:, :, 3] = np.arange(256, dtype=np.uint8)  # every alpha, in each row
    dev, kernels = device()
    buffer = dev.create_buffer(pixels.nbytes)
    dev.write_buffer(buffer, 0, pixels.tobytes())
    asyncio.run(composite_on_white(dev, kernels, buffer, 64 * 256))
    got = np.frombuffer(asyncio.run(dev.read_buffer(buffer, 0, pixels.nbytes)), np.uint8).reshape(pixels.shape)
    white = Image.new("RGBA", (256, 64), (255, 255, 255, 255))
    want = np.asarray(Image.alpha_composite(white, Image.fromarray(pixels, "RGBA")).convert("RGB"))
    assert np.array_equal(got[:, :, :3], want)
    assert (got[:, :, 3] == 255).all()
