"""Which linear-layer kernel to run, how to specialise it and how large a grid to dispatch.

Pure Python (it runs in Pyodide too). The kernels are `shaders/gemv.wgsl` (few rows: memory-bound,
each weight load shared by up to GEMV_ROWS rows) and `shaders/matmul.wgsl` (many rows: TILE x TILE
output tiles through shared memory). Both take one bind group; see their header comments.
"""
from __future__ import annotations

# Mirrors of the kernels' constants (shaders/gemv.wgsl, shaders/matmul.wgsl).
GEMV_FEATURES_PER_GROUP = 8
GEMV_ROWS = 8
MATMUL_TILE = 64

# A GEMV pass costs about one read of the weights; the matmul costs a full 64-row tile of
# arithmetic however few rows it has. Measured on an H200 (Vulkan), K x N from 896 x 4864 to
# 4096 x 14336: at 16 rows (two passes) the GEMV takes 0.55-0.75x the matmul's time, and
# they break even near 24 rows.
GEMV_MAX_ROWS = 2 * GEMV_ROWS

WEIGHT_DTYPES = ("f32", "f16")


def choose_linear(rows: int) -> str:
    """The kernel for a linear layer over `rows` activation rows: "gemv" or "matmul"."""
    return "gemv" if rows <= GEMV_MAX_ROWS else "matmul"


def weight_defines(K: int, weight_format: str) -> dict:
    """Defines for every kernel that reads a weight matrix (gemv, matmul, embedding)."""
    return linear_defines(K, weight_format)


def linear_defines(K: int, weight_dtype: str) -> dict:
    """Defines for KernelCache.get("gemv" | "matmul", **defines).

    Rows of K % 4 == 0 are read as vec4 blocks (coalesced 16-byte loads); any other K
    falls back to one element per block.
    """
    if weight_dtype not in WEIGHT_DTYPES:
        raise ValueError(f"linear weights must be one of {WEIGHT_DTYPES}, not {weight_dtype!r}")
    vec4 = K % 4 == 0
    return {
        "W": weight_dtype,
        "VEC4": vec4,
        "WBlock": "vec4<W>" if vec4 else "W",
        "XBlock": "vec4<f32>" if vec4 else "f32",
    }


def linear_grid(kernel: str, rows: int, N: int, max_per_dim: int = 65535) -> tuple[int, int, int]:
    """Workgroups to dispatch. The kernels number workgroups x-fastest, so a count above
    `max_per_dim` is folded into y; the few surplus workgroups of the last line exit at once."""
    if kernel == "gemv":
        count = -(-N // GEMV_FEATURES_PER_GROUP)
    elif kernel == "matmul":
        count = -(-rows // MATMUL_TILE) * -(-N // MATMUL_TILE)
    else:
        raise ValueError(f"unknown linear kernel {kernel!r}")
    lines = -(-count // max_per_dim)
    if lines > max_per_dim:
        raise ValueError(f"{kernel}: {count} workgroups exceed a {max_per_dim} x {max_per_dim} grid")
    return (-(-count // lines), lines, 1)
