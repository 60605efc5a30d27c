"""Embedding gather, dtype conversion and SiLU·mul against numpy."""

import numpy as np
import pytest
from gpu_harness import as_f32, device, run_kernel


def has_f16():
    return device(True)[0].caps.shader_f16


def grid_1d(n, per=256):
    wg = -(-n // per)
    return (min(wg, 65535), -(-wg // 65535), 1)


@pytest.mark.parametrize("src,out", [("f16", "f32"), ("bf16", "f32"), ("bf16", "f16"), ("f32", "f16"), ("f16", "f16")])
def test_convert(src, out):
    if out == "f16" and not has_f16():
        pytest.skip("no shader-f16")
    rng = np.random.default_rng(2)
    values = (rng.standard_normal(1001) * 10).astype(np.float32)
    if src == "bf16":
        raw = (values.view(np.uint32) >> 16).astype(np.uint16)
        expect = (raw.astype(np.uint32) << 16).view(np.float32)
    elif src == "f16":
        raw = values.astype(np.float16)
        expect = raw.astype(np.float32)
    else:
        raw = values
        expect = values
    kind = {"f16": 0, "bf16": 1, "f32": 2}[src]
    grid = grid_1d(values.size)
    res = run_kernel(
        "convert",
        {"src": raw, "dst": values.size * (2 if out == "f16" else 4)},
        {"count": values.size, "src_kind": kind, "grid_x": grid[0], "dst_offset": 0},
        grid=grid,
        defines={"OUT": out},
    )
    got = np.frombuffer(res["dst"], np.float16 if out == "f16" else np.float32, count=values.size)
    want = expect.astype(np.float16) if out == "f16" else expect
    np.testing.assert_array_equal(got, want)


def test_silu_mul():
    rng = np.random.default_rng(3)
    rows, inter = 5, 176
    gate_up = (rng.standard_normal((rows, 2 * inter)) * 4).astype(np.float32)
    res = run_kernel(
        "gated_mul",
        {"gate_up": gate_up, "y": rows * inter * 4},
        {"inter": inter, "pad0": 0, "pad1": 0, "pad2": 0},
        grid=(1, rows, 1),
        step=(rows, 0, rows),
        defines={"GELU": False},
    )
    g, u = gate_up[:, :inter].astype(np.float64), gate_up[:, inter:]
    np.testing.assert_allclose(as_f32(res["y"], (rows, inter)), g / (1 + np.exp(-g)) * u, rtol=1e-5, atol=1e-6)
