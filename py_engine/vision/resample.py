"""Pillow's `Image.resize` of an 8-bit RGB(A) picture on the GPU, bit for bit (shaders/image_resample.wgsl).

The HF image processors resize with Pillow (LANCZOS for SmolVLM / Idefics3, BICUBIC for Qwen-VL,
BILINEAR for Gemma 3's SigLIP); the browser hands the picture over as RGBA8 bytes, one u32 a pixel.
Pillow (libImaging/Resample.c) resamples separably: per output index along an axis, a run of source
indexes and their weights, the filter's support widened by the downscale factor, centred at
(i + 0.5) * in / out, normalised to sum 1, then turned into integers with 22 fraction bits. Each
pass rounds to uint8, so which pass runs first changes the result: Pillow runs the horizontal one
first unless the height shrinks by more than twice as many pixels as the width does, and each pass
only where that size changes (no pass at all: a copy). `coefficients` reproduces the float64
weights in Pillow's order of operations, so the integers it derives are Pillow's exactly; `resize`
runs the passes. Pure Python (Pyodide has no numpy) and host-neutral (the device seam only).
"""

from __future__ import annotations

import math
from array import array

from ..gpu import Copy, Dispatch

PRECISION_BITS = 22  # Pillow's 32 - 8 - 2: 8 bits of result, 2 of headroom for the negative lobes
TILE = 16  # the kernel's workgroup is TILE x TILE output pixels


def _bilinear(x: float) -> float:
    if x < 0.0:
        x = -x
    if x < 1.0:
        return 1.0 - x
    return 0.0


def _bicubic(x: float) -> float:
    a = -0.5  # Pillow's (as Keys' / OpenCV's -0.75 is not)
    if x < 0.0:
        x = -x
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * a
    return 0.0


def _sinc(x: float) -> float:
    if x == 0.0:
        return 1.0
    x = x * math.pi
    return math.sin(x) / x


def _lanczos(x: float) -> float:
    if -3.0 <= x and x < 3.0:  # Pillow's bounds: -3 is inside, 3 is not
        return _sinc(x) * _sinc(x / 3)
    return 0.0


# name -> (support, kernel), as Pillow's BILINEAR, BICUBIC and LANCZOS filters
FILTERS = {"bilinear": (1.0, _bilinear), "bicubic": (2.0, _bicubic), "lanczos": (3.0, _lanczos)}


def _filter(name: str):
    if name not in FILTERS:
        raise ValueError(f"unknown resampling filter {name!r} (known: {', '.join(FILTERS)})")
    return FILTERS[name]


