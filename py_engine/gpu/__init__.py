"""The only package that knows which host it runs on (desktop wgpu-py or the browser)."""

from __future__ import annotations

import sys

from .device import Binding, Capabilities, Copy, Device, Dispatch, GpuError, Limits, Read

__all__ = ["Binding", "Capabilities", "Copy", "Device", "Dispatch", "GpuError", "Limits", "Read", "open_device"]


async def open_device(
    allow_f16: bool = True, limits: str = "default", submit_group: int | str | None = None, allow_subgroups: bool = True
) -> Device:
    """Open the GPU of this host. allow_f16=False forces the f32 path even where shader-f16 exists;
    allow_subgroups=False the workgroup-memory reductions even where subgroups exist.
    submit_group: the browser's grouped submits (N dispatches per command buffer; None: one submit
    per forward). The desktop is wgpu-native, never WebKit: always one submit."""
    if sys.platform == "emscripten":  # Pyodide in worker/worker.js, which registers worker/gpu.js
        from .browser_host import open_browser_device

        return await open_browser_device(
            allow_f16=allow_f16, limits=limits, submit_group=submit_group, allow_subgroups=allow_subgroups
        )
    from .wgpu_host import open_wgpu_device

    return await open_wgpu_device(allow_f16=allow_f16, limits=limits, allow_subgroups=allow_subgroups)
