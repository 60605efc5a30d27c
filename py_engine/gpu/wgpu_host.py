"""The desktop host: the device seam implemented with wgpu-py (wgpu-native).

By default it asks for WebGPU's *default* limits, so that what runs here also runs in a browser
that grants no more; `limits="adapter"` takes the adapter's maxima (benchmarks may ask for that).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import tempfile
import time

import wgpu
from wgpu.backends.wgpu_native._ffi import ffi, lib

from .device import Binding, Capabilities, Copy, Device, Dispatch, GpuError, Limits, Read

_DEFAULTS = Limits()  # WebGPU's default limits, what a page gets unless it asks
_DEFAULT_LIMITS = {
    "max-storage-buffer-binding-size": _DEFAULTS.max_storage_binding,
    "max-buffer-size": _DEFAULTS.max_buffer_size,
    "max-compute-workgroup-storage-size": _DEFAULTS.max_workgroup_storage,
    "max-compute-invocations-per-workgroup": _DEFAULTS.max_invocations,
    "max-storage-buffers-per-shader-stage": _DEFAULTS.max_storage_buffers_per_stage,
    "max-compute-workgroups-per-dimension": _DEFAULTS.max_workgroups_per_dim,
}
_BUFFER_TYPES = {
    "uniform": wgpu.BufferBindingType.uniform,
    "read": wgpu.BufferBindingType.read_only_storage,
    "rw": wgpu.BufferBindingType.storage,
}


def _runtime_dir() -> None:
    """Mesa's Vulkan drivers print "XDG_RUNTIME_DIR is invalid or not set" (twice) when the variable
    is missing, as under cron, `sudo` or a bare container: a private directory of this user's stops it."""
    current = os.environ.get("XDG_RUNTIME_DIR")
    if not sys.platform.startswith("linux") or (current and os.path.isdir(current)):
        return
    path = os.path.join(tempfile.gettempdir(), f"wisp-runtime-{os.getuid()}")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except OSError:
        return  # the drivers' lines are noise, not a failure
    os.environ["XDG_RUNTIME_DIR"] = path


# The narrowest subgroups of the GPU vendors whose pipelines all run 32 or more invocations a
# subgroup: NVIDIA's warps (32), AMD's waves (32 or 64), Apple's SIMD-groups (32), Qualcomm's
# waves (64 or 128). wgpu-native's adapter info reports wgpu's bounds (4 and 128), not the device's.
SUBGROUP_MIN_BY_VENDOR = {0x10DE: 32, 0x1002: 32, 0x106B: 32, 0x5143: 64}


def subgroup_min_size(info) -> int:
    """The narrowest subgroups the adapter may run, where known (else 0)."""
    return SUBGROUP_MIN_BY_VENDOR.get(info.get("vendor_id"), 0)


async def open_wgpu_device(
    allow_f16: bool = True, limits: str = "default", allow_subgroups: bool = True, extra_features: tuple = ()
) -> WgpuDevice:
    """extra_features: more wgpu features to request (benchmarks: "timestamp-query")."""
    _runtime_dir()
    adapter = await wgpu.gpu.request_adapter_async(power_preference="high-performance")
    if adapter is None:
        raise GpuError("no WebGPU adapter (on a CPU machine install mesa-vulkan-drivers)")
    features = []
    shader_f16 = allow_f16 and "shader-f16" in adapter.features
    if shader_f16:
        features.append("shader-f16")
    # wgpu-native names the feature "subgroup", and naga refuses `enable subgroups;` (Tint wants
    # it): Capabilities.subgroups_enable stays False here.
    subgroups = allow_subgroups and "subgroup" in adapter.features
    if subgroups:
        features.append("subgroup")
    features += [f for f in extra_features if f in adapter.features]
    if limits == "default":
        required = dict(_DEFAULT_LIMITS)
    else:
        required = {k: adapter.limits[k] for k in _DEFAULT_LIMITS}
    device = await adapter.request_device_async(required_features=features, required_limits=required)
    lim = device.limits
    caps = Capabilities(
        adapter=f"{adapter.info.get('device', '?')} ({adapter.info.get('backend_type', '?')})",
        shader_f16=shader_f16,
        subgroups=subgroups,
        cpu=adapter.info.get("adapter_type") == "CPU",
        subgroup_min_size=subgroup_min_size(adapter.info) if subgroups else 0,
        limits=Limits(
            max_storage_binding=lim["max-storage-buffer-binding-size"],
            max_buffer_size=lim["max-buffer-size"],
            max_workgroup_storage=lim["max-compute-workgroup-storage-size"],
            max_invocations=lim["max-compute-invocations-per-workgroup"],
            max_storage_buffers_per_stage=lim["max-storage-buffers-per-shader-stage"],
            max_workgroups_per_dim=lim["max-compute-workgroups-per-dimension"],
            storage_offset_alignment=lim["min-storage-buffer-offset-alignment"],
        ),
    )
    return WgpuDevice(device, caps)


