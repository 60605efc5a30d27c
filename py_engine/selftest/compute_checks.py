"""Self-tests of the WGSL building blocks every engine kernel stands on: plain compute, the
shared-memory tree reduction, half floats packed in u32 words, and the clamped exp.

Each check is `async (device, kernels) -> detail`: it returns a line saying what was verified,
or raises CheckFailed saying what differed. Kernels: shaders/selftest/<name>.wgsl.
"""

from __future__ import annotations

import math
import struct
from array import array

from .runner import CheckFailed, first_difference, lcg_words, run_kernel

_MASK = 0xFFFFFFFF

# --- 1. basic compute ----------------------------------------------------------------------------
BASIC_WORDS = 1000  # not a multiple of the 64-thread workgroup: the last group's bounds check runs


def basic_reference(x) -> array:
    return array("I", ((v * 3 + i) & _MASK for i, v in enumerate(x)))


async def check_basic_compute(device, kernels) -> str:
    x = lcg_words(BASIC_WORDS, seed=1)
    out = await run_kernel(
        device,
        kernels.get("selftest/basic"),
        {"x": x.tobytes(), "y": 4 * BASIC_WORDS},
        grid=(-(-BASIC_WORDS // 64), 1, 1),
    )
    got, want = array("I", out["y"]), basic_reference(x)
    bad = first_difference(got, want)
    if bad is not None:
        raise CheckFailed(f"word {bad}: got {got[bad]:#010x}, expected {want[bad]:#010x}")
    return f"{BASIC_WORDS} words computed and read back exactly"


# --- 2. shared-memory tree reduction -------------------------------------------------------------
REDUCE_ROWS, REDUCE_ROW_WORDS = 4, 1024  # mirrors of shaders/selftest/reduce.wgsl's constants
REDUCE_GROUPS = 8


def reduce_reference(x, rows: int) -> array:
    return array("I", (sum(x[r * REDUCE_ROW_WORDS : (r + 1) * REDUCE_ROW_WORDS]) & _MASK for r in range(rows)))


async def check_reduction(device, kernels) -> str:
    rows = REDUCE_GROUPS * REDUCE_ROWS
    x = lcg_words(rows * REDUCE_ROW_WORDS, seed=2)
    out = await run_kernel(
        device, kernels.get("selftest/reduce"), {"x": x.tobytes(), "sums": 4 * rows}, grid=(REDUCE_GROUPS, 1, 1)
    )
    got, want = array("I", out["sums"]), reduce_reference(x, rows)
    bad = first_difference(got, want)
    if bad is not None:
        raise CheckFailed(
            f"row {bad} (workgroup {bad // REDUCE_ROWS}, its row {bad % REDUCE_ROWS}): "
            f"sum {got[bad]:#010x}, expected {want[bad]:#010x}"
        )
    return (
        f"{rows} rows of {REDUCE_ROW_WORDS} words summed by 256-thread trees, "
        f"{REDUCE_ROWS} rows per workgroup through one shared array"
    )


# --- 3. packed f16 round trip --------------------------------------------------------------------
# Half-float bit patterns every f16 holds exactly: ±0, ±1, 0.5, -2, 1.5, the smallest normal
# (2^-14), the largest finite (65504), 2047 (the last odd integer), and two arbitrary fractions.
EXACT_HALVES = (0x0000, 0x8000, 0x3C00, 0xBC00, 0x3800, 0xC000, 0x3E00, 0x0400, 0x7BFF, 0x67FF, 0x2E66, 0xB4CD)
# Not representable: each must round to one of its two f16 neighbours (WGSL leaves the rounding
# direction to the implementation).
ROUNDED = (1 / 3, -0.1, 1.0 + 2.0**-12, 3.14159265)


def half_bits(value: float) -> int:
    """The f16 nearest to `value` (round to nearest even), as its 16 bits."""
    return struct.unpack("<H", struct.pack("<e", value))[0]


def half_value(bits: int) -> float:
    return struct.unpack("<e", struct.pack("<H", bits))[0]


def f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def half_neighbours(value: float) -> set:
    """The bits of the f16 values just below and just above `value` (for a value f16 can't hold)."""
    near = half_bits(value)
    step = 1 if (half_value(near) < value) == (value > 0) else -1  # towards `value`, in magnitude order
    return {near, near + step}


async def check_f16_packing(device, kernels) -> str:
    halves = list(EXACT_HALVES)
    floats = [half_value(h) for h in halves] + [f32(v) for v in ROUNDED]
    floats += [0.0] * (-len(floats) % 8)  # whole vec2 pairs, a multiple of 4 words
    n = len(floats) // 2
    words = [halves[2 * i] | halves[2 * i + 1] << 16 for i in range(len(halves) // 2)]
    words += [0] * (n - len(words))
    out = await run_kernel(
        device,
        kernels.get("selftest/f16_pack"),
        {
            "pairs": array("f", floats).tobytes(),
            "halves": array("I", words).tobytes(),
            "packed": 4 * n,
            "unpacked": 8 * n,
        },
        grid=(-(-n // 64), 1, 1),
    )
    packed, unpacked = array("I", out["packed"]), array("f", out["unpacked"])
    got_halves = [w >> (16 * k) & 0xFFFF for w in packed for k in (0, 1)]
    for i, h in enumerate(halves):  # pack2x16float of exact values: bit-exact
        if got_halves[i] != h:
            raise CheckFailed(f"pack2x16float({half_value(h)!r}) gave {got_halves[i]:#06x}, expected {h:#06x}")
    for i, h in enumerate(halves):  # unpack2x16float: bit-exact
        if struct.pack("<f", unpacked[i]) != struct.pack("<f", half_value(h)):
            raise CheckFailed(f"unpack2x16float({h:#06x}) gave {unpacked[i]!r}, expected {half_value(h)!r}")
    for j, value in enumerate(ROUNDED):
        got = got_halves[len(halves) + j]
        if got not in half_neighbours(f32(value)):
            raise CheckFailed(
                f"pack2x16float({value!r}) gave {got:#06x} ({half_value(got)!r}), not one of its "
                f"f16 neighbours {sorted(hex(b) for b in half_neighbours(f32(value)))}"
            )
    return f"{len(halves)} exact halves packed and unpacked bit-exactly; {len(ROUNDED)} inexact values rounded to a neighbour"


# --- 7. exp clamping -----------------------------------------------------------------------------
EXP_ARGS = (-1000.0, -88.8, -80.5, -80.0, -1.0, 0.0, 1.0, 20.5, 80.0, 88.8, 1000.0, -math.inf)
EXP_RTOL = 1e-4  # WGSL's exp may be off by 3 + 2|x| ULP: about 1e-5 at |x| = 80


def safe_exp_reference(x: float) -> float:
    """shaders/safe_exp.wgsl on the CPU: exactly 0 below -80, capped at exp(80) above 80."""
    return 0.0 if x < -80.0 else math.exp(min(x, 80.0))


async def check_exp_clamp(device, kernels) -> str:
    n = len(EXP_ARGS)
    out = await run_kernel(
        device, kernels.get("selftest/exp_clamp"), {"x": array("f", EXP_ARGS).tobytes(), "y": 4 * n}, grid=(1, 1, 1)
    )
    got = array("f", out["y"])
    for x, y in zip(EXP_ARGS, got):
        want = safe_exp_reference(x)
        if not math.isfinite(y):
            raise CheckFailed(f"safe_exp({x}) = {y}: not finite")
        if (want == 0.0 and y != 0.0) or abs(y - want) > EXP_RTOL * want:
            raise CheckFailed(f"safe_exp({x}) = {y!r}, expected {want!r}")
    return f"safe_exp finite and within {EXP_RTOL:g} of exp at {len(EXP_ARGS)} arguments: ±1000, ±88.8, ±80, -inf, …"
