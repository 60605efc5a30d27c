"""Self-tests of the engine's own code against pure-Python references: q4_0 blocks through the
real dequantizing snippet (shaders/weights/q4_0.wgsl), the real RMSNorm (shaders/rmsnorm.wgsl)
and the real linear layer for few rows (shaders/gemv.wgsl with q4_0 weights), bound as
py_engine/runtime/executor.py binds them: the shared Step uniform plus Params packed by name.

Each check is `async (device, kernels) -> detail` (see compute_checks.py).
"""

from __future__ import annotations

import math
import struct
from array import array

from ..runtime.linear_plan import gemv_features, linear_defines, linear_grid, linear_params
from ..runtime.quant import weight_format
from ..runtime.weights import repack_params
from .runner import CheckFailed, first_difference, lcg_floats, lcg_words, run_kernel

Q4_0 = weight_format("q4_0")  # 18 bytes per 32 weights: f16 scale d, then 16 bytes of nibbles


# --- 4. int4 dequantization (q4_0) ---------------------------------------------------------------
def q4_0_matrix(N: int, K: int, seed: int) -> bytes:
    """N rows x K weights of q4_0 blocks as ggml stores them: scales of both signs (never
    subnormal), random nibbles, and the extreme blocks (all 0 = -8 d, all 15 = 7 d) first."""
    blocks = N * K // Q4_0.block_elems
    nibbles = lcg_words(blocks * 4, seed).tobytes()
    scales = lcg_floats(blocks, seed + 1, 0.001, 0.05)
    out = bytearray()
    for b in range(blocks):
        d = scales[b] * (-1 if b % 3 == 1 else 1)
        quants = b"\x00" * 16 if b == 0 else b"\xff" * 16 if b == 1 else nibbles[16 * b : 16 * b + 16]
        out += struct.pack("<e", d) + quants
    return bytes(out)


