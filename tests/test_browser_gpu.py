"""The browser GPU host in a real browser: headless Chromium (SwiftShader WebGPU), worker/worker.js
booting Pyodide from our origin, py_engine/gpu/browser_host.py over worker/gpu.js.

The app's URL map (app/server.py) serves the build (tools/build_web.py, run first) and a test data
file as a model; tests/web/worker_test.html starts the worker in test mode, and each test runs
Python inside it (`wisp.exec`) and checks the answers with numpy here. SwiftShader is slow: the
kernels and data are small."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from browser_harness import CHROMIUM, ROOT, launch
from quant_ref import QuantMatrix
from test_kernel_quant import assert_int8_gemv

PLAN_FILE = "plan-data.gguf"  # any bytes: the app serves a .gguf file as a model, with Range requests
PLAN_FILE_BYTES = 20 << 20 | 4242  # more than one 16 MiB read, and not a whole number of words

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Chromium at /usr/bin/chromium"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def plan_bytes(tmp_path_factory) -> tuple[Path, bytes]:
    data = np.random.default_rng(7).integers(0, 256, PLAN_FILE_BYTES, dtype=np.uint8).tobytes()
    path = tmp_path_factory.mktemp("models") / PLAN_FILE
    path.write_bytes(data)
    return path, data


@pytest.fixture(scope="module")
def server(plan_bytes):
    """The app (its real routes) plus /tests/web/, on a free port, in a thread."""
    build = subprocess.run([sys.executable, "tools/build_web.py"], cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, f"tools/build_web.py failed:\n{build.stdout}\n{build.stderr}"
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount
    from starlette.staticfiles import StaticFiles

    from app.models import ModelRegistry
    from app.server import create_app

    registry = ModelRegistry([plan_bytes[0]], include_cache=False)
    app = Starlette(
        routes=[Mount("/tests/web", StaticFiles(directory=ROOT / "tests" / "web")), Mount("/", create_app(registry))]
    )
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", registry.models()[0].id
    server.should_exit = True
    thread.join(5)


class Worker:
    def __init__(self, page):
        self.page = page

    def exec(self, code: str, timeout_ms: int = 60_000):
        """Run Python in the worker; the code's last expression must be a JSON string."""
        reply = self.page.evaluate(
            f"(code) => Promise.race([wispTest.exec(code), new Promise((_, no) => "
            f"setTimeout(() => no(new Error('timed out')), {timeout_ms}))])",
            textwrap.dedent(code),
        )
        if "error" in reply:
            raise AssertionError(f"Python in the worker failed:\n{reply['error']}")
        return json.loads(reply["result"])


# Python that runs inside the worker once: a device and a kernel runner (no numpy there).
WORKER_SETUP = """
import base64, json, struct, time
from py_engine.gpu import Copy, Dispatch, GpuError, open_device
from py_engine.runtime.kernels import STEP_FORMAT, KernelCache

dev = await open_device()
cache = KernelCache(dev)

def b64(data): return base64.b64encode(bytes(data)).decode()
def unb64(text): return base64.b64decode(text)

async def run_kernel(name, buffers, params=None, grid=(1, 1, 1), step=(1, 0, 1), defines=None):
    kernel = cache.get(name, **(defines or {}))
    await dev.prepare()
    resources, out = [], {}
    for b in kernel.bindings:
        if b.name == "step":
            data, buf = struct.pack(STEP_FORMAT, *step, 1), dev.create_buffer(16, "uniform")
        elif b.name == "p":
            data = kernel.pack_params(params or {})
            buf = dev.create_buffer(len(data), "uniform")
        else:
            value = buffers[b.name]
            data = bytes(value) if isinstance(value, int) else unb64(value)
            data += bytes(-len(data) % 4)
            buf = dev.create_buffer(len(data))
            out[b.name] = (buf, len(data))
        dev.write_buffer(buf, 0, data)
        resources.append((buf, 0, buf.size))
    dev.submit([Dispatch(kernel.handle, dev.create_bind_group(kernel.handle, resources), tuple(grid))])
    result = {}
    for b in kernel.bindings:
        if b.kind == "rw":
            buf, size = out[b.name]
            result[b.name] = b64(await dev.read_buffer(buf, 0, size))
    for buf, _ in out.values():
        dev.destroy_buffer(buf)
    return result

def simple_bind_group(kernel, size=4096):
    # fresh zeroed buffers for every binding of `kernel` (uniforms 256 bytes): (bind group, buffers)
    bufs = [dev.create_buffer(256 if b.kind == "uniform" else size, b.kind if b.kind == "uniform" else "storage")
            for b in kernel.bindings]
    return dev.create_bind_group(kernel.handle, [(x, 0, x.size) for x in bufs]), bufs

json.dumps({"adapter": dev.caps.adapter, "f16": dev.caps.shader_f16, "limits": vars(dev.caps.limits),
            "features": dev.info["features"]})
"""


