import gpu_harness
import numpy as np
import pytest
from gpu_harness import as_f32, run_kernel

from py_engine.runtime.kernels import SHADER_DIR, parse_bindings, parse_params, preprocess
from py_engine.runtime.linear_plan import (
    MATMUL_TILE,
    choose_linear,
    gemv_features,
    linear_defines,
    linear_grid,
    linear_params,
)

DUMMY = 16  # bytes of the placeholder bound for an unused bias / residual


def run_linear(
    kernel,
    x,
    w,
    bias=None,
    residual=None,
    N=None,
    out_stride=None,
    out_offset=0,
    rows_from_step=False,
    max_per_dim=65535,
):
    """y as the kernel leaves it: [rows, out_stride], zero outside the layer's N columns."""
    rows, K = x.shape
    N = w.shape[0] if N is None else N
    out_stride = N if out_stride is None else out_stride
    weight_dtype = "f16" if w.dtype == np.float16 else "f32"
    params = linear_params(
        K,
        N,
        out_stride=out_stride,
        out_offset=out_offset,
        rows=0 if rows_from_step else rows,
        bias=bias is not None,
        residual=residual is not None,
    )
    buffers = {
        "x": x,
        "w": w,
        "bias": DUMMY if bias is None else bias,
        "residual": DUMMY if residual is None else residual,
        "norm": DUMMY,
        "y": rows * out_stride * 4,
    }
    defines = linear_defines(K, N, weight_dtype)
    out = run_kernel(
        kernel,
        buffers,
        params,
        grid=linear_grid(kernel, rows, N, max_per_dim, gemv_per_group=gemv_features(defines)),
        step=(rows, 0, rows),
        defines=defines,
        f16=weight_dtype == "f16",
    )
    return as_f32(out["y"], (rows, out_stride))


def linear_ref(x, w, bias, residual, out_stride, out_offset):
    """float64 reference in a zero [rows, out_stride]: the kernel writes only its N columns."""
    rows, N = x.shape[0], w.shape[0]
    cols = slice(out_offset, out_offset + N)
    y = np.zeros((rows, out_stride))
    y[:, cols] = x.astype(np.float64) @ w.astype(np.float64).T
    if bias is not None:
        y[:, cols] += bias
    if residual is not None:
        y[:, cols] += residual[:, cols]
    return y


def check(kernel, weight_dtype, rows, K, N, with_bias, with_residual, out_offset=0, **run_args):
    if weight_dtype == "f16" and not gpu_harness.device(True)[0].caps.shader_f16:
        pytest.skip("device lacks shader-f16")
    rng = np.random.default_rng(rows * 7919 + K * 31 + N)
    out_stride = N + out_offset + (3 if out_offset else 0)
    x = rng.standard_normal((rows, K), dtype=np.float32)
    w = rng.standard_normal((N, K), dtype=np.float32).astype(np.float16 if weight_dtype == "f16" else np.float32)
    bias = rng.standard_normal(N, dtype=np.float32) if with_bias else None
    residual = rng.standard_normal((rows, out_stride), dtype=np.float32) if with_residual else None
    got = run_linear(kernel, x, w, bias, residual, out_stride=out_stride, out_offset=out_offset, **run_args)
    ref = linear_ref(x, w, bias, residual, out_stride, out_offset)  # f16 weights: their rounded values
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert err < 1e-5, f"{kernel} {weight_dtype} rows={rows} K={K} N={N}: relative error {err:.2e}"


# (rows, K, N, bias, residual, out_offset): K = 70 takes the scalar path, the others the vec4 one;
# K = 320 gives the one-row GEMV loop both its unrolled pair and its odd last block.
CASES = [
    (1, 320, 1, False, False, 0),
    (1, 70, 37, True, False, 0),
    (3, 128, 176, False, True, 0),
    (5, 70, 1000, True, True, 5),
    (17, 96, 37, True, False, 0),
    (64, 70, 176, False, True, 8),
    (130, 64, 1000, True, True, 0),
    (130, 70, 37, False, False, 3),
]


@pytest.mark.parametrize("weight_dtype", ["f32", "f16"])
@pytest.mark.parametrize("kernel", ["gemv", "matmul"])
@pytest.mark.parametrize("rows,K,N,with_bias,with_residual,out_offset", CASES)
def test_linear(kernel, weight_dtype, rows, K, N, with_bias, with_residual, out_offset):
    check(kernel, weight_dtype, rows, K, N, with_bias, with_residual, out_offset)


@pytest.mark.parametrize("kernel", ["gemv", "matmul"])
def test_rows_from_step(kernel):
    check(kernel, "f32", 9, 32, 100, True, False, rows_from_step=True)


@pytest.mark.parametrize("kernel,rows", [("gemv", 3), ("matmul", 130)])
@pytest.mark.parametrize("max_per_dim", [65535, 1000])
def test_vocabulary_sized_n(kernel, rows, max_per_dim):
    """N = 70000 (over 65535 features); a small max_per_dim forces the 2-D grid."""
    check(kernel, "f16", rows, 16, 70000, False, False, max_per_dim=max_per_dim)


@pytest.mark.parametrize("q8_input", [False, True])
def test_kernels_share_one_interface(q8_input):
    """One bind group serves a linear op's kernels (the GEMV on quantized x too: its bindings keep
    their names and kinds, Op.gemv_bind gives them other tensors); a GEMV that quantizes its
    outputs (Q8_OUTPUT, a group of its own) binds the same and one more after them."""
    flags = {"Q8_INPUT": q8_input, "Q8_ACT": q8_input, "Q8_OUTPUT": False, "Q8_OUT_NORM": False}
    flags |= {"SUBGROUPS": False, "VEC4": True}
    sources = [
        preprocess((SHADER_DIR / f"{name}.wgsl").read_text(), flags) for name in ("gemv", "matmul", "matmul_int8")
    ]
    for other in sources[1:]:
        assert parse_bindings(sources[0]) == parse_bindings(other)
        assert parse_params(sources[0]) == parse_params(other)
    quantizing = parse_bindings(preprocess((SHADER_DIR / "gemv.wgsl").read_text(), {**flags, "Q8_OUTPUT": True}))
    assert quantizing[:-1] == parse_bindings(sources[0])
    assert (quantizing[-1].name, quantizing[-1].kind) == ("yq", "rw")


def test_choose_linear():
    assert choose_linear(1) == "gemv"
    assert choose_linear(16) == "gemv"
    assert choose_linear(17) == "matmul"
    assert choose_linear(512) == "matmul"


@pytest.mark.parametrize("kernel,rows,N", [("gemv", 1, 151936), ("matmul", 512, 151936), ("matmul", 130, 37)])
@pytest.mark.parametrize("max_per_dim", [65535, 1000, 7])
def test_linear_grid_covers_every_tile_within_limits(kernel, rows, N, max_per_dim):
    tiles = -(-N // 8) if kernel == "gemv" else -(-rows // MATMUL_TILE) * -(-N // MATMUL_TILE)
    if tiles > max_per_dim**2:
        with pytest.raises(ValueError):
            linear_grid(kernel, rows, N, max_per_dim, gemv_per_group=8)
        return
    gx, gy, gz = linear_grid(kernel, rows, N, max_per_dim, gemv_per_group=8)
    assert max(gx, gy) <= max_per_dim and gz == 1
    assert tiles <= gx * gy < tiles + gx  # every tile, and surplus only in the last line
