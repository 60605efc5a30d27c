"""The worker's half of the WebKit submit probe (static/submit_probe.js keeps the page's half).

One probe runs the dependent chain (py_engine/selftest/chain.py) under one submit group: all its
dispatches in one submit (what the engine's forward does), then one dispatch per submit, and
compares both with each other and with the CPU reference. The page promotes a group size only
when the bytes are identical. The page, not the worker, remembers the outcome: a group size that
crashes WebKit's GPU process takes the page with it, and only the page has localStorage.
"""

from __future__ import annotations

import time

from ..errors import WispError

MAX_STEPS = 4096  # the reference is pure Python: keep a probe well under a second of CPU
_references: dict[int, bytes] = {}


class ProbeRequestError(WispError):
    """A probe message the worker cannot run (bad group or step count)."""


def probe_arguments(message: dict) -> tuple[int, int]:
    """(group, steps) of a probe message whose types protocol.py checked: group 0 = all dispatches
    in one command buffer."""
    group, steps = message["group"], message.get("steps", 256)
    if group < 0:
        raise ProbeRequestError(f"probe: group must be 0 (all) or a positive number of dispatches, not {group!r}")
    if not 1 <= steps <= MAX_STEPS:
        raise ProbeRequestError(f"probe: steps must be a whole number from 1 to {MAX_STEPS}, not {steps!r}")
    return group, steps


def _reference(steps: int) -> bytes:
    from ..selftest.chain import reference

    if steps not in _references:
        _references[steps] = reference(steps)
    return _references[steps]


def _first_difference(got: bytes, want: bytes) -> str:
    """Where two chain outputs part, in words, for the record the page keeps."""
    for word in range(min(len(got), len(want)) // 4):
        a, b = got[4 * word : 4 * word + 4], want[4 * word : 4 * word + 4]
        if a != b:
            return f"word {word}: {int.from_bytes(a, 'little'):#010x} != {int.from_bytes(b, 'little'):#010x}"
    return f"{len(got)} bytes != {len(want)} bytes"


async def run_probe(device, chain, group: int, steps: int, restore_group: int | None) -> dict:
    """Run the chain under `group` (0: all in one command buffer, still one in flight), then set
    `restore_group` back (None: single pass). Returns {ok, detail, ms, command_buffers} (the batched run's buffers)."""
    start = time.perf_counter()
    device.set_submit_group(group or "all")  # WebKit's all: grouped discipline, one buffer per submit
    try:
        before = device.command_buffers()
        batched = await chain.run(steps)
        command_buffers = device.command_buffers() - before
        one_by_one = await chain.run(steps, one_by_one=True)
    finally:
        device.set_submit_group(restore_group)  # the chain's reads drained every group: nothing pending
    want = _reference(steps)
    if batched != one_by_one:
        detail = f"batched differs from one-by-one at {_first_difference(batched, one_by_one)}"
    elif one_by_one != want:
        detail = f"both differ from the CPU reference at {_first_difference(one_by_one, want)}"
    else:
        detail = ""
    return {
        "ok": not detail,
        "detail": detail,
        "ms": round(1000 * (time.perf_counter() - start), 1),
        "command_buffers": command_buffers,
    }


def adapter_identity(device) -> dict:
    """What the page keys its record on, with the user agent: never a table of known devices."""
    info = getattr(device, "info", None) or {}
    return {key: str(info.get(key) or "") for key in ("name", "vendor", "architecture", "description")}
