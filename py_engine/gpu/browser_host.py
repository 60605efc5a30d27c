"""The browser host: the device seam implemented over Pyodide's JS FFI and worker/gpu.js.

The WebGPU objects live in JavaScript (worker/gpu.js keeps them in id tables); Python holds ints.
Buffers are `GpuBuffer`s — ints that also carry `.size` and `.label` as wgpu-py buffers do.
Every method is one FFI call: `submit` hands the whole command list over as one Int32Array,
`write_buffer` lends the Python bytes to JavaScript zero-copy. A forward's dispatch list goes to
JavaScript once (`batch`) and a submit names it with one op: encoding a decode token's ~150
dispatches in Python took a sixth of the page's host time a token. A submit's reads come back in
one `fetch` crossing (one await a decode group, not one a token). Weight bytes never enter Python:
`upload_plan` gives JavaScript (file URL, range) → (buffer, offset) pieces to fetch and write.

The worker registers gpu.js as the JS module "wisp_gpu" before Python imports this module.
"""

from __future__ import annotations

import asyncio
from array import array
from contextlib import contextmanager

from ..errors import StorageQuotaError
from .device import Binding, Capabilities, Copy, Device, Dispatch, GpuError, Limits, Read

try:  # only inside Pyodide
    from pyodide.ffi import JsException, create_proxy, to_js
except ImportError:  # pragma: no cover - lets the desktop import this module for its docs / tests
    JsException = create_proxy = to_js = None


# A Python array lent to gpu.js once: submit's op list and small writes are copied into it and
# the FFI call passes only ints (a buffer handed over per call costs a proxy and a view each time).
_SHARED_BYTES = 64 << 10
_SMALL_WRITE = 4096  # writes up to this size go through the shared array
_UNFETCHED = 64  # submits whose reads were fetched in part (a cancelled generation) kept at most


class NoWebGPUError(GpuError):
    """The browser has no WebGPU, or no adapter it will hand out."""


class DeviceLostError(GpuError):
    """The browser lost the GPU device (a driver reset, WebKit's GPU process crashing, memory
    reclaimed): everything on it is gone, and a new device has to be opened."""


class GpuBuffer(int):
    """A buffer id of worker/gpu.js with the size and label it was created with."""

    size: int
    label: str

    def __new__(cls, handle: int, size: int, label: str = ""):
        obj = super().__new__(cls, handle)
        obj.size = size
        obj.label = label
        return obj

    def __repr__(self):
        return f"GpuBuffer({int(self)}, size={self.size}, label={self.label!r})"


class Batch:
    """A dispatch list gpu.js resolved once (BrowserDevice.batch): one op of a submit replays it."""

    __slots__ = ("handle", "commands")

    def __init__(self, handle: int, commands: list):
        self.handle = handle
        self.commands = commands

    def __repr__(self):
        return f"Batch({self.handle}, {len(self.commands)} dispatches)"


def _gpu_error(e) -> GpuError:
    name = getattr(e, "name", "")
    message = getattr(e, "message", None) or str(e)
    return {"NoWebGPU": NoWebGPUError, "QuotaError": StorageQuotaError}.get(name, GpuError)(message)


@contextmanager
def _js_errors():
    """The worker GPU module's JS exceptions as the engine's typed errors (_gpu_error)."""
    try:
        yield
    except JsException as e:
        raise _gpu_error(e) from None


def _js_module():
    import wisp_gpu  # registered by worker/worker.js: pyodide.registerJsModule("wisp_gpu", gpu)

    return wisp_gpu


# A group no forward reaches: each submit is one command buffer, yet WebKit's discipline stays (it
# is awaited before the next is encoded, the read-back copy is its own submit). This is WebKit's
# "all": a device whose probe passes with every dispatch batched still keeps one buffer in flight.
WHOLE_SUBMIT = 1 << 30


def _js_group(group) -> int:
    """gpu.configureSubmit's argument: None -> 0 (single pass), "all" -> WHOLE_SUBMIT, N -> N."""
    return WHOLE_SUBMIT if group == "all" else int(group or 0)