def q4_0_dequant(raw: bytes, N: int, K: int) -> array:
    """ggml's dequantize_row_q4_0 in pure Python: weight j < 16 of a block is the low nibble of its
    byte j, weight j >= 16 the high nibble of byte j - 16; w = (q - 8) * d. Exact in f32."""
    out = array("f")
    for at in range(0, N * K // Q4_0.block_elems * Q4_0.block_bytes, Q4_0.block_bytes):
        d = struct.unpack_from("<e", raw, at)[0]
        quants = raw[at + 2 : at + 18]
        out.extend((q - 8) * d for q in [b & 15 for b in quants] + [b >> 4 for b in quants])
    return out


DEQUANT_N, DEQUANT_K = 5, 96  # 15 blocks: one full repacked chunk of 8 and a partial one of 7


async def repacked_q4_0(device, kernels, raw: bytes, N: int, K: int) -> bytes:
    """The q4_0 bytes as a load leaves them: repacked in place on the GPU (weights.py)."""
    params, grid = repack_params("q4_0", N * K // 32, device.caps.limits.max_workgroups_per_dim)
    return (await run_kernel(device, kernels.get("repack"), {"w": raw}, params, grid=grid))["w"]


async def check_q4_0_dequant(device, kernels) -> str:
    N, K = DEQUANT_N, DEQUANT_K
    raw = q4_0_matrix(N, K, seed=4)
    packed = await repacked_q4_0(device, kernels, raw, N, K)
    out = await run_kernel(
        device,
        kernels.get("selftest/dequant", WEIGHTS="q4_0"),
        {"w": packed, "y": 4 * N * K},
        {"K": K, "N": N, "pad0": 0, "pad1": 0},
        grid=(-(-N * K // 4 // 64), 1, 1),
    )
    got, want = array("f", out["y"]), q4_0_dequant(raw, N, K)
    bad = first_difference(got, want)
    if bad is not None:
        raise CheckFailed(f"row {bad // K}, weight {bad % K}: {got[bad]!r}, expected {want[bad]!r}")
    return f"{N * K // 32} q4_0 blocks ({N} rows of {K}) dequantized bit-exactly"


# --- 9. RMSNorm ----------------------------------------------------------------------------------
NORM_ROWS, NORM_DIM, NORM_EPS = 3, 300, 1e-5  # dim not a multiple of the 256 threads per row
RTOL, ATOL = 1e-4, 1e-5


def rmsnorm_reference(x, w, rows: int, dim: int, eps: float) -> list[float]:
    out = []
    for r in range(rows):
        row = x[r * dim : (r + 1) * dim]
        scale = 1.0 / math.sqrt(sum(v * v for v in row) / dim + eps)
        out.extend(v * scale * g for v, g in zip(row, w))
    return out


def _close(got, want) -> bool:
    return abs(got - want) <= ATOL + RTOL * abs(want)


async def check_rmsnorm(device, kernels) -> str:
    rows, dim = NORM_ROWS, NORM_DIM
    x = lcg_floats(rows * dim, seed=9, low=-3.0, high=3.0)
    w = lcg_floats(dim, seed=10, low=-1.0, high=1.0)
    out = await run_kernel(
        device,
        kernels.get("rmsnorm"),
        {"x": x.tobytes(), "w": w.tobytes(), "residual": 16, "y": 4 * rows * dim},
        dict(dim=dim, eps=NORM_EPS, w_offset=0.0, last_row_only=0, add_residual=0, pad0=0, pad1=0, pad2=0),
        grid=(rows, 1, 1),
        step=(rows, 0, rows),
    )
    got, want = array("f", out["y"]), rmsnorm_reference(x, w, rows, dim, NORM_EPS)
    bad = first_difference(got, want, _close)
    if bad is not None:
        raise CheckFailed(f"row {bad // dim}, element {bad % dim}: {got[bad]!r}, expected {want[bad]!r}")
    return f"{rows} rows of {dim} within {RTOL:g} of the CPU"


# --- 10. the linear layer (GEMV) -----------------------------------------------------------------
# K past 2048: the long-row layout (linear_plan.gemv_layout: 16 features per workgroup, so N = 20
# ends mid-workgroup) and two staged x chunks, the second partial.
GEMV_ROWS, GEMV_K, GEMV_N = 2, 2304, 20


def gemv_reference(x, weights, bias, rows: int, K: int, N: int) -> list[float]:
    """y[r, n] = x[r, :] . weights[n, :] + bias[n], in double precision."""
    return [
        sum(a * b for a, b in zip(x[r * K : (r + 1) * K], weights[n * K : (n + 1) * K])) + bias[n]
        for r in range(rows)
        for n in range(N)
    ]


async def check_gemv(device, kernels) -> str:
    rows, K, N = GEMV_ROWS, GEMV_K, GEMV_N
    raw = q4_0_matrix(N, K, seed=11)
    x = lcg_floats(rows * K, seed=12, low=-1.0, high=1.0)
    bias = lcg_floats(N, seed=13, low=-0.5, high=0.5)
    packed = await repacked_q4_0(device, kernels, raw, N, K)
    defines = linear_defines(K, N, "q4_0")
    kernel = kernels.get("gemv", **defines)
    out = await run_kernel(
        device,
        kernel,
        {"x": x.tobytes(), "w": packed, "bias": bias.tobytes(), "residual": 16, "norm": 16, "y": 4 * rows * N},
        linear_params(K, N, rows=rows, bias=True),
        grid=linear_grid(
            "gemv", rows, N, device.caps.limits.max_workgroups_per_dim, gemv_per_group=gemv_features(defines)
        ),
        step=(rows, 0, rows),
    )
    got = array("f", out["y"])
    want = gemv_reference(x, q4_0_dequant(raw, N, K), bias, rows, K, N)
    scale = max(abs(v) for v in want)
    worst = max(range(len(want)), key=lambda i: abs(got[i] - want[i]))
    if not abs(got[worst] - want[worst]) <= RTOL * scale:
        raise CheckFailed(f"row {worst // N}, feature {worst % N}: {got[worst]!r}, expected {want[worst]!r}")
    return f"{rows} rows x {N} features, K = {K}, q4_0 weights + bias, within {RTOL:g} of the CPU"
