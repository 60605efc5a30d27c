"""Self-tests of ordering and memory: dependent dispatches (chain.py's Chain, batched and one by
one), 300 dispatches in one submit, and a large buffer filled and verified on the GPU.

Each check is `async (device, kernels) -> detail` (see compute_checks.py).
"""

from __future__ import annotations

import struct
from array import array

from ..gpu import Dispatch
from .chain import Chain, reference
from .runner import CheckFailed

_MASK = 0xFFFFFFFF


def _first_word_difference(got: bytes, want: bytes) -> str:
    a, b = array("I", got), array("I", want)
    i = next(i for i in range(len(b)) if a[i] != b[i])
    return f"word {i}: {a[i]:#010x} instead of {b[i]:#010x}"


# --- 5. a dependent multi-dispatch chain ---------------------------------------------------------
CHAIN_STEPS = 12


async def check_dependent_chain(device, kernels) -> str:
    chain = Chain(device, kernels)
    try:
        batched = await chain.run(CHAIN_STEPS)
        one_by_one = await chain.run(CHAIN_STEPS, one_by_one=True)
    finally:
        chain.destroy()
    want = reference(CHAIN_STEPS)
    if one_by_one != want:
        raise CheckFailed(f"one dispatch per submit differs from the CPU: {_first_word_difference(one_by_one, want)}")
    if batched != want:
        raise CheckFailed(
            f"{CHAIN_STEPS} dispatches in one submit differ from the CPU (one per submit is right): "
            f"{_first_word_difference(batched, want)}"
        )
    return f"{CHAIN_STEPS} dependent dispatches: one submit, one submit each and the CPU agree"


# --- 6. 300 dispatches in one pass ---------------------------------------------------------------
LONG_CHAIN_STEPS = 300  # about a forward pass of a small model


async def check_long_pass(device, kernels) -> str:
    chain = Chain(device, kernels)
    try:
        got = await chain.run(LONG_CHAIN_STEPS)
    finally:
        chain.destroy()
    want = reference(LONG_CHAIN_STEPS)
    if got != want:
        raise CheckFailed(f"after {LONG_CHAIN_STEPS} dispatches: {_first_word_difference(got, want)}")
    return f"{LONG_CHAIN_STEPS} dependent dispatches in one submit match the CPU"


# --- 8. large-buffer integrity -------------------------------------------------------------------
BIG_BYTES = 64 << 20
GROUP_WORDS = 4096  # mirror of shaders/selftest/big_fill.wgsl / big_check.wgsl
SEED = 0x5EED1234


def pattern(index: int, seed: int = SEED) -> int:
    """What big_fill.wgsl writes at word `index`."""
    return ((index * 2654435761) & _MASK) ^ seed


def big_buffer_bytes(limits) -> int:
    """64 MiB, or less where one binding or buffer may not be that large; whole workgroups."""
    size = min(BIG_BYTES, limits.max_storage_binding, limits.max_buffer_size)
    return size // (4 * GROUP_WORDS) * (4 * GROUP_WORDS)


async def _count_mismatches(device, check, group, counts, groups: int) -> list[int]:
    device.submit([Dispatch(check.handle, group, (groups, 1, 1))])
    return list(array("I", await device.read_buffer(counts, 0, 4 * groups)))


async def check_large_buffer(device, kernels) -> str:
    size = big_buffer_bytes(device.caps.limits)
    words, groups = size // 4, size // 4 // GROUP_WORDS
    fill, check = kernels.get("selftest/big_fill"), kernels.get("selftest/big_check")
    big = device.create_buffer(size, label="selftest.big")
    params = device.create_buffer(16, "uniform", label="selftest.big.params")
    counts = device.create_buffer(4 * groups, label="selftest.big.mismatches")
    try:
        device.write_buffer(params, 0, fill.pack_params({"words": words, "seed": SEED, "pad0": 0, "pad1": 0}))
        await device.prepare()
        fill_group = device.create_bind_group(fill.handle, [(params, 0, 16), (big, 0, size)])
        check_group = device.create_bind_group(
            check.handle, [(params, 0, 16), (big, 0, size), (counts, 0, counts.size)]
        )
        device.submit([Dispatch(fill.handle, fill_group, (groups, 1, 1))])
        found = await _count_mismatches(device, check, check_group, counts, groups)
        if sum(found):
            first = next(g for g, c in enumerate(found) if c)
            raise CheckFailed(
                f"{sum(found)} of {words} words wrong, the first in bytes "
                f"{first * GROUP_WORDS * 4}..{(first + 1) * GROUP_WORDS * 4}"
            )
        # Read-back probes: the start, across 16 MiB, the middle and the last words.
        for offset in sorted({0, min(16 << 20, size) - 8, size // 2 + 4, size - 16}):
            got = array("I", await device.read_buffer(big, offset, 16))
            want = [pattern(offset // 4 + k) for k in range(4)]
            if list(got) != want:
                raise CheckFailed(
                    f"read back at byte {offset}: {[hex(v) for v in got]}, expected {[hex(v) for v in want]}"
                )
        # Plant one wrong word: the GPU check must find exactly it (else it would pass anything).
        planted = words - GROUP_WORDS // 2 - 3
        device.write_buffer(big, 4 * planted, struct.pack("<I", pattern(planted) ^ 0x100))
        found = await _count_mismatches(device, check, check_group, counts, groups)
        if sum(found) != 1 or found[planted // GROUP_WORDS] != 1:
            raise CheckFailed(f"one word changed at {4 * planted}, but the GPU check counted {sum(found)} mismatches")
    finally:
        for buf in (big, params, counts):
            device.destroy_buffer(buf)
    return f"{size >> 20} MiB filled and verified on the GPU, 4 probes read back, a planted error found"
