"""The device seam: everything the engine asks of a GPU, whichever host runs it.

The engine above this package speaks only this interface; `wgpu_host.py` implements it with
wgpu-py on the desktop and `browser_host.py` with `navigator.gpu` (worker/gpu.js) through
Pyodide's JS FFI. Every wait is `await`able: the browser cannot block.

Work is handed over as a flat list of commands (`Dispatch`, `Copy`, `Read`) per submit, because in
the browser each FFI call costs tens of microseconds: one call per forward pass, not one per dispatch.
A `Read` sets bytes aside at its point of the submit; `fetch` returns them once that work has run, so
the engine can encode the next forward while the GPU still runs this one (`reads_overlap`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import WispError


class GpuError(WispError):
    """The GPU refused or lost work: a shader that does not compile, a validation or out-of-memory
    error, a lost device, or no usable WebGPU at all. The message says which."""


@dataclass(frozen=True)
class Limits:
    max_storage_binding: int = 128 << 20
    max_buffer_size: int = 256 << 20
    max_workgroup_storage: int = 16 << 10
    max_invocations: int = 256
    max_storage_buffers_per_stage: int = 8
    max_workgroups_per_dim: int = 65535
    storage_offset_alignment: int = 256


@dataclass(frozen=True)
class Capabilities:
    adapter: str
    shader_f16: bool
    subgroups: bool
    limits: Limits = field(default_factory=Limits)
    subgroups_enable: bool = False  # the host's WGSL wants `enable subgroups;` (Tint does, naga refuses it)
    # WGSL's packed_4x8_integer_dot_product (dot4I8Packed, pack4xI8): naga always has it, a browser
    # says so in navigator.gpu.wgslLanguageFeatures. Without it precision "fast" runs exact.
    int8_dot: bool = True
    # Those dot products are emulated (a browser's CPU fallback adapter, SwiftShader), where int8
    # activations measured slower than exact: precision "fast" runs exact (linear_plan.arithmetic).
    int8_emulated: bool = False
    # The adapter runs on the CPU (a browser's fallback adapter, SwiftShader; lavapipe): the GEMV
    # takes a thread per row there (linear_plan.gemv_layout), 4-12x faster than a GPU's layout.
    cpu: bool = False
    # The narrowest subgroups the adapter's pipelines may have, where known (else 0):
    # attention_subgroups.wgsl needs 32 or more (models/attention_grid.few_rows_kernel).
    subgroup_min_size: int = 0


@dataclass(frozen=True)
class Binding:
    """One entry of a kernel's bind group, parsed from its WGSL declaration."""

    index: int
    name: str
    kind: str  # "uniform", "read" or "rw"


@dataclass
class Dispatch:
    kernel: object
    bind_group: object
    grid: tuple


@dataclass
class Copy:
    src: object
    src_offset: int
    dst: object
    dst_offset: int
    size: int


@dataclass
class Read:
    """`size` bytes of `buffer` from `offset`, set aside when this point of the submit runs."""

    buffer: object
    offset: int
    size: int


class Device:
    """Interface only. Buffers, kernels and bind groups are opaque handles of the host."""

    caps: Capabilities
    # fetch() resolves once its own submit has run, while later submits may still be running (the
    # desktop); False: it waits for all submitted work, so reading ahead gains nothing.
    reads_overlap = False

    def create_buffer(self, size: int, kind: str = "storage", label: str = ""):
        """kind: "storage" (read/write, copy src/dst) or "uniform"."""
        raise NotImplementedError

    def write_buffer(self, buffer, offset: int, data) -> None:
        """Queue a host → GPU write; `data` is bytes-like. Ordered before the next submit."""
        raise NotImplementedError

    def create_kernel(self, label: str, source: str, bindings: list[Binding], entry: str = "main"):
        raise NotImplementedError

    async def prepare(self) -> None:
        """Await the kernels, buffers and bind groups created so far; raise GpuError for the first
        that failed. Call it after creating kernels and before submitting them (a no-op where the
        host compiles and validates at the call, as wgpu-py does)."""

    def create_bind_group(self, kernel, resources: list[tuple]):
        """resources: (buffer, offset, size) per binding, in binding order."""
        raise NotImplementedError

    def submit(self, commands: list) -> list:
        """Encode Dispatch/Copy/Read commands in order (consecutive dispatches share one compute
        pass). Returns one pending read per Read, for `fetch`."""
        raise NotImplementedError

    def batch(self, commands: list) -> list:
        """What a submit carries in place of `commands` (dispatches submitted again and again: a
        forward's). A host where handing a list over costs per dispatch (the browser's) prepares
        it once and returns a stand-in; the others return the list itself."""
        return commands

    async def fetch(self, pending) -> bytes:
        """The bytes of a Read returned by `submit`, once the work before it has run. Each pending
        read is fetched once."""
        raise NotImplementedError

    async def read_buffer(self, buffer, offset: int, size: int) -> bytes:
        """Await all submitted work, then return `size` bytes of `buffer` from `offset`."""
        raise NotImplementedError

    def destroy_buffer(self, buffer) -> None:
        raise NotImplementedError

    def set_submit_group(self, group) -> None:
        """WebKit's grouped submits (the browser host): N dispatches per command buffer, "all", or
        None for one submit per forward. Hosts that never group (wgpu-native) ignore it."""
