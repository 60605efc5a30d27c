"""The GEMV kernel alone, per weight format, as GB/s of weights read and as a fraction of a plain
copy kernel measured in the same run. Prints one JSON object.

    python benchmarks/gemv_bandwidth.py [--formats q4_0,q6_k,...] [--shapes 4096x14336,14336x4096]
                                        [--layouts 32.8.1.2,64.4.4.1] [--limits default|adapter] [--no-subgroups] [--fuse norm,gated]
                                        [--precision exact|fast|exact,fast]

A shape is KxN (K inputs, N outputs). Each measurement rotates over enough copies of the matrix
(> 512 MB) that no dispatch finds its weights in the GPU's cache, sharded by the storage binding
limit as the engine does. Time is the GPU's own (timestamp queries around each compute pass of
one matrix's dispatches; "wall_gb_s": the host's clock over all of them in one pass): "gb_s" counts the weight bytes read; "of_copy" divides it by the copy
kernel's bytes moved (read + written) per second. --layouts sweeps gemv.wgsl's thread layouts
(LANES.SLOTS.RPT.STEP); the engine's own choice (linear_plan.gemv_layout) is measured by default.
Every measurement first keeps the GPU busy for 0.2 s (Timer.warm_up): without it, every format
after the first read 3-4x slow, measured at the clocks the GPU had dropped to during the upload.
--precision exact,fast times each block format both ways ("fast": int8 activations, gemv.wgsl
Q8_ACT, for the formats in linear_plan.INT8_FORMATS; a float format only once, exact): the
numbers that decide which formats stay in INT8_FORMATS.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import wgpu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_engine.gpu.wgpu_host import open_wgpu_device  # noqa: E402
from py_engine.runtime.kernels import Kernel, KernelCache  # noqa: E402
from py_engine.runtime.linear_plan import (  # noqa: E402
    PRECISIONS,
    gemv_features,
    gemv_layout,
    int8_activations,
    linear_defines,
    linear_grid,
    linear_params,
    q8_row_bytes,
    quantize_spread_grid,
)
from py_engine.runtime.quant import FORMATS  # noqa: E402

ALL_FORMATS = [
    "f32",
    "f16",
    "f16_packed",
    "bf16",
    "q8_0",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "q4_k",
    "q5_k",
    "q6_k",
    "mlx4_f16",
]
ROTATE_BYTES = 512 << 20
COPY_SOURCE = """
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 256u;
    if (i < arrayLength(&src)) { dst[i] = src[i]; }
}
"""
READ_SOURCE = """
@group(0) @binding(0) var<storage, read> src: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<u32>>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = 4u * (gid.x + gid.y * groups.x * 256u);
    let v = (src[i] ^ src[i + 1u]) ^ (src[i + 2u] ^ src[i + 3u]);
    if (v.x == 0x12345678u) { dst[0] = v; }  // never taken: keeps the loads
}
"""


class Timer:
    """GPU time of compute passes, from timestamp queries written at each pass's start and end."""

    def __init__(self, device, passes: int):
        self.raw = device.device
        self.count = 2 * passes
        self.queries = self.raw.create_query_set(type="timestamp", count=self.count)
        self.resolved = self.raw.create_buffer(
            size=8 * self.count, usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC
        )

    def wall(self, passes: list[list[tuple]]) -> float:
        """Seconds per pass, by the host's clock, with every dispatch in one compute pass."""
        encoder = self.raw.create_command_encoder()
        compute = encoder.begin_compute_pass()
        for dispatches in passes:
            for pipeline, bind_group, grid in dispatches:
                compute.set_pipeline(pipeline)
                compute.set_bind_group(0, bind_group)
                compute.dispatch_workgroups(*grid)
        compute.end()
        start = time.perf_counter()
        self.raw.queue.submit([encoder.finish()])
        self.raw.queue.read_buffer(self.resolved, 0, 8)
        return (time.perf_counter() - start) / len(passes)

    def warm_up(self, passes: list[list[tuple]], seconds: float = 0.2) -> None:
        """Keep the GPU busy with these passes for `seconds`: its clocks drop while the host
        uploads the next matrices (an H100 idled to 555 MHz from 1980 MHz in about a second) and
        take longer than one measurement to come back, which read 3-4x slow."""
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self.wall(passes)

    def run(self, passes: list[list[tuple]]) -> list[float]:
        """passes: each a list of (pipeline, bind group, grid). Returns each pass's seconds."""
        encoder = self.raw.create_command_encoder()
        for i, dispatches in enumerate(passes):
            compute = encoder.begin_compute_pass(
                timestamp_writes={
                    "query_set": self.queries,
                    "beginning_of_pass_write_index": 2 * i,
                    "end_of_pass_write_index": 2 * i + 1,
                }
            )
            for pipeline, bind_group, grid in dispatches:
                compute.set_pipeline(pipeline)
                compute.set_bind_group(0, bind_group)
                compute.dispatch_workgroups(*grid)
            compute.end()
        encoder.resolve_query_set(self.queries, 0, 2 * len(passes), self.resolved, 0)
        self.raw.queue.submit([encoder.finish()])
        ticks = np.frombuffer(self.raw.queue.read_buffer(self.resolved, 0, 16 * len(passes)), np.uint64)
        return [float(ticks[2 * i + 1] - ticks[2 * i]) * 1e-9 for i in range(len(passes))]


