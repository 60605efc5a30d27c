"""The desktop host: the device seam implemented with wgpu-py (wgpu-native).

By default it asks for WebGPU's *default* limits, so that what runs here also runs in a browser
that grants no more; `limits="adapter"` takes the adapter's maxima (benchmarks may ask for that).
"""
from __future__ import annotations

import wgpu

from .device import Binding, Capabilities, Copy, Device, Dispatch, Limits

_DEFAULT_LIMITS = {
    "max-storage-buffer-binding-size": 128 << 20,
    "max-buffer-size": 256 << 20,
    "max-compute-workgroup-storage-size": 16 << 10,
    "max-compute-invocations-per-workgroup": 256,
    "max-storage-buffers-per-shader-stage": 8,
    "max-compute-workgroups-per-dimension": 65535,
}
_BUFFER_TYPES = {
    "uniform": wgpu.BufferBindingType.uniform,
    "read": wgpu.BufferBindingType.read_only_storage,
    "rw": wgpu.BufferBindingType.storage,
}


async def open_wgpu_device(allow_f16: bool = True, limits: str = "default", allow_subgroups: bool = True,
                           extra_features: tuple = ()) -> "WgpuDevice":
    """extra_features: more wgpu features to request (benchmarks: "timestamp-query")."""
    adapter = await wgpu.gpu.request_adapter_async(power_preference="high-performance")
    if adapter is None:
        raise RuntimeError("no WebGPU adapter (on a CPU machine install mesa-vulkan-drivers)")
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


class WgpuDevice(Device):
    def __init__(self, device, caps: Capabilities):
        self.device = device
        self.caps = caps
        self._layouts = {}  # binding signature → one shared layout, so bind groups fit every kernel of that shape
        self._readback = None

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
        encoder = self.device.create_command_encoder()
        compute_pass = None
        for cmd in commands:
            if isinstance(cmd, Dispatch):
                if compute_pass is None:
                    compute_pass = encoder.begin_compute_pass()
                compute_pass.set_pipeline(cmd.kernel.pipeline)
                compute_pass.set_bind_group(0, cmd.bind_group)
                compute_pass.dispatch_workgroups(*cmd.grid)
            elif isinstance(cmd, Copy):
                if compute_pass is not None:
                    compute_pass.end()
                    compute_pass = None
                encoder.copy_buffer_to_buffer(cmd.src, cmd.src_offset, cmd.dst, cmd.dst_offset, cmd.size)
            else:
                raise TypeError(f"unknown command {cmd!r}")
        if compute_pass is not None:
            compute_pass.end()
        self.device.queue.submit([encoder.finish()])

    def _staging(self, size):
        if self._readback is None or self._readback.size < size:
            if self._readback is not None:
                self._readback.destroy()
            self._readback = self.device.create_buffer(
                size=max(size, 1 << 16), usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST
            )
        return self._readback

    async def read_buffer(self, buffer, offset, size):
        padded = (size + 3) // 4 * 4
        staging = self._staging(padded)
        encoder = self.device.create_command_encoder()
        encoder.copy_buffer_to_buffer(buffer, offset, staging, 0, padded)
        self.device.queue.submit([encoder.finish()])
        await staging.map_async(wgpu.MapMode.READ, 0, padded)
        try:
            return bytes(staging.read_mapped(0, padded))[:size]
        finally:
            staging.unmap()

    def destroy_buffer(self, buffer):
        buffer.destroy()
