"""NanoCodec's own kernels against numpy (float64): fsq_dequant.wgsl, half_snake.wgsl (large
arguments included: its sin is range-reduced first), conv_transpose1d.wgsl (grouped, causal trim)."""

import numpy as np
from gpu_harness import as_f32, run_kernel

RNG = np.random.default_rng(32)


def test_fsq_dequant_is_nemos_decode():
    levels, groups, frames = [9, 8, 8, 7], 4, 5
    codes = RNG.integers(0, np.prod(levels), (frames, groups)).astype(np.uint32)
    out = run_kernel(
        "fsq_dequant",
        {"codes": codes, "y": frames * groups * 4 * 4},
        {"groups": groups, "dims": 4} | {f"level{i}": n for i, n in enumerate(levels)} | {"pad0": 0, "pad1": 0},
        grid=(1, 1, 1),
        step=(frames, 0, frames),
    )
    base = np.cumprod([1, *levels[:-1]])
    half = np.array(levels) // 2
    want = ((codes[..., None] // base) % levels - half) / half  # [frames, groups, dims]
    assert np.array_equal(as_f32(out["y"], (frames, groups * 4)), want.reshape(frames, -1).astype(np.float32))


def test_half_snake_mean_of_three_and_large_arguments():
    length, channels = 6, 7  # odd: 3 snake channels, 4 leaky ReLU
    xs = [RNG.normal(0, 30, (length, channels)).astype(np.float32) for _ in range(3)]  # |alpha x| up to ~200
    alpha = RNG.uniform(0.3, 2.0, channels // 2).astype(np.float32)
    out = run_kernel(
        "half_snake",
        {"x": xs[0], "x2": xs[1], "x3": xs[2], "alpha": alpha, "y": length * channels * 4},
        {"channels": channels, "snake_channels": channels // 2, "per_row": 3, "pad0": 0},
        step=(2, 0, 2),  # 2 frames of 3 samples
        defines={"MEAN3": True},
    )
    v = (xs[0].astype(np.float64) + xs[1] + xs[2]) / 3
    a = alpha.astype(np.float64)
    snake = v[:, :3] + np.sin(a * v[:, :3]) ** 2 / (a + 1e-9)
    relu = np.where(v[:, 3:] >= 0, v[:, 3:], 0.01 * v[:, 3:])
    got = as_f32(out["y"], (length, channels))
    assert np.abs(got - np.concatenate([snake, relu], axis=1)).max() < 1e-4


def test_conv_transpose1d_grouped_causal():
    frames, per_in, stride, cin, cout, kernel = 3, 2, 3, 6, 3, 7  # kernel not 2 stride: three taps for some t
    x = RNG.normal(size=(frames * per_in, cin)).astype(np.float32)
    w = RNG.normal(size=(cin, 1, kernel)).astype(np.float32)
    bias = RNG.normal(size=cout).astype(np.float32)
    length = frames * per_in * stride
    out = run_kernel(
        "conv_transpose1d",
        {"x": x, "w": w, "bias": bias, "y": length * cout * 4},
        {"in_channels": cin, "out_channels": cout, "groups": cout, "kernel": kernel}
        | {"stride": stride, "per_row": per_in * stride, "has_bias": 1, "pad0": 0},
        grid=(1, 1, 1),
        step=(frames, 0, frames),
    )
    full = np.zeros(((len(x) - 1) * stride + kernel, cout))  # PyTorch's ConvTranspose1d, then the right trimmed
    for i in range(len(x)):
        for c in range(cin):
            full[i * stride : i * stride + kernel, c // 2] += x[i, c] * w[c, 0].astype(np.float64)
    want = full[:length] + bias
    assert np.abs(as_f32(out["y"], (length, cout)) - want).max() < 1e-5