async def open_browser_device(
    allow_f16: bool = True,
    limits: str = "default",
    submit_group: int | str | None = None,
    gpu=None,
    allow_subgroups: bool = True,
) -> BrowserDevice:
    gpu = gpu if gpu is not None else _js_module()
    options = to_js(
        {"allowF16": bool(allow_f16), "limits": limits, "allowSubgroups": bool(allow_subgroups)},
        dict_converter=_object_from_entries(),
    )
    with _js_errors():
        info = (await gpu.requestDevice(options)).to_py()
    lim = info["limits"]
    name = info["name"]
    extra = ", ".join(x for x in (info.get("architecture"), "fallback" if info.get("isFallbackAdapter") else "") if x)
    caps = Capabilities(
        adapter=f"{name} ({extra})" if extra else name,
        shader_f16=bool(info["shaderF16"]),
        subgroups=bool(info.get("subgroups")),
        subgroups_enable=True,  # Tint requires `enable subgroups;`
        int8_dot=bool(info.get("int8Dot")),
        cpu=bool(info.get("isFallbackAdapter")),
        int8_emulated=bool(info.get("isFallbackAdapter")),
        subgroup_min_size=int(info.get("subgroupMinSize") or 0) if info.get("subgroups") else 0,
        limits=Limits(
            max_storage_binding=int(lim["maxStorageBufferBindingSize"]),
            max_buffer_size=int(lim["maxBufferSize"]),
            max_workgroup_storage=int(lim["maxComputeWorkgroupStorageSize"]),
            max_invocations=int(lim["maxComputeInvocationsPerWorkgroup"]),
            max_storage_buffers_per_stage=int(lim["maxStorageBuffersPerShaderStage"]),
            max_workgroups_per_dim=int(lim["maxComputeWorkgroupsPerDimension"]),
            storage_offset_alignment=int(lim["minStorageBufferOffsetAlignment"]),
        ),
    )
    device = BrowserDevice(gpu, caps, info)
    device.set_submit_group(submit_group)
    return device


def _object_from_entries():
    import js

    return js.Object.fromEntries