def _check_size(what: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{what} must be an integer >= 1, not {value!r}")


def coefficients(in_size: int, out_size: int, filter_name: str) -> list[tuple[int, list[float]]]:
    """Per output index (first source index, the float64 weights of the source indexes from it on):
    Pillow's precompute_coeffs over the whole axis (box 0 .. in_size), operation for operation."""
    _check_size("in_size", in_size)
    _check_size("out_size", out_size)
    support, kernel = _filter(filter_name)
    scale = in_size / out_size  # correctly rounded, as C's (double) in / out
    filterscale = max(scale, 1.0)
    support = support * filterscale
    inv_filterscale = 1.0 / filterscale
    out = []
    for xx in range(out_size):
        center = (xx + 0.5) * scale
        first = max(int(center - support + 0.5), 0)  # int(): C's truncation toward zero
        end = min(int(center + support + 0.5), in_size)
        weights = [kernel((x + first - center + 0.5) * inv_filterscale) for x in range(end - first)]
        total = 0.0
        for w in weights:
            total += w
        if total != 0.0:
            weights = [w / total for w in weights]
        out.append((first, weights))
    return out


def fixed_point(weight: float) -> int:
    """A weight as Pillow's 8-bit path holds it: times 2^22, rounded half away from zero."""
    scaled = weight * (1 << PRECISION_BITS)
    return int(-0.5 + scaled) if weight < 0 else int(0.5 + scaled)


def pass_plan(in_size: int, out_size: int, filter_name: str) -> tuple[int, bytes]:
    """(stride, the kernel's plan as i32 bytes): per output index its first source index, its tap
    count and its fixed-point taps, each row zero-padded to `stride` words."""
    table = coefficients(in_size, out_size, filter_name)
    stride = 2 + max(len(weights) for _, weights in table)
    words = array("i")
    for first, weights in table:
        taps = [fixed_point(w) for w in weights]
        words.extend([first, len(taps), *taps, *([0] * (stride - 2 - len(taps)))])
    return stride, words.tobytes()


def passes(in_w: int, in_h: int, out_w: int, out_h: int) -> list[str]:
    """The passes Pillow runs, in its order: "horizontal" and/or "vertical" (none: a copy)."""
    horizontal, vertical = out_w != in_w, out_h != in_h
    # ImagingResampleInner: the vertical pass first when the height shrinks by more than twice
    # as many pixels as the width (it makes Pillow's horizontal pass cheaper; it changes the bits).
    vertical_first = in_h - out_h > 0 and in_h - out_h > (in_w - out_w) * 2
    order = ["vertical", "horizontal"] if vertical_first else ["horizontal", "vertical"]
    return [name for name in order if {"horizontal": horizontal, "vertical": vertical}[name]]


async def resize(device, kernels, src, in_w: int, in_h: int, out_w: int, out_h: int, filter_name: str):
    """A new buffer of out_h rows of out_w RGBA8 pixels (u32, R in the low byte): the picture in `src`
    (in_h rows of in_w) resized as Pillow's Image.resize((out_w, out_h), filter) with no box and
    no reducing_gap. `kernels` is the engine's KernelCache for `device`. The work is submitted,
    not awaited; the caller owns the returned buffer. Alpha is resampled as the colours are (Pillow's
    4-band arithmetic: as its RGBa mode, so opaque stays 255; Pillow's resize of an "RGBA" image
    premultiplies around this, an "RGB" image's is what the processors use)."""
    for what, value in (("in_w", in_w), ("in_h", in_h), ("out_w", out_w), ("out_h", out_h)):
        _check_size(what, value)
    _filter(filter_name)
    limit = device.caps.limits.max_workgroups_per_dim
    if -(-out_w // TILE) > limit or -(-out_h // TILE) > limit:
        raise ValueError(f"{out_w} x {out_h}: more than {limit * TILE} pixels along an axis")
    out_bytes = out_w * out_h * 4
    steps = passes(in_w, in_h, out_w, out_h)
    if not steps:  # Pillow copies the image
        out = device.create_buffer(out_bytes, label="image_resample.out")
        device.submit([Copy(src, 0, out, 0, out_bytes)])
        return out
    commands, temporaries = [], []
    w, h, current = in_w, in_h, src
    for index, step in enumerate(steps):
        vertical = step == "vertical"
        kernel = kernels.get("image_resample", VERTICAL=vertical)
        next_w, next_h = (w, out_h) if vertical else (out_w, h)
        stride, plan = pass_plan(h if vertical else w, next_h if vertical else next_w, filter_name)
        params = kernel.pack_params({"src_w": w, "out_w": next_w, "out_h": next_h, "plan_stride": stride})
        uniform = device.create_buffer(len(params), "uniform", label="image_resample.params")
        plan_buffer = device.create_buffer(len(plan), label="image_resample.plan")
        last = index == len(steps) - 1
        nbytes = next_w * next_h * 4
        dst = device.create_buffer(nbytes, label="image_resample.out" if last else "image_resample.between")
        device.write_buffer(uniform, 0, params)
        device.write_buffer(plan_buffer, 0, plan)
        temporaries += [uniform, plan_buffer] + ([] if last else [dst])
        resources = [(uniform, 0, len(params)), (current, 0, w * h * 4), (plan_buffer, 0, len(plan)), (dst, 0, nbytes)]
        group = device.create_bind_group(kernel.handle, resources)
        commands.append(Dispatch(kernel.handle, group, (-(-next_w // TILE), -(-next_h // TILE), 1)))
        w, h, current = next_w, next_h, dst
    await device.prepare()  # the browser compiles kernels asynchronously
    device.submit(commands)
    for buffer in temporaries:  # WebGPU frees them once the submitted work is done with them
        device.destroy_buffer(buffer)
    return current
