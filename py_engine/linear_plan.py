"""Which linear-layer kernel to run, how to specialise it and how large a grid to dispatch.

Pure Python (it runs in Pyodide too). The kernels are `shaders/gemv.wgsl` (few rows: memory-bound,
each weight load shared by up to GEMV_ROWS rows) and `shaders/matmul.wgsl` (many rows: TILE x TILE
output tiles through shared memory). Both take one bind group; see their header comments.
"""
from __future__ import annotations

from . import quant

# Mirrors of the kernels' constants (shaders/gemv.wgsl, shaders/matmul.wgsl).
GEMV_FEATURES_PER_GROUP = 8
GEMV_ROWS = 8
MATMUL_TILE = 64

# A GEMV pass costs about one read of the weights; the matmul costs a full 64-row tile of
# arithmetic however few rows it has. Measured on an H200 (Vulkan), K x N from 896 x 4864 to
# 4096 x 14336: at 16 rows (two passes) the GEMV takes 0.55-0.75x the matmul's time, and
# they break even near 24 rows.
GEMV_MAX_ROWS = 2 * GEMV_ROWS


def choose_linear(rows: int) -> str:
    """The kernel for a linear layer over `rows` activation rows: "gemv" or "matmul"."""
    return "gemv" if rows <= GEMV_MAX_ROWS else "matmul"


def weight_defines(K: int, weight_format: str, mlx_group: int = 64) -> dict:
    """Defines for every kernel that reads a weight matrix (KernelCache.get("gemv" | "matmul" |
    "embedding", **defines)); formats as in quant.py.

    WEIGHTS picks the dequantizing snippet (shaders/weights/<format>.wgsl). A block of a row is 4
    consecutive k when VEC4 (coalesced 16-byte loads of f32 rows), else one k: only float formats
    take one-k blocks, for K % 4 != 0. W is the element type of the native float formats; the
    others are read as u32 words (bf16 / f16_packed: a vec4 block's 4 halves as one vec2<u32>).
    """
    fmt = quant.weight_format(weight_format)
    fmt.check_k(K, mlx_group)
    vec4 = K % 4 == 0
    defines = {"WEIGHTS": weight_format, "VEC4": vec4, "XBlock": "vec4<f32>" if vec4 else "f32"}
    if weight_format in ("f32", "f16"):
        defines.update(W=weight_format, WBlock="vec4<W>" if vec4 else "W")
    elif fmt.is_float:
        defines["WBlock"] = "vec2<u32>" if vec4 else "u32"
    else:
        defines["WBlock"] = "u32"
    if fmt.is_mlx:
        defines["MLX_GROUP"] = mlx_group
    return defines


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


def embedding_grid(dim: int, rows: int) -> tuple[int, int, int]:
    """Workgroups for shaders/embedding.wgsl: 256 threads per group, one column each, one grid
    line per row (rows <= 65535)."""
    return (-(-dim // 256), rows, 1)
