"""shaders/conv1d.wgsl against a numpy Conv1d: the shapes the speech models run (Whisper's
front-end, Moonshine's, NanoCodec's causal dilated convolutions), small."""

import numpy as np
import pytest
from gpu_harness import as_f32, run_kernel

from py_engine.models.audio_ops import ACTIVATIONS, CONV_TILE, NO_LENGTH, conv_out_len


def conv_ref(x, w, bias, stride, dilation, groups, pad):
    """PyTorch's Conv1d over time-major x [in_len, in_channels] (float64): [out_len, out_channels]."""
    out_c, cin_g, kernel = w.shape
    xp = np.concatenate([np.zeros((pad[0], x.shape[1])), x, np.zeros((pad[1], x.shape[1]))])
    out_len = conv_out_len(x.shape[0], kernel, stride, dilation, pad)
    taps = np.arange(kernel) * dilation
    y = np.zeros((out_len, out_c))
    cout_g = out_c // groups
    for g in range(groups):
        cols = xp[:, g * cin_g : (g + 1) * cin_g]
        windows = np.stack([cols[t * stride + taps] for t in range(out_len)])  # [out_len, kernel, cin_g]
        wg = w[g * cout_g : (g + 1) * cout_g]  # [cout_g, cin_g, kernel]
        y[:, g * cout_g : (g + 1) * cout_g] = np.einsum("tkc,ock->to", windows, wg)
    return y + (0 if bias is None else bias)


def gelu(v):
    from math import erf

    return 0.5 * v * (1 + np.vectorize(erf)(v / np.sqrt(2)))


ACTS = {
    None: lambda v: v,
    "gelu": gelu,
    "gelu_tanh": lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3))),
    "tanh": np.tanh,
}


def run_conv(x, w, bias=None, stride=1, dilation=1, groups=1, pad=(0, 0), activation=None, residual=None, lengths=None):
    in_len, in_c = x.shape
    out_c, _, kernel = w.shape
    out_len = conv_out_len(in_len, kernel, stride, dilation, pad)
    cout_g = out_c // groups
    res = run_kernel(
        "conv1d",
        {
            "x": x.astype(np.float32),
            "w": w.astype(np.float32),
            "bias": (bias if bias is not None else np.zeros(4)).astype(np.float32),
            "residual": (residual if residual is not None else np.zeros(4)).astype(np.float32),
            "lengths": np.array(lengths or [0, 0], np.uint32),
            "y": out_len * out_c * 4,
        },
        {
            "in_len": in_len,
            "out_len": out_len,
            "in_channels": in_c,
            "out_channels": out_c,
            "kernel": kernel,
            "stride": stride,
            "dilation": dilation,
            "groups": groups,
            "pad_left": pad[0],
            "has_bias": int(bias is not None),
            "has_residual": int(residual is not None),
            "length_at": 0 if lengths else NO_LENGTH,
            "x_stride": in_c,
            "x_offset": 0,
            "pad0": 0,
            "pad1": 0,
        },
        grid=(-(-out_c // CONV_TILE), -(-out_len // CONV_TILE), 1),
        defines={
            "ACTIVATION": ACTIVATIONS[activation],
            "DIRECT": groups > 1 and cout_g % CONV_TILE != 0,
            "GELU": True,
        },
    )
    return as_f32(res["y"], (out_len, out_c))


# (in_len, in_c, out_c, kernel, stride, dilation, groups, pad, bias, activation, residual)
SHAPES = {
    "whisper_conv1": (300, 80, 72, 3, 1, 1, 1, (1, 1), True, "gelu", False),
    "whisper_conv2": (300, 72, 72, 3, 2, 1, 1, (1, 1), True, "gelu", True),
    "moonshine_conv1": (2000, 1, 40, 127, 64, 1, 1, (0, 0), False, "tanh", False),
    "moonshine_conv2": (31, 40, 80, 7, 3, 1, 1, (0, 0), True, "gelu", False),
    "moonshine_conv3": (9, 80, 40, 3, 2, 1, 1, (0, 0), True, "gelu", False),
    "causal_dilated": (150, 48, 48, 7, 1, 3, 1, (18, 0), True, "gelu_tanh", True),
    "causal_depthwise": (150, 24, 24, 11, 1, 5, 24, (50, 0), True, None, False),
    "depthwise_multiplier": (70, 6, 18, 3, 2, 1, 6, (1, 2), False, "tanh", False),
    "groups_of_a_tile": (90, 20, 128, 3, 1, 1, 2, (2, 0), True, None, False),
}


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_conv1d_matches_numpy(shape):
    in_len, in_c, out_c, kernel, stride, dilation, groups, pad, has_bias, activation, has_residual = shape
    rng = np.random.default_rng(in_len + out_c)
    x = rng.standard_normal((in_len, in_c))
    w = rng.standard_normal((out_c, in_c // groups, kernel)) / np.sqrt(in_c // groups * kernel)
    bias = rng.standard_normal(out_c) if has_bias else None
    out_len = conv_out_len(in_len, kernel, stride, dilation, pad)
    residual = rng.standard_normal((out_len, out_c)) if has_residual else None
    got = run_conv(x, w, bias, stride, dilation, groups, pad, activation, residual)
    want = ACTS[activation](conv_ref(x, w, bias, stride, dilation, groups, pad)) + (0 if residual is None else residual)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_lengths_from_the_input():
    """A forward of fewer frames than the op's most (lengths[0], lengths[1]): the frames past its
    input are padding, and no output past its out_len is written."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((200, 16))
    w = rng.standard_normal((24, 16, 5)) / 9
    short = 130
    got = run_conv(x, w, stride=2, pad=(2, 2), lengths=[short, conv_out_len(short, 5, 2, 1, (2, 2))])
    want = conv_ref(x[:short], w, None, 2, 1, 1, (2, 2))
    np.testing.assert_allclose(got[: len(want)], want, rtol=2e-5, atol=2e-5)
    assert not got[len(want) :].any()