def bind(device, kernel: Kernel, buffers: dict, params: dict | None = None):
    resources = []
    for b in kernel.bindings:
        if b.name == "p":
            data = kernel.pack_params(params)
            buf = device.create_buffer(len(data), "uniform")
            device.write_buffer(buf, 0, data)
        elif b.name == "step":
            buf = device.create_buffer(16, "uniform")
            device.write_buffer(buf, 0, np.array([1, 0, 1, 0], np.uint32).tobytes())
        else:
            buf = buffers[b.name]
        resources.append((buf, 0, buf.size))
    return device.create_bind_group(kernel.handle, resources)


def copy_bandwidth(device, timer: Timer, repeats: int, read_only: bool = False) -> float:
    """Bytes moved (read + written) per second by a plain vec4 copy of 128 MiB buffers; or, with
    read_only, bytes read per second by a kernel that reads four vec4 per thread and writes nothing."""
    size = min(128 << 20, device.caps.limits.max_storage_binding)
    kernel = device.create_kernel("copy", READ_SOURCE if read_only else COPY_SOURCE, _copy_bindings())
    pairs = [(device.create_buffer(size), device.create_buffer(size)) for _ in range(max(2, ROTATE_BYTES // size))]
    groups = size // 16 // 256 // (4 if read_only else 1)
    grid = (min(groups, 65535), -(-groups // 65535), 1)
    dispatches = [
        [(kernel.pipeline, device.create_bind_group(kernel, [(s, 0, size), (d, 0, size)]), grid)] for s, d in pairs
    ]
    batch = (dispatches * repeats)[: timer.count // 2]
    timer.warm_up(batch)
    return (1 if read_only else 2) * size / min(statistics.median(timer.run(batch)) for _ in range(2))


def _copy_bindings():
    from py_engine.gpu import Binding

    return [Binding(0, "src", "read"), Binding(1, "dst", "rw")]


def upload_matrices(
    device, fmt: str, K: int, N: int, noise: np.ndarray, rotate_bytes: int = ROTATE_BYTES
) -> tuple[list, int]:
    """Copies (at least two, together over rotate_bytes) of a random K x N matrix of this format,
    each a list of (first row, rows, buffer) shards of at most one storage binding; and the
    matrix's bytes."""
    info = FORMATS[fmt]
    row_bytes = info.matrix_bytes(1, K, 64)
    per_shard = max(1, device.caps.limits.max_storage_binding // row_bytes)
    matrix_bytes = info.matrix_bytes(N, K, 64)
    copies = []
    for c in range(max(2, -(-rotate_bytes // matrix_bytes))):
        shards = []
        for start in range(0, N, per_shard):
            count = min(per_shard, N - start)
            nbytes = -(-info.matrix_bytes(count, K, 64) // 16) * 16
            w = device.create_buffer(nbytes)
            offset = (c * 4099 * 16) % (noise.nbytes - nbytes) // 16 * 16 if noise.nbytes > nbytes else 0
            device.write_buffer(w, 0, noise.view(np.uint8)[offset : offset + nbytes])
            shards.append((start, count, w))
        copies.append(shards)
    return copies, matrix_bytes


def gemv_bandwidth(
    device,
    cache: KernelCache,
    timer: Timer,
    fmt: str,
    K: int,
    N: int,
    copies: list,
    matrix_bytes: int,
    layout: dict,
    repeats: int,
    kernel_name: str = "gemv",
    fused: dict | None = None,
    precision: str = "exact",
) -> dict:
    """fused: linear_defines' norm / gated (the RMSNorm and the gated activation inside the GEMV);
    precision: linear_defines'."""
    fused = fused or {}
    gated = fused.get("gated", False)
    x = device.create_buffer(4 * K)
    device.write_buffer(x, 0, np.random.default_rng(0).standard_normal(K, dtype=np.float32).tobytes())
    norm = device.create_buffer(4 * K)
    device.write_buffer(norm, 0, np.ones(K, np.float32).tobytes())
    y = device.create_buffer(4 * N)
    dummy = device.create_buffer(16)
    quantize = []  # Q8_INPUT: quantize_rows' dispatch (SPREAD), which makes the GEMV's x (one q8 row)
    if layout.get("Q8_INPUT"):
        xq = device.create_buffer(q8_row_bytes(K))
        kernel = cache.get("quantize_rows", X_LEVELS=2, SPREAD=True)
        params = {"K": K, "has_norm": int(fused.get("norm", False)), "norm_eps": 1e-5, "norm_offset": 0.0}
        bg = bind(device, kernel, {"x": x, "norm": norm, "xq": xq}, params)
        quantize = [(kernel.handle.pipeline, bg, quantize_spread_grid(K, 1))]
        timer.run([quantize])  # once before the GEMV's own timing
        x = xq
    passes = []
    for shards in copies:
        dispatches = []
        for start, count, w in shards:
            defines = {**linear_defines(K, count, fmt, 64, precision=precision, **fused), **layout}
            name = defines.pop("kernel", kernel_name)
            kernel = cache.get(name, **defines)
            params = linear_params(K, count, out_stride=N // 2 if gated else N, out_offset=start, rows=1, norm_eps=1e-5)
            bg = bind(device, kernel, {"x": x, "w": w, "bias": dummy, "residual": dummy, "norm": norm, "y": y}, params)
            grid = linear_grid(
                "gemv", 1, count, device.caps.limits.max_workgroups_per_dim, gemv_features(defines), gated
            )
            dispatches.append((kernel.handle.pipeline, bg, grid))
        passes.append(dispatches)
    result = timed(timer, passes, matrix_bytes, repeats)
    if quantize:
        result["us_with_quantize"] = timed(timer, [quantize + d for d in passes], matrix_bytes, repeats)["us"]
        result["us_quantize"] = timed(timer, [quantize], matrix_bytes, repeats)["us"]
    return result


def timed(timer: Timer, passes: list, nbytes: int, repeats: int) -> dict:
    batch = (passes * repeats)[: timer.count // 2]
    timer.warm_up(batch)
    seconds = min(statistics.median(timer.run(batch)) for _ in range(2))
    wall = min(timer.wall(batch) for _ in range(2))
    return {
        "us": round(seconds * 1e6, 1),
        "gb_s": round(nbytes / seconds / 1e9, 1),
        "wall_gb_s": round(nbytes / wall / 1e9, 1),
    }


def read_matrix(device, timer: Timer, copies: list, matrix_bytes: int, repeats: int) -> dict:
    """The read-only kernel over the matrix's own buffers: the floor one pass of this size sets
    (launch, ramp-up, tail) at the memory's full speed."""
    kernel = device.create_kernel("read", READ_SOURCE, _copy_bindings())
    dummy = device.create_buffer(64)
    passes = []
    for shards in copies:
        dispatches = []
        for _, _, w in shards:
            groups = w.size // 16 // 256 // 4
            grid = (min(groups, 65535), -(-groups // 65535), 1)
            dispatches.append(
                (kernel.pipeline, device.create_bind_group(kernel, [(w, 0, groups * 256 * 64), (dummy, 0, 64)]), grid)
            )
        passes.append(dispatches)
    return timed(timer, passes, matrix_bytes, repeats)


async def measure(args) -> dict:
    device = await open_wgpu_device(
        limits=args.limits, allow_subgroups=not args.no_subgroups, extra_features=("timestamp-query",)
    )
    cache = KernelCache(device)
    timer = Timer(device, 256)
    copy = copy_bandwidth(device, timer, args.repeats)
    read = copy_bandwidth(device, timer, args.repeats, read_only=True)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    layouts = (
        [dict(zip(("LANES", "SLOTS", "RPT", "STEP"), map(int, s.split(".")))) for s in args.layouts.split(",")]
        if args.layouts
        else [None]
    )
    variants = json.loads(args.variants) if args.variants else []
    # Finite 16-bit fields whatever the format: every half is below 2 in magnitude.
    noise = np.random.default_rng(0).integers(0, 1 << 32, (256 << 20) // 4, dtype=np.uint32) & np.uint32(0x3BFF3BFF)
    fused = {"norm": "norm" in args.fuse, "gated": "gated" in args.fuse}
    precisions = args.precision.split(",")
    if not set(precisions) <= set(PRECISIONS):
        raise SystemExit(f"--precision: {args.precision!r}: a comma-separated list of {', '.join(PRECISIONS)}")
    results = []
    for fmt in args.formats.split(","):
        if fmt == "f16" and not device.caps.shader_f16:
            continue
        for K, N in shapes:
            copies, matrix_bytes = upload_matrices(device, fmt, K, N, noise)
            if args.read_floor:
                r = read_matrix(device, timer, copies, matrix_bytes, args.repeats)
                r.update(format=fmt, K=K, N=N, layout="read", of_copy=round(r["gb_s"] * 1e9 / copy, 3))
                results.append(r)
                print(json.dumps(r), file=sys.stderr)
            for layout in layouts + [v for v in variants if v.get("K", K) == K and v.get("format", fmt) == fmt]:
                layout = {k: v for k, v in (layout or {}).items() if k not in ("K", "format")}
                for precision in precisions:
                    if precision == "fast" and not int8_activations(fmt, precision):
                        continue  # runs exact: measured once
                    chosen = layout or gemv_layout(K, N, fmt, fused["gated"], int8=int8_activations(fmt, precision))
                    try:
                        r = gemv_bandwidth(
                            device,
                            cache,
                            timer,
                            fmt,
                            K,
                            N,
                            copies,
                            matrix_bytes,
                            chosen,
                            args.repeats,
                            args.kernel,
                            fused,
                            precision,
                        )
                    except Exception as e:  # a variant that does not compile or fit: say so, go on
                        r = {"error": str(e).splitlines()[-1][:200]}
                    r.update(
                        format=fmt,
                        precision=precision,
                        K=K,
                        N=N,
                        layout=".".join(f"{k}{v}" for k, v in chosen.items() if k not in ("X_SUMS",)),
                        of_copy=round(r.get("gb_s", 0) * 1e9 / copy, 3),
                    )
                    results.append(r)
                    print(json.dumps(r), file=sys.stderr)
            for shards in copies:
                for _, _, w in shards:
                    w.destroy()
    return {
        "adapter": device.caps.adapter,
        "subgroups": device.caps.subgroups,
        "limits": args.limits,
        "fuse": args.fuse,
        "copy_gb_s": round(copy / 1e9, 1),
        "read_gb_s": round(read / 1e9, 1),
        "gemv": results,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--formats", default=",".join(ALL_FORMATS))
    parser.add_argument("--shapes", default="4096x14336,14336x4096")
    parser.add_argument("--layouts", default="")
    parser.add_argument("--limits", choices=["default", "adapter"], default="default")
    parser.add_argument("--no-subgroups", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--kernel", default="gemv", help="a variant of shaders/gemv.wgsl (a path relative to shaders/)")
    parser.add_argument(
        "--variants",
        default="",
        help="JSON list of define sets measured after the layouts, e.g. "
        '[{"kernel": "gemv_xs", "LANES": 128, "SLOTS": 2, "RPT": 4, "ITERS": 4, "UPT": 1, "K": 4096}] '
        '(optional "K" / "format": only for that shape / format)',
    )
    parser.add_argument("--read-floor", action="store_true", help="also time the read-only kernel over each matrix")
    parser.add_argument(
        "--precision", default="exact", help="exact, fast or exact,fast: the GEMV's arithmetic (fast: int8 activations)"
    )
    parser.add_argument(
        "--fuse",
        default="",
        help="norm, gated or norm,gated: the GEMV with the RMSNorm and/or "
        "the gated activation inside (N rows = gate | up)",
    )
    print(json.dumps(asyncio.run(measure(parser.parse_args()))))


if __name__ == "__main__":
    main()
