import numpy as np
import pytest
from gpu_harness import as_f32, quantized_rows, run_kernel

from py_engine.runtime.linear_plan import q8_row_bytes


def rmsnorm_ref(x, w, eps, offset=0.0):
    return x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps) * (w + offset)


def rmsnorm_params(dim, eps, offset=0.0, last_row_only=False, add_residual=False):
    return {
        "dim": dim,
        "eps": eps,
        "w_offset": offset,
        "last_row_only": int(last_row_only),
        "add_residual": int(add_residual),
        "pad0": 0,
        "pad1": 0,
        "pad2": 0,
    }


@pytest.mark.parametrize("subgroups", [True, False], ids=["subgroups", "workgroup-memory"])
@pytest.mark.parametrize("rows,dim", [(1, 64), (5, 576), (3, 1000), (2, 4096)])
def test_rmsnorm(rows, dim, subgroups):
    rng = np.random.default_rng(rows * dim)
    x = rng.standard_normal((rows, dim), dtype=np.float32) * 3
    w = rng.standard_normal(dim, dtype=np.float32)
    out = run_kernel(
        "rmsnorm",
        {"x": x, "w": w, "residual": 16, "y": x.nbytes},
        rmsnorm_params(dim, 1e-5),
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
        {"x": x, "w": w, "residual": 16, "y": 96 * 4},
        rmsnorm_params(96, 1e-6, offset=1.0, last_row_only=True),
        step=(7, 0, 7),
    )
    np.testing.assert_allclose(as_f32(out["y"], (96,)), rmsnorm_ref(x[-1], w, 1e-6, 1.0), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("subgroups", [True, False], ids=["subgroups", "workgroup-memory"])
@pytest.mark.parametrize("dim", [96, 4096])
def test_last_rows_quantized_for_the_head(dim, subgroups):
    """Q8_OUTPUT (the LM head's input): y as before, and yq the bits quantize_rows SPREAD makes of
    y, which the head's GEMVs read (Q8_INPUT) instead of quantizing y in every workgroup."""
    rng = np.random.default_rng(dim)
    rows, scored = 6, 2
    x = rng.standard_normal((rows, dim), dtype=np.float32) * 3
    x[-1, :32] *= 1e3  # one 32 with a large scale
    w = rng.standard_normal(dim, dtype=np.float32)
    run = lambda defines, buffers: run_kernel(  # noqa: E731
        "rmsnorm",
        {"x": x, "w": w, "residual": 16, "y": scored * dim * 4, **buffers},
        rmsnorm_params(dim, 1e-6, offset=1.0, last_row_only=True),
        grid=(scored + 1, 1, 1),  # one more workgroup than scored rows: it returns at once
        step=(rows, 0, rows, scored),
        defines=defines,
        subgroups=subgroups,
    )
    out = run({"Q8_OUTPUT": True}, {"yq": scored * q8_row_bytes(dim)})
    y = as_f32(out["y"], (scored, dim))
    assert np.array_equal(y, as_f32(run({}, {})["y"], (scored, dim))), "Q8_OUTPUT changed y"
    np.testing.assert_allclose(y, rmsnorm_ref(x[-scored:], w, 1e-6, 1.0), rtol=1e-5, atol=1e-5)
    want = quantized_rows(np.ascontiguousarray(y), None, 0.0, 2, spread=True)
    assert np.array_equal(np.frombuffer(out["yq"], np.uint32), want), "yq differs from quantize_rows'"


@pytest.mark.parametrize("dim", [640, 1000])
def test_post_norm_adds_the_residual(dim):
    """Gemma 2/3's post-norms: residual + norm(sublayer output), both vector and tail loops."""
    rng = np.random.default_rng(dim)
    rows = 3
    x = rng.standard_normal((rows, dim), dtype=np.float32)
    w = rng.standard_normal(dim, dtype=np.float32) * 0.1
    residual = rng.standard_normal((rows, dim), dtype=np.float32) * 5
    out = run_kernel(
        "rmsnorm",
        {"x": x, "w": w, "residual": residual, "y": x.nbytes},
        rmsnorm_params(dim, 1e-6, offset=1.0, add_residual=True),
        grid=(rows, 1, 1),
        step=(rows, 0, rows),
    )
    ref = residual + rmsnorm_ref(x, w, 1e-6, 1.0)
    np.testing.assert_allclose(as_f32(out["y"], (rows, dim)), ref, rtol=1e-5, atol=1e-5)


def test_softcap_caps_the_scored_rows_only():
    rng = np.random.default_rng(3)
    vocab, cap = 700, 30.0
    logits = (rng.standard_normal((3, vocab)) * 40).astype(np.float32)
    logits[0, :3] = [1e30, -1e30, 0.0]  # tanh's argument is clamped, never NaN
    out = run_kernel(
        "softcap",
        {"y": logits},
        {"count": vocab, "cap": cap, "pad0": 0, "pad1": 0},
        grid=(3, 8, 1),
        step=(5, 0, 5, 2),  # two scored rows: the third stays as it was
    )
    y = as_f32(out["y"], (3, vocab))
    ref = np.tanh(logits[:2].astype(np.float64) / cap) * cap
    np.testing.assert_allclose(y[:2], ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(y[2], logits[2])
