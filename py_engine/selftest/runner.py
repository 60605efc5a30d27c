"""What every self-test shares: running one kernel once, deterministic test data, and the failure
a check raises when the GPU's answer differs from the CPU's.

Pure Python (it runs in Pyodide): data is built with `array` and `struct`, never numpy, and kept
small so that the CPU references stay quick there.
"""

from __future__ import annotations

import struct
from array import array

from ..gpu import Dispatch
from ..runtime.kernels import STEP_FORMAT, Kernel

_MASK = 0xFFFFFFFF


class CheckFailed(Exception):
    """A check ran but the GPU's answer was wrong; the message says where and by how much."""


def lcg_words(n: int, seed: int) -> array:
    """n pseudo-random u32 words (a 32-bit LCG): the same on every host, no `random` state."""
    out, state = array("I"), seed & _MASK
    for _ in range(n):
        state = (state * 1664525 + 1013904223) & _MASK
        out.append(state)
    return out


def lcg_floats(n: int, seed: int, low: float, high: float) -> array:
    """n f32 values in [low, high); reading them back from the array gives their exact f32 values."""
    return array("f", (low + (high - low) * (w >> 8) / (1 << 24) for w in lcg_words(n, seed)))


def first_difference(got, want, close=None) -> int | None:
    """The index of the first element where got != want (or not close(g, w)); None if none."""
    for i, (g, w) in enumerate(zip(got, want)):
        if not (close(g, w) if close else g == w):
            return i
    return None


async def run_kernel(
    device,
    kernel: Kernel,
    buffers: dict,
    params: dict | None = None,
    grid=(1, 1, 1),
    step=(1, 0, 1),
    read: list[str] | None = None,
) -> dict:
    """Run `kernel` once with fresh buffers and return what it wrote.

    buffers: binding name → bytes-like (uploaded) or int (that many zeroed bytes). The `step`
    binding (the shared Step uniform: rows, first position, KV length) and `p` (the kernel's
    Params, packed by name) are filled here. Returns binding name → bytes for the read_write
    bindings (or those named in `read`), trimmed to the size asked for. Buffers are destroyed."""
    created, sizes, resources = {}, {}, []
    try:
        for b in kernel.bindings:
            if b.name == "step":
                data, kind = struct.pack(STEP_FORMAT, *step, 1), "uniform"  # logit_rows 1: the last row
            elif b.name == "p":
                data, kind = kernel.pack_params(params or {}), "uniform"
            else:
                value = buffers[b.name]
                data = None if isinstance(value, int) else bytes(value)
                kind = "storage"
            size = len(data) if data is not None else value
            buf = device.create_buffer(size, kind, label=f"selftest.{kernel.name}.{b.name}")
            created[b.name], sizes[b.name] = buf, size
            if data:
                device.write_buffer(buf, 0, data + bytes(-len(data) % 4))
            resources.append((buf, 0, buf.size))
        await device.prepare()  # compile errors surface here, as this check's failure
        group = device.create_bind_group(kernel.handle, resources)
        device.submit([Dispatch(kernel.handle, group, tuple(grid))])
        names = read or [b.name for b in kernel.bindings if b.kind == "rw"]
        return {name: await device.read_buffer(created[name], 0, sizes[name]) for name in names}
    finally:
        for buf in created.values():
            device.destroy_buffer(buf)