class BrowserDevice(Device):
    def __init__(self, gpu, caps: Capabilities, info: dict | None = None):
        self._gpu = gpu
        self.caps = caps
        self.info = info or {}  # what requestDevice reported: name, vendor, features, limits, ...
        self._share(_SHARED_BYTES)
        self._next_read = 0  # ids of the reads that submits set aside (worker/gpu_reads.js)
        # A submit's reads fetched together: its first read id -> [future of their bytes, reads
        # not yet fetched]
        self._fetched: dict[int, list] = {}
        # WebKit's grouped submits keep one command buffer in flight: there a read waits for the
        # chain, and reading ahead gains nothing.
        self.reads_overlap = True

    def _share(self, nbytes: int) -> None:
        self._shared = array("i", bytes(nbytes))  # never resized: gpu.js keeps a view of its memory
        self._shared_u8 = memoryview(self._shared).cast("B")
        self._gpu.share(self._shared)

    # buffers -----------------------------------------------------------------------------------
    def create_buffer(self, size, kind="storage", label=""):
        size = max(16, (size + 15) // 16 * 16)
        if size > self.caps.limits.max_buffer_size:
            raise GpuError(
                f"buffer {label or ''} of {size} bytes exceeds the device's maximum "
                f"({self.caps.limits.max_buffer_size} bytes)"
            )
        with _js_errors():
            return GpuBuffer(self._gpu.createBuffer(size, kind, label), size, label)

    def write_buffer(self, buffer, offset, data):
        """Small bytes are copied into the shared array; anything else is lent zero-copy (gpu.js
        reads the Python buffer and queue.writeBuffer copies it at once)."""
        with _js_errors():
            if type(data) in (bytes, bytearray) and len(data) <= _SMALL_WRITE:
                n = len(data)
                self._shared_u8[:n] = data
                self._gpu.writeShared(buffer, offset, n)
            else:
                self._gpu.writeBuffer(buffer, offset, data)

    async def read_buffer(self, buffer, offset, size):
        with _js_errors():
            data = await self._gpu.readBuffer(buffer, offset, size)
        return data.to_bytes()

    def destroy_buffer(self, buffer):
        self._gpu.destroyBuffer(buffer)

    # kernels -----------------------------------------------------------------------------------
    def create_kernel(self, label, source, bindings: list[Binding], entry="main"):
        """Compiles asynchronously: `await device.prepare()` before submitting it."""
        kinds = ",".join(b.kind for b in sorted(bindings, key=lambda b: b.index))
        with _js_errors():
            return self._gpu.createKernel(label, source, kinds, entry)

    async def prepare(self):
        with _js_errors():
            await self._gpu.prepare()

    def create_bind_group(self, kernel, resources):
        flat = []
        for buf, off, size in resources:
            flat += (int(buf), off, size)
        with _js_errors():
            return self._gpu.createBindGroup(kernel, to_js(flat))

    # work --------------------------------------------------------------------------------------
    def batch(self, commands: list) -> list:
        """The dispatches registered with gpu.js: [a Batch] that a submit carries as one op."""
        if any(type(c) is not Dispatch for c in commands):
            raise TypeError("a batch holds dispatches only")
        ops, _ = self.encode(commands)
        with _js_errors():
            return [Batch(int(self._gpu.createBatch(ops)), commands)]

    def encode(self, commands) -> tuple[array, list[tuple]]:
        """(the flat op list gpu.js's submit reads, a pending read per Read): dispatch [0, kernel,
        bind group, x, y, z], copy [1, src, src offset, dst, dst offset, size], read [2, src,
        offset, size, read id, 0], batch [3, batch id, 0, 0, 0, 0] (signed 32-bit values). A
        pending read is (the submit's first read id, its bytes' start and end in what gpu.js's
        fetchRead returns for that id, how many reads the submit has)."""
        flat, reads = [], []
        add = flat.extend
        for c in commands:
            kind = type(c)
            if kind is Batch:
                add((3, c.handle, 0, 0, 0, 0))
            elif kind is Dispatch:
                g = c.grid
                if len(g) == 3:
                    add((0, c.kernel, c.bind_group, *g))
                else:
                    add((0, c.kernel, c.bind_group, *(tuple(g) + (1, 1))[:3]))
            elif kind is Copy:
                add((1, c.src, c.src_offset, c.dst, c.dst_offset, c.size))
            elif kind is Read:
                self._next_read = self._next_read % 0x7FFFFFFF + 1
                reads.append((self._next_read, c.size))
                add((2, c.buffer, c.offset, c.size, self._next_read, 0))
            else:
                raise TypeError(f"unknown command {c!r}")
        try:
            ops = array("i", flat)
        except OverflowError:
            raise GpuError("submit: offsets and sizes must stay below 2 GiB") from None
        pending, at = [], 0
        for _, size in reads:
            pending.append((reads[0][0], at, at + size, len(reads)))
            at += size
        return ops, pending

    def submit(self, commands):
        ops, reads = self.encode(commands)
        n = len(ops)
        if 4 * n > len(self._shared_u8):
            self._share(8 * n)
        # Same length: copied in place, never a resize. Not when empty (a hybrid's restore to position
        # 0 copies nothing): CPython refuses an exported array's slice assignment of 0 items as a resize.
        if n:
            self._shared[:n] = ops
        with _js_errors():
            self._gpu.submitShared(n)
        return reads

    async def fetch(self, pending):
        """The first fetch of a submit's reads brings all of them over (one await, not one a read)."""
        key, start, end, count = pending
        entry = self._fetched.get(key)
        if entry is None:
            future = asyncio.get_running_loop().create_future()  # for a fetch of a sibling meanwhile
            entry = self._fetched[key] = [future, count]
            if len(self._fetched) > _UNFETCHED:
                del self._fetched[next(iter(self._fetched))]
            try:
                with _js_errors():
                    data = (await self._gpu.fetchRead(key)).to_bytes()
            except BaseException:
                self._fetched.pop(key, None)
                future.cancel()
                raise
            future.set_result(data)
        entry[1] -= 1
        if entry[1] == 0:
            self._fetched.pop(key, None)
        return (await entry[0])[start:end]

    def set_submit_group(self, group: int | str | None) -> None:
        """Change the submit strategy of the open device (None: one submit per forward; "all":
        grouped, a whole submit per command buffer; N: N dispatches per command buffer). Only
        between submits that have completed: gpu.js drops its chain of pending groups."""
        with _js_errors():
            self._gpu.configureSubmit(_js_group(group))
        self.reads_overlap = group is None

    async def lost_info(self, wait_ms: int = 0) -> dict | None:
        """{"reason", "message"} once the browser has lost the device ("destroyed" for the test
        hook, "unknown" for a real loss), else None. Waits up to wait_ms for the loss to be
        reported: a read or write that failed because of it can be seen first."""
        with _js_errors():
            info = (await self._gpu.deviceLost(int(wait_ms))).to_py()
        return {"reason": str(info["reason"]), "message": str(info["message"])} if info["lost"] else None

    def command_buffers(self) -> int:
        """Command buffers submitted since the device opened (grouped submits make more of them)."""
        return int(self._gpu.stats().to_py()["commandBuffers"])

    # weights -----------------------------------------------------------------------------------
    async def upload_plan(self, pieces, progress=None) -> dict:
        """Fetch file ranges straight into GPU buffers (in JavaScript; the bytes never enter
        Python). pieces: (buffer, dst offset, url, file start, length) tuples, or dicts / objects
        with those names. progress(nbytes) is called with the bytes landed since its last call, as
        reads land (ModelSource.flush's convention). Returns {"bytes", "reads", "ms"}.
        """
        plan = []
        for p in pieces:
            if isinstance(p, dict):
                p = (p["buffer"], p["dst"], p["url"], p["start"], p["length"])
            elif not isinstance(p, (tuple, list)):
                p = (p.buffer, p.dst, p.url, p.start, p.length)
            buffer, dst, url, start, length = p
            plan.append([int(buffer), int(dst), str(url), int(start), int(length)])
        landed = [0]

        def report(done, total):
            step, landed[0] = done - landed[0], done
            progress(step)

        callback = create_proxy(report) if progress is not None else None
        js_plan = to_js(plan)
        try:
            with _js_errors():
                result = await self._gpu.loadWeights(js_plan, callback)
        finally:
            if callback is not None:
                callback.destroy()
        return result.to_py()