@pytest.fixture(scope="module")
def worker(server, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    base, _ = server
    with sync_playwright() as p:
        context = launch(p, tmp_path_factory.mktemp("chromium-profile"))
        try:
            page = context.new_page()
            page.goto(f"{base}/tests/web/worker_test.html")
            booted = page.evaluate("wispTest.booted")
            w = Worker(page)
            w.booted = booted
            w.setup = w.exec(WORKER_SETUP)
            yield w
        finally:
            context.close()


def f32(b64: str, shape) -> np.ndarray:
    return np.frombuffer(base64.b64decode(b64), np.float32).reshape(shape)


def enc(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()


def test_boot_and_device(worker):
    assert worker.booted["type"] == "booted" and worker.booted["pyodide_ms"] > 0
    setup = worker.setup
    # WebGPU's default limits, as the desktop host asks for
    assert setup["limits"]["max_storage_binding"] == 128 << 20
    assert setup["limits"]["max_buffer_size"] == 256 << 20
    assert setup["limits"]["max_workgroup_storage"] == 16 << 10
    assert setup["limits"]["max_storage_buffers_per_stage"] == 8
    assert setup["f16"] == ("shader-f16" in setup["features"])
    print(f"\nbooted in {worker.booted['pyodide_ms']} ms; adapter {setup['adapter']}; features {setup['features']}")


def test_buffer_round_trip(worker):
    out = worker.exec("""
        buf = dev.create_buffer(1000)
        assert buf.size == 1008 and int(buf) > 0
        data = bytes(range(256)) * 4
        dev.write_buffer(buf, 0, data[:1000])                      # bytes
        dev.write_buffer(buf, 96, bytearray(b"\\xff" * 8))          # bytearray
        dev.write_buffer(buf, 200, memoryview(data)[4:20])          # a memoryview slice
        whole = await dev.read_buffer(buf, 0, 1000)
        part = await dev.read_buffer(buf, 3, 7)                    # unaligned offset and size
        tail = await dev.read_buffer(buf, 1001, 5)
        grow = bytearray(300 << 20)            # wasm memory grows: gpu.js must take a new view of the shared array
        dev.write_buffer(buf, 16, b"grown!!!")
        grown = await dev.read_buffer(buf, 16, 8)
        del grow
        try:
            dev.write_buffer(buf, 2, b"abcd")
            misaligned = None
        except GpuError as e:
            misaligned = str(e)
        dev.destroy_buffer(buf)
        json.dumps({"whole": b64(whole), "part": b64(part), "tail": b64(tail), "misaligned": misaligned,
                    "grown": grown.decode()})
    """)
    expect = bytearray((bytes(range(256)) * 4)[:1000])
    expect[96:104] = b"\xff" * 8
    expect[200:216] = (bytes(range(256)) * 4)[4:20]
    assert base64.b64decode(out["whole"]) == bytes(expect)
    assert base64.b64decode(out["part"]) == bytes(expect[3:10])
    assert base64.b64decode(out["tail"]) == bytes(5)
    assert "multiples of 4" in out["misaligned"]
    assert out["grown"] == "grown!!!"


def test_reads_set_aside_by_submits(worker):
    """A submit's Read holds the bytes of its point in the queue (a later write is not in it) and
    pending reads are fetched in any order: the GPU-fed decode loop reads one token behind."""
    out = worker.exec("""
        from py_engine.gpu import Read
        buf = dev.create_buffer(64)
        dev.write_buffer(buf, 0, bytes(range(64)))
        first = dev.submit([Read(buf, 5, 7)])[0]
        dev.write_buffer(buf, 0, bytes(64))
        second = dev.submit([Read(buf, 0, 16)])[0]
        later, earlier = await dev.fetch(second), await dev.fetch(first)
        dev.destroy_buffer(buf)
        json.dumps({"later": b64(later), "earlier": b64(earlier), "overlap": dev.reads_overlap})
    """)
    assert base64.b64decode(out["later"]) == bytes(16)
    assert base64.b64decode(out["earlier"]) == bytes(range(5, 12))
    assert out["overlap"] is True  # a single-pass device (WebKit's grouped one reads behind its chain)


def test_rmsnorm_and_q4_1_gemv(worker):
    rng = np.random.default_rng(1)
    rows, dim = 3, 576
    x = rng.standard_normal((rows, dim), dtype=np.float32)
    w = rng.standard_normal(dim, dtype=np.float32)
    m = QuantMatrix("q4_1", 37, 352, np.random.default_rng(2))
    xg = rng.standard_normal((2, 352), dtype=np.float32)
    out = worker.exec(f"""
        from py_engine.runtime.linear_plan import gemv_features, linear_defines, linear_grid, linear_params
        from py_engine.runtime.weights import repack_params
        norm = await run_kernel("rmsnorm", {{"x": "{enc(x)}", "w": "{enc(w)}", "residual": 16, "y": {x.nbytes}}},
                                {{"dim": {dim}, "eps": 1e-5, "w_offset": 0.0, "last_row_only": 0,
                                  "add_residual": 0, "pad0": 0, "pad1": 0, "pad2": 0}},
                                grid=({rows}, 1, 1), step=({rows}, 0, {rows}))
        params, grid = repack_params("q4_1", 37 * 352 // 32)
        packed = await run_kernel("repack", {{"w": "{enc(m.raw())}"}}, params, grid=grid)
        gemv = {{}}
        for precision in ("exact", "fast"):  # fast: dot4I8Packed as Tint compiles it
            defines = linear_defines(352, 37, "q4_1", precision=precision)
            gemv[precision] = (await run_kernel(
                "gemv", {{"x": "{enc(xg)}", "w": packed["w"], "bias": 16, "residual": 16, "norm": 16,
                          "y": {2 * 37 * 4}}},
                linear_params(352, 37, rows=2),
                grid=linear_grid("gemv", 2, 37, gemv_per_group=gemv_features(defines)),
                step=(2, 0, 2), defines=defines))["y"]
        json.dumps({{"norm": norm["y"], "gemv": gemv["exact"], "gemv_fast": gemv["fast"]}})
    """)
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(f32(out["norm"], (rows, dim)), ref, rtol=1e-5, atol=1e-5)
    ref = xg.astype(np.float64) @ m.ref.astype(np.float64).T
    err = np.abs(f32(out["gemv"], (2, 37)) - ref).max() / np.abs(ref).max()
    assert err < 1e-4
    assert_int8_gemv(f32(out["gemv_fast"], (2, 37)), xg, m, "q4_1 fast in the browser")


def test_compile_error_is_a_gpu_error(worker):
    out = worker.exec("""
        from py_engine.runtime.kernels import parse_bindings
        src = "@group(0) @binding(0) var<storage, read_write> y: array<f32>;\\n" \\
              "@compute @workgroup_size(1)\\nfn main() {\\n  y[0] = undefined_name + 1.0;\\n}\\n"
        k = dev.create_kernel("broken", src, parse_bindings(src))
        try:
            await dev.prepare()
            message = None
        except GpuError as e:
            message = str(e)
        await dev.prepare()  # the error was reported once; the device goes on
        json.dumps({"message": message})
    """)
    assert out["message"] is not None, "a WGSL error did not raise GpuError"
    assert "kernel 'broken'" in out["message"] and "line 4" in out["message"]
    assert "undefined_name" in out["message"]


def test_kernels_of_other_adapters_compile_here(worker):
    """Kernels SwiftShader never runs, compiled by the browser's WGSL compiler (Tint) in the page's
    host: attention_subgroups.wgsl (adapters whose subgroups are 32 or more wide), the GEMV on
    quantize_rows' x (gemv.wgsl Q8_INPUT), quantize_rows SPREAD (a decode token's large GEMVs) and
    the GEMVs that quantize their outputs for those (Q8_OUTPUT, in the layouts of a GPU). The
    desktop tests run them through naga only."""
    out = worker.exec("""
        from py_engine.models.attention_grid import subgroup_warps
        from py_engine.runtime.linear_plan import linear_defines, q8_output_layout
        names = []
        for hd, gh, kv in ((128, 4, ("f32", "f16_packed")), (64, 7, ("f16_packed", "f16_packed"))):
            for rope in (True, False):
                cache.get("attention_subgroups", K_CACHE=kv[0], V_CACHE=kv[1], HEAD_DIM=hd, WARPS=subgroup_warps(hd),
                          GROUP_HEADS=gh, ROPE_KV=rope, RING=not rope)
                names.append("attention_subgroups")
        for gated in (False, True):
            defines = linear_defines(4096, 4096, "q4_0", norm=gated, gated=gated, precision="fast")
            cache.get("gemv", **{**defines, "Q8_INPUT": True})
            cache.get("gemv", **{**defines, **q8_output_layout(defines), "Q8_INPUT": True, "Q8_OUTPUT": True,
                                 "Q8_OUT_NORM": not gated})
            names += ["gemv", "gemv"]
        cache.get("quantize_rows", X_LEVELS=2, SPREAD=True)
        names.append("quantize_rows")
        await dev.prepare()  # every pipeline compiled: a GpuError here names the kernel and the line
        json.dumps({"compiled": names})
    """)
    assert len(out["compiled"]) == 9


def test_weight_plan_loader(worker, server, plan_bytes):
    """Ranges of a served file into buffers: aligned pieces, pieces at 2-byte offsets and odd
    lengths (assembled in JS), neighbours merged into one request, and a piece larger than one
    16 MiB read whose destination is not word-aligned."""
    _, model_id = server
    _, data = plan_bytes
    url = f"/models/{model_id}/{PLAN_FILE}"
    big = 17 << 20
    # buffer index, dst, file start, length
    pieces = [
        (0, 0, 0, 4096),
        (0, 4096, 8192, 4096),
        (0, 8192, 1 << 20, 1000),  # aligned
        (1, 2, 100_001, 34),
        (1, 36, 5_000, 34),
        (1, 70, 77, 3),
        (1, 200, 9_999_999, 257),  # misaligned
        (2, 6, 3 << 20, big),  # split across reads
        (3, 0, PLAN_FILE_BYTES - 4242, 4242),  # the file's odd tail
    ]
    sizes = [12288, 1024, big + 16, 4256]
    out = worker.exec(f"""
        import hashlib
        bufs = [dev.create_buffer(n) for n in {sizes}]
        plan = [(bufs[b], dst, "{url}", start, length) for b, dst, start, length in {pieces}]
        steps = []
        result = await dev.upload_plan(plan, steps.append)
        digests = [hashlib.sha256(await dev.read_buffer(b, 0, b.size)).hexdigest() for b in bufs]
        for b in bufs:
            dev.destroy_buffer(b)
        json.dumps({{"result": result, "steps": steps, "digests": digests}})
    """)
    expect = [bytearray(-(-n // 16) * 16) for n in sizes]
    for b, dst, start, length in pieces:
        expect[b][dst : dst + length] = data[start : start + length]
    assert out["digests"] == [hashlib.sha256(bytes(e)).hexdigest() for e in expect]
    total = sum(p[3] for p in pieces)
    assert out["result"]["bytes"] == total and sum(out["steps"]) == total
    # pieces within 256 KiB of each other share a read; the 17 MiB piece takes two
    assert out["result"]["reads"] <= 7, out["result"]
    print(f"\nweight plan: {out['result']}, progress steps {out['steps']}")


def test_submit_before_prepare_and_uncaptured_errors(worker):
    """A kernel submitted while still compiling runs all the same (gpu.js compiles it at once); an
    asynchronous GPU error surfaces as GpuError from the next call."""
    x = np.arange(-8, 8, dtype=np.float32).reshape(1, 16) / 4
    out = worker.exec(f"""
        import wisp_gpu
        k = cache.get("gated_mul", GELU=False)  # created, not prepared
        inter = 8
        bg, (step, p, gate_up, y) = simple_bind_group(k)
        dev.write_buffer(step, 0, struct.pack(STEP_FORMAT, 1, 0, 1, 1))
        dev.write_buffer(p, 0, k.pack_params({{"inter": inter, "pad0": 0, "pad1": 0, "pad2": 0}}))
        dev.write_buffer(gate_up, 0, unb64("{enc(x)}"))
        dev.submit([Dispatch(k.handle, bg, (1, 1, 1))])
        early = b64(await dev.read_buffer(y, 0, 4 * inter))
        await dev.prepare()
        wisp_gpu._testFault("validation")   # an uncaptured validation error, as a real fault
        await dev.read_buffer(y, 0, 4)      # lets the error event arrive
        try:
            dev.create_buffer(16)
            uncaptured = None
        except GpuError as e:
            uncaptured = str(e)
        dev.create_buffer(16)               # reported once; the device goes on
        json.dumps({{"early": early, "uncaptured": uncaptured}})
    """)
    g, u = x[0, :8].astype(np.float64), x[0, 8:].astype(np.float64)
    np.testing.assert_allclose(f32(out["early"], (8,)), g / (1 + np.exp(-g)) * u, rtol=1e-5, atol=1e-6)
    assert out["uncaptured"] is not None and "GPUValidationError" in out["uncaptured"]


def test_messages_reach_the_python_entry_point(worker):
    """worker.js hands page messages to py_engine.web.worker.handle, which answers by id."""
    reply = worker.page.evaluate("""() => new Promise((resolve) => {
        const seen = wispTest.events.length;
        wispTest.post({type: "no-such-message", id: 77});
        const poll = () => {
            const hit = wispTest.events.slice(seen).find((e) => e.id === 77);
            hit ? resolve(hit) : setTimeout(poll, 20);
        };
        poll();
    })""")
    assert reply["type"] == "error" and "no-such-message" in reply["message"]


def test_ffi_cost(worker):
    """Per-call costs from Python in the worker: the best of 5 batches of 200 calls each (this
    machine is noisy), for a 32-dispatch submit, a 16-byte write and an empty FFI call."""
    out = worker.exec("""
        import js, wisp_gpu
        k = cache.get("gated_mul", GELU=False)
        await dev.prepare()
        bg, bufs = simple_bind_group(k)
        a = bufs[-1]
        cmds = [Dispatch(k.handle, bg, (0, 1, 1)) for _ in range(32)]   # empty grids: the host side only
        small, big = bytes(16), bytes(4 << 20)
        b = dev.create_buffer(len(big))
        n_ops = len(dev.encode(cmds)[0])
        # the baseline: the op list left in the shared array by dev.submit, resubmitted by JavaScript
        js_loop = js.eval("(gpu, n, count) => { for (let i = 0; i < count; i++) gpu.submitShared(n); }")
        calls = {
            "submit_us": lambda: dev.submit(cmds),
            "encode_us": lambda: dev.encode(cmds),
            "write_16b_us": lambda: dev.write_buffer(a, 0, small),
            "empty_call_us": lambda: wisp_gpu.destroyBindGroup(-1),
        }
        best = {}
        for _ in range(5):
            for name, call in calls.items():
                await dev.read_buffer(a, 0, 4)
                t = time.perf_counter()
                for _ in range(200):
                    call()
                best[name] = min(best.get(name, 1e9), (time.perf_counter() - t) / 200 * 1e6)
        for _ in range(5):
            dev.submit(cmds)  # writes share the array too: put the op list back
            await dev.read_buffer(a, 0, 4)
            t = time.perf_counter()
            js_loop(wisp_gpu, n_ops, 200)
            best["js_submit_us"] = min(best.get("js_submit_us", 1e9), (time.perf_counter() - t) / 200 * 1e6)
        t = time.perf_counter()
        for _ in range(50):
            await dev.read_buffer(a, 0, 4)
        best["read_4b_ms"] = (time.perf_counter() - t) / 50 * 1e3
        t = time.perf_counter()
        for _ in range(5):
            dev.write_buffer(b, 0, big)
        best["write_4mib_ms"] = (time.perf_counter() - t) / 5 * 1e3
        await dev.read_buffer(b, 0, 4)
        for x in bufs + [b]:
            dev.destroy_buffer(x)
        json.dumps(best)
    """)
    print(
        f"\nFFI cost: submit of 32 dispatches {out['submit_us']:.1f} us (of which Python encoding "
        f"{out['encode_us']:.1f} us; the same submit from JavaScript {out['js_submit_us']:.1f} us); write_buffer 16 B {out['write_16b_us']:.1f} us, 4 MiB "
        f"{out['write_4mib_ms']:.2f} ms; an empty FFI call {out['empty_call_us']:.1f} us; read_buffer of 4 bytes "
        f"{out['read_4b_ms']:.2f} ms"
    )
    assert out["submit_us"] < 5000


def test_device_loss(worker):
    out = worker.exec("""
        import wisp_gpu
        wisp_gpu._testFault("lose")
        import asyncio
        lost = None
        for _ in range(50):
            try:
                dev.create_buffer(16)
            except GpuError as e:
                lost = str(e)
                break
            await asyncio.sleep(0.02)
        dev = await open_device()   # a fresh device works again
        cache = KernelCache(dev)
        buf = dev.create_buffer(16)
        dev.write_buffer(buf, 0, b"0123456789abcdef")
        again = (await dev.read_buffer(buf, 0, 16)).decode()
        json.dumps({"lost": lost, "again": again})
    """)
    assert out["lost"] is not None and "lost" in out["lost"]
    assert out["again"] == "0123456789abcdef"
