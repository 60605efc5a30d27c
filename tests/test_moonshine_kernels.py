"""Moonshine's kernels against numpy: GroupNorm over time-major rows (shaders/group_norm.wgsl) and
rope_rows.wgsl's partial, interleaved rotary (its split-half whole-head form too, as the other
encoders use it)."""

import numpy as np
import pytest
from gpu_harness import as_f32, run_kernel


def group_norm_reference(x: np.ndarray, groups: int, w, b, eps: float) -> np.ndarray:
    """torch's GroupNorm of x.T ([channels, frames]), returned time-major."""
    rows, channels = x.shape
    grouped = x.astype(np.float64).reshape(rows, groups, channels // groups)
    mean = grouped.mean(axis=(0, 2), keepdims=True)
    var = ((grouped - mean) ** 2).mean(axis=(0, 2), keepdims=True)
    return ((grouped - mean) / np.sqrt(var + eps)).reshape(rows, channels) * w + b


@pytest.mark.parametrize(
    "rows,channels,groups,most", [(249, 36, 1, 0), (7, 48, 4, 0), (300, 20, 20, 0), (40, 36, 1, 64)]
)
def test_group_norm(rows, channels, groups, most):
    """most: a graph's Params rows, the forward's own rows from the lengths input (0: static rows)."""
    rng = np.random.default_rng(rows)
    x = np.tanh(rng.standard_normal((rows, channels)) * 2 + 0.5).astype(np.float32)  # Moonshine's: tanh(conv1)
    w = (1 + 0.1 * rng.standard_normal(channels)).astype(np.float32)
    b = (0.2 * rng.standard_normal(channels)).astype(np.float32)
    lengths = np.array([7, rows], np.uint32)
    params = {"rows": most or rows, "channels": channels, "groups": groups, "eps": 1e-5}
    params |= {"length_at": 1 if most else 0xFFFFFFFF, "pad0": 0, "pad1": 0, "pad2": 0}
    padded = np.concatenate([x, np.full((most - rows if most else 0, channels), 9, np.float32)])  # never read
    bound = {"lengths": lengths, "x": padded}
    stats = run_kernel("group_norm", bound | {"stats": groups * 8}, params, (groups, 1, 1), defines={"STATS": True})
    out = run_kernel(
        "group_norm",
        bound | {"stats": np.frombuffer(stats["stats"], np.float32), "w": w, "b": b, "y": padded.nbytes},
        params,
        (-(-channels // 256), most or rows, 1),
        defines={"STATS": False},
    )
    got = as_f32(out["y"], (rows, channels))
    np.testing.assert_allclose(got, group_norm_reference(x, groups, w, b, 1e-5), rtol=1e-5, atol=2e-6)


def rope_reference(qkv, cos, sin, heads, kv_heads, hd, rotary_dim, interleaved):
    """Each q and k head's first rotary_dim dims turned: adjacent pairs (2i, 2i + 1) or split-half
    (i, i + rotary_dim / 2) by angle i (transformers' Moonshine and Llama rotate_half)."""
    out = qkv.astype(np.float64).copy()
    half = rotary_dim // 2
    a = np.arange(half) * 2 if interleaved else np.arange(half)
    b = a + 1 if interleaved else a + half
    for h in range(heads + kv_heads):
        at = h * hd
        x, y = out[:, at + a].copy(), out[:, at + b].copy()
        out[:, at + a] = x * cos - y * sin
        out[:, at + b] = y * cos + x * sin
    return out


@pytest.mark.parametrize("interleaved,rotary_dim", [(True, 10), (False, 12), (False, 8)])
def test_rope_rows(interleaved, rotary_dim):
    rows, heads, kv_heads, hd = 5, 3, 3, 12
    stride = (heads + 2 * kv_heads) * hd
    rng = np.random.default_rng(rotary_dim)
    qkv = rng.standard_normal((rows, stride)).astype(np.float32)
    angles = np.arange(rows)[:, None] * (10000.0 ** (-np.arange(0, rotary_dim, 2) / rotary_dim))[None]
    cos_sin = np.stack([np.cos(angles), np.sin(angles)], -1).astype(np.float32)
    out = run_kernel(
        "rope_rows",
        {"cos_sin": cos_sin, "qkv": qkv, "q_norm": np.zeros(4, np.float32), "k_norm": np.zeros(4, np.float32)},
        {"n_heads": heads, "head_dim": hd, "stride": stride, "k_offset": heads * hd, "n_kv_heads": kv_heads}
        | {"eps": 1e-6, "norm_offset": 0.0, "rotary_dim": rotary_dim},
        (heads + kv_heads, rows, 1),
        (rows, 0, rows),
        {"QK_NORM": False, "INTERLEAVED": interleaved},
    )
    want = rope_reference(qkv, cos_sin[..., 0], cos_sin[..., 1], heads, kv_heads, hd, rotary_dim, interleaved)
    got = as_f32(out["qkv"], (rows, stride))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[:, (heads + kv_heads) * hd :], qkv[:, (heads + kv_heads) * hd :])  # v


def test_layernorm_without_bias():
    """layernorm.wgsl NO_BIAS (Moonshine's LayerNorms): b is bound but never read."""
    rows, dim = 4, 36
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((rows, dim)) * 3 + 2).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(dim)).astype(np.float32)
    unused = np.full(4, np.nan, np.float32)
    res = run_kernel(
        "layernorm",
        {"x": x, "residual": unused, "shift": unused, "w": w, "b": unused, "y": x.nbytes},
        {"dim": dim, "eps": 1e-5, "add_residual": 0, "add_shift": 0},
        grid=(rows, 1, 1),
        step=(rows, 0, rows),
        defines={"NO_BIAS": True},
    )
    v = x.astype(np.float64)
    want = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(as_f32(res["y"], (rows, dim)), want, rtol=1e-5, atol=2e-6)
