import numpy as np
import pytest
from gpu_harness import as_f32, run_kernel


def rmsnorm_ref(x, w, eps, offset=0.0):
    return x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps) * (w + offset)


@pytest.mark.parametrize("subgroups", [True, False], ids=["subgroups", "workgroup-memory"])
@pytest.mark.parametrize("rows,dim", [(1, 64), (5, 576), (3, 1000), (2, 4096)])
def test_rmsnorm(rows, dim, subgroups):
    rng = np.random.default_rng(rows * dim)
    x = rng.standard_normal((rows, dim), dtype=np.float32) * 3
    w = rng.standard_normal(dim, dtype=np.float32)
    out = run_kernel(
        "rmsnorm",
        {"x": x, "w": w, "y": x.nbytes},
        {"dim": dim, "eps": 1e-5, "w_offset": 0.0, "last_row_only": 0},
        grid=(rows, 1, 1),
        step=(rows, 0, rows),
        subgroups=subgroups,
    )
    np.testing.assert_allclose(as_f32(out["y"], (rows, dim)), rmsnorm_ref(x, w, 1e-5), rtol=1e-5, atol=1e-5)


def test_rmsnorm_last_row_with_offset():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 96), dtype=np.float32)
    w = rng.standard_normal(96, dtype=np.float32)
    out = run_kernel(
        "rmsnorm",
        {"x": x, "w": w, "y": 96 * 4},
        {"dim": 96, "eps": 1e-6, "w_offset": 1.0, "last_row_only": 1},
        step=(7, 0, 7),
    )
    np.testing.assert_allclose(as_f32(out["y"], (96,)), rmsnorm_ref(x[-1], w, 1e-6, 1.0), rtol=1e-5, atol=1e-5)
