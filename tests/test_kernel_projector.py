"""Gemma 3's multi-modal projector kernels against numpy: avg_pool.wgsl (AvgPool2d over a patch grid) and
matmul_kn.wgsl (x times a weight stored [K, N], in f32 and bf16, N a multiple of 4 and not)."""

import numpy as np
import pytest
from gpu_harness import as_f32, run_kernel

from py_engine.runtime.linear_plan import weight_defines


@pytest.mark.parametrize("side,kernel,dim", [(6, 2, 32), (6, 3, 300), (8, 4, 5)])
def test_avg_pool(side, kernel, dim):
    rng = np.random.default_rng(side * kernel)
    x = rng.standard_normal((side * side, dim)).astype(np.float32)
    per_side = side // kernel
    tokens = per_side * per_side
    res = run_kernel(
        "avg_pool",
        {"x": x, "y": tokens * dim * 4},
        {"dim": dim, "side": side, "kernel": kernel, "tokens": tokens},
        grid=(-(-dim // 256), tokens, 1),
    )
    grid = x.reshape(per_side, kernel, per_side, kernel, dim).astype(np.float64)
    want = grid.mean(axis=(1, 3)).reshape(tokens, dim)
    np.testing.assert_allclose(as_f32(res["y"], (tokens, dim)), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "fmt,rows,k,n", [("f32", 9, 32, 64), ("f32", 6, 20, 259), ("bf16", 5, 48, 100), ("bf16", 3, 16, 7)]
)
def test_matmul_kn(fmt, rows, k, n):
    rng = np.random.default_rng(rows * n)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    stored = w
    if fmt == "bf16":
        stored = (w.view(np.uint32) >> 16).astype(np.uint16)
        w = (stored.astype(np.uint32) << 16).view(np.float32)
    res = run_kernel(
        "matmul_kn",
        {"x": x, "w": stored, "y": rows * n * 4},
        {"k": k, "n": n, "rows": rows, "pad0": 0},
        grid=(-(-n // 256), -(-rows // 4), 1),
        defines=weight_defines(n, fmt),
    )
    want = x.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(as_f32(res["y"], (rows, n)), want, rtol=1e-5, atol=1e-5)
