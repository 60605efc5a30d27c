"""What the browser worker holds between page messages, in one object (worker.py keeps the one the
worker uses): how events leave, the open device and the settings it was opened with, the loaded
model (and memory's embedder beside it), the request being served and the requests cancelled, and
what recovering from a lost device takes (recovery.py: the load to run again, the losses in a row,
the recovery under way). Also the
device a request runs on (device_for) and the adapter reply that `loaded` and `diagnostics` share."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from ..errors import WispError


@dataclass
class WorkerState:
    post: object = None  # event dict -> the page (worker.js's postMessage, converted at the boundary)
    device: object = None
    device_key: tuple | None = None  # (allow_f16, submit group) the device was opened with
    model: object = None  # the loaded model's session.LoadedModel
    probe_chain: object = None  # the submit probe's Chain on this device
    serving: object = None  # the id of the GPU request being served (load, openai, probe, diagnose)
    loading: str | None = None  # the model id the last load was for
    cancelled: set = field(default_factory=set)
    reload: dict | None = None  # the load message of the model held: a lost device runs it again
    losses: int = 0  # device losses since an answer last completed (recovery.py gives up after a few)
    recovery: object = None  # the recovery task after a device loss (recovery.py)
    memory: object = None  # memory.py's PageMemory once used: the embedder beside the model, the stores
    speech: object = None  # speech.py's PageSpeech once used: the transcription and speech models

    def emit(self, kind: str, request, /, **fields) -> None:
        """An event of protocol.py's table: its type, the request it answers, its fields (an
        error's own `kind` among them: the first two are positional only)."""
        self.post({"type": kind, "id": request, **fields})

    def drop_device(self) -> None:
        """Forget the device and all that lives on it (a new one replaces it, or it failed)."""
        self.device = self.device_key = self.model = self.probe_chain = None
        if self.memory is not None:
            self.memory.drop_gpu()  # the embedder and the vector indexes lived on it
        if self.speech is not None:
            self.speech.drop_gpu()

    @contextlib.contextmanager
    def busy(self, request):
        """One GPU request at a time (load, openai, probe, diagnose): another is refused, not queued."""
        if self.serving is not None:
            raise WispError(f"busy with request {self.serving!r}; wait for it or cancel it")
        self.serving = request
        try:
            yield
        finally:
            self.serving = None


async def device_for(state: WorkerState, allow_f16: bool, group, keep_model: bool = False) -> tuple:
    """(device, kept): the device a request with these settings runs on. The open one when it
    matches, or when only its submit group differs and no model holds it (the submit probe's
    device, which a WebKit load then reuses); else a new one, which replaces the open one (and
    its model) — unless keep_model, when a loaded model stays and the new device is not kept."""
    from ..gpu import open_device

    key = (allow_f16, group)
    if state.device is not None and state.device_key == key:
        return state.device, True
    if state.device is not None and state.device_key[0] == allow_f16 and state.model is None:
        state.device.set_submit_group(group)
        state.device_key = key
        return state.device, True
    device = await open_device(allow_f16=allow_f16, submit_group=group)
    if keep_model and state.model is not None:
        return device, False
    state.drop_device()
    state.device, state.device_key = device, key
    return device, True


def adapter_reply(device, platform: dict, submit: dict, policy: dict) -> dict:
    """The adapter as `loaded` and `diagnostics` report it: name, features, limits, and the WebKit
    decisions in force (a desktop engine must show no workarounds: a hardware-keyed gate once made
    one 8x slower)."""
    from ..gpu.submit_strategy import submit_workarounds
    from ..selftest.suite import adapter_summary

    return {
        **adapter_summary(device),
        "webkit": bool(platform.get("webkit")),
        "platform_reason": platform.get("reason", ""),
        "submit": submit,
        "workarounds": submit_workarounds(submit) + policy["workarounds"],
    }