class _Kernel:
    def __init__(self, pipeline, layout):
        self.pipeline = pipeline
        self.layout = layout


# wgpu-native's map callbacks, one for the process (a cffi callback per read would cost its
# allocation on every decode token): userdata1 is the read's key in _MAP_STATUS.
_MAP_STATUS: dict[int, int] = {}
_READ_KEYS = itertools.count(1)  # process-wide: several devices may read at once


@ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
def _mapped(result, _message, key, _userdata2):
    _MAP_STATUS[int(ffi.cast("uintptr_t", key))] = result


class WgpuDevice(Device):
    # fetch() polls wgpu-native without blocking: it resolves when its own submission is done.
    # wgpu-py's map_async would wake its poll thread, whose blocking poll waits for *every*
    # submission (and holds the device's fence, so the next submit waits for it too).
    reads_overlap = True

    def __init__(self, device, caps: Capabilities):
        self.device = device
        self.caps = caps
        self._layouts = {}  # binding signature → one shared layout, so bind groups fit every kernel of that shape
        self._staging = []  # free MAP_READ buffers that Reads copy into (mapped through wgpu-native: fetch)

    def create_buffer(self, size, kind="storage", label=""):
        size = max(16, (size + 15) // 16 * 16)
        if kind == "uniform":
            usage = wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST
        else:
            usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | wgpu.BufferUsage.COPY_SRC
        return self.device.create_buffer(size=size, usage=usage, label=label)

    def write_buffer(self, buffer, offset, data):
        self.device.queue.write_buffer(buffer, offset, data)

    def _layout(self, bindings: list[Binding]):
        key = tuple((b.index, b.kind) for b in bindings)
        if key not in self._layouts:
            entries = [
                {"binding": b.index, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": _BUFFER_TYPES[b.kind]}}
                for b in bindings
            ]
            bgl = self.device.create_bind_group_layout(entries=entries)
            self._layouts[key] = (bgl, self.device.create_pipeline_layout(bind_group_layouts=[bgl]))
        return self._layouts[key]

    def create_kernel(self, label, source, bindings, entry="main"):
        bgl, pipeline_layout = self._layout(bindings)
        module = self.device.create_shader_module(code=source, label=label)
        pipeline = self.device.create_compute_pipeline(
            layout=pipeline_layout, compute={"module": module, "entry_point": entry}, label=label
        )
        return _Kernel(pipeline, bgl)

    async def prepare(self):
        """wgpu-py compiles and validates at each call: nothing is pending."""

    def create_bind_group(self, kernel, resources):
        entries = [
            {"binding": i, "resource": {"buffer": buf, "offset": off, "size": size}}
            for i, (buf, off, size) in enumerate(resources)  # resources come in binding order
        ]
        return self.device.create_bind_group(layout=kernel.layout, entries=entries)

    def submit(self, commands):
        # Dispatches go straight to wgpu-native (cffi), skipping a pipeline or bind group that is
        # already set: wgpu-py's wrappers cost ~2 us more per dispatch, and a decode token has
        # hundreds. Errors still surface at the pass's end() and the encoder's finish().
        encoder = self.device.create_command_encoder()
        compute_pass = None
        pending = []
        for cmd in commands:
            if type(cmd) is Dispatch:
                if compute_pass is None:
                    compute_pass = encoder.begin_compute_pass()
                    handle, pipeline, bind_group = compute_pass._internal, None, None
                if cmd.kernel.pipeline is not pipeline:
                    pipeline = cmd.kernel.pipeline
                    lib.wgpuComputePassEncoderSetPipeline(handle, pipeline._internal)
                if cmd.bind_group is not bind_group:
                    bind_group = cmd.bind_group
                    lib.wgpuComputePassEncoderSetBindGroup(handle, 0, bind_group._internal, 0, ffi.NULL)
                grid = cmd.grid if len(cmd.grid) == 3 else (*cmd.grid, 1, 1)[:3]
                lib.wgpuComputePassEncoderDispatchWorkgroups(handle, *grid)
                continue
            if compute_pass is not None:
                compute_pass.end()
                compute_pass = None
            if isinstance(cmd, Copy):
                encoder.copy_buffer_to_buffer(cmd.src, cmd.src_offset, cmd.dst, cmd.dst_offset, cmd.size)
            elif isinstance(cmd, Read):  # copies are 4-byte aligned: widen the range, cut on fetch
                lo = cmd.offset - cmd.offset % 4
                span = min(cmd.buffer.size, -(-(cmd.offset + cmd.size) // 4) * 4) - lo
                staging = self._take_staging(span)
                encoder.copy_buffer_to_buffer(cmd.buffer, lo, staging, 0, span)
                pending.append((staging, cmd.offset - lo, cmd.size, span))
            else:
                raise TypeError(f"unknown command {cmd!r}")
        if compute_pass is not None:
            compute_pass.end()
        self.device.queue.submit([encoder.finish()])
        return pending

    def _take_staging(self, size):
        for i, staging in enumerate(self._staging):
            if staging.size >= size:
                return self._staging.pop(i)
        usage = wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
        return self.device.create_buffer(size=max(size, 256), usage=usage)

    async def fetch(self, pending):
        staging, skip, size, span = pending
        key = next(_READ_KEYS)
        handle = staging._internal
        info = ffi.new("WGPUBufferMapCallbackInfo *")
        info.mode = lib.WGPUCallbackMode_AllowProcessEvents
        info.callback = _mapped
        info.userdata1 = ffi.cast("void *", key)
        lib.wgpuBufferMapAsync(handle, lib.WGPUMapMode_Read, 0, span, info[0])
        # Poll without blocking; spin (yielding to other tasks) for the first millisecond, then nap.
        device, start = self.device._internal, time.perf_counter()
        while key not in _MAP_STATUS:
            lib.wgpuDevicePoll(device, False, ffi.NULL)
            if key not in _MAP_STATUS:
                await asyncio.sleep(0 if time.perf_counter() - start < 1e-3 else 2e-4)
        status = _MAP_STATUS.pop(key)
        if status != lib.WGPUMapAsyncStatus_Success:
            raise GpuError(f"reading back {size} bytes failed (map status {status})")
        try:
            data = bytes(ffi.buffer(lib.wgpuBufferGetConstMappedRange(handle, 0, span), span))[skip : skip + size]
        finally:
            lib.wgpuBufferUnmap(handle)
        self._staging.append(staging)
        if len(self._staging) > 8:
            self._staging.pop(0).destroy()
        return data

    async def read_buffer(self, buffer, offset, size):
        return await self.fetch(self.submit([Read(buffer, offset, size)])[0])

    def destroy_buffer(self, buffer):
        buffer.destroy()
