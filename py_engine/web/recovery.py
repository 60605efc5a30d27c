"""A lost GPU device, recovered without a page reload.

The browser can take the worker's device away at any time (a driver reset, WebKit's GPU process
crashing, memory reclaimed), and everything on it goes: weights, KV cache, kernels. The worker then
opens a new device and runs the model's load again with the same message (model and options): the
weights stream from the weight store (no download), the prompt cache starts cold, and the page
keeps its conversation.

Who notices: worker/gpu_device.js tells Python at once (on_device_lost), and a request that fails
on the lost device asks the device (classify), so its `error` is of kind "device-lost". Either way
one recovery runs, once that request has answered; requests that arrive meanwhile wait for it
(settled). The page hears `device_lost` events (protocol.py): "reloading" for each attempt, then
"reloaded" or "failed". A device lost again and again is given up after MAX_RELOADS losses in a row
(no answer completed in between), so a GPU that keeps failing cannot loop forever.
"""

from __future__ import annotations

import asyncio

from ..errors import WispError
from ..gpu.browser_host import DeviceLostError
from ..gpu.device import GpuError

MAX_RELOADS = 3
# How long a request's GPU error waits for the browser to report a loss: a destroyed device's reads
# fail at once, but its `lost` promise takes a round trip to the GPU process (a busy one: seconds).
LOST_WAIT_MS = 2000


async def lost_info(state, wait_ms: int | None = None) -> dict | None:
    """{"reason", "message"} when the open device is lost, else None (none open, or not lost)."""
    query = getattr(state.device, "lost_info", None)
    if query is None:
        return None
    try:
        return await query(LOST_WAIT_MS if wait_ms is None else wait_ms)
    except GpuError:
        return None


async def classify(state, exc: GpuError, load) -> GpuError:
    """A request's GPU error, as DeviceLostError when its device was lost (a recovery is then on
    its way); any other error unchanged."""
    if isinstance(exc, DeviceLostError):
        return exc
    info = await lost_info(state)
    if info is None:
        return exc
    schedule(state, load)
    return DeviceLostError(f"the GPU was reset ({describe(info)}); the model is being reloaded")


def on_device_lost(state, load) -> None:
    """worker/gpu_device.js's call when the current device is lost (worker.init registers it)."""
    schedule(state, load)


def schedule(state, load) -> None:
    """One recovery at a time: a loss noticed twice (by the browser and by a failed request) is one."""
    if state.recovery is None or state.recovery.done():
        state.recovery = asyncio.ensure_future(recover(state, load))


async def settled(state) -> None:
    """Wait for a recovery under way (a load or an openai request after a loss runs on the reloaded model)."""
    while state.recovery is not None and not state.recovery.done():
        await asyncio.wait([state.recovery])


async def recover(state, load) -> None:
    while state.serving is not None:  # the request on the lost device answers first (its error says why)
        await asyncio.sleep(0.05)
    message = state.reload
    with state.busy(message["id"] if message else "device-lost"):
        info = await lost_info(state, 0)  # the loss that scheduled this one is known by now
        if info is None and (state.model is not None or message is None):
            return  # nothing to do: a load already replaced the device, or nothing was loaded
        state.drop_device()  # the next request opens a fresh device
        if message is None:
            return
        info = info or {"reason": "unknown", "message": "the device failed during a check"}
        try:
            await load_retrying(state, message, load, info)
        except Exception as exc:  # noqa: BLE001 - whatever stopped the reload, the page must hear it
            state.reload = None
            state.drop_device()
            report(state, message, "failed", info, str(exc) if isinstance(exc, WispError) else repr(exc))


async def load_retrying(state, message: dict, load, info: dict | None = None) -> None:
    """load(state, message), run again on a new device whenever the device is lost meanwhile.
    info: the loss that makes this a reload (None: the page's own load). Raises DeviceLostError
    after MAX_RELOADS losses in a row."""
    first = info
    while True:
        if info is not None:
            count_loss(state, message, info)
        try:
            await load(state, message)
            break
        except GpuError:
            info = await lost_info(state)
            if info is None:
                raise
            first = first or info
    state.reload = message  # what a later loss reloads
    if first is not None:
        report(state, message, "reloaded", info or first, "")


def count_loss(state, message: dict, info: dict) -> None:
    """One more loss in a row: "reloading", or DeviceLostError once there were too many."""
    state.losses += 1
    state.drop_device()
    if state.losses > MAX_RELOADS:
        raise DeviceLostError(
            f"the GPU was reset {state.losses} times in a row (last: {describe(info)}); "
            "the model was not reloaded again"
        )
    report(state, message, "reloading", info, "")


def report(state, message: dict, status: str, info: dict, detail: str) -> None:
    state.emit(
        "device_lost",
        message["id"],
        status=status,
        attempt=state.losses,
        model=message["model"]["id"],
        reason=info["reason"],
        message=detail or info["message"],
    )


def describe(info: dict) -> str:
    return f"{info['reason']}: {info['message']}" if info.get("message") else info["reason"]
