"""The prefill matmul kernel alone, per weight format, at a Llama-3-8B layer's shapes: GPU time
and TFLOP/s for a few row counts. Prints one JSON object.

    python benchmarks/matmul_rate.py [--formats q4_0,f32] [--rows 128,512] [--precision fast|exact] [--int8-matmul]
        [--int8-matmul-levels 1|2]

Shapes are K x N of the fused q|k|v (4096 x 6144), o (4096 x 4096), fused gate|up (4096 x 28672)
and down (14336 x 4096) projections; "layer_us" sums them, "prefill_tok_s" is rows over 32 such
layers (the matmuls only: no attention, norms or LM head). Time is the GPU's own (timestamps
around each pass of one matrix's dispatches, after gemv_bandwidth.Timer.warm_up). A prefill of
more rows than the engine's chunk (128 by default) runs as several chunks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gemv_bandwidth import Timer, bind, upload_matrices  # noqa: E402

from py_engine.gpu.wgpu_host import open_wgpu_device  # noqa: E402
from py_engine.runtime import linear_plan  # noqa: E402
from py_engine.runtime.kernels import KernelCache  # noqa: E402
from py_engine.runtime.linear_plan import (  # noqa: E402
    linear_defines,
    linear_grid,
    linear_params,
    matmul_kernel,
    matmul_tile,
)

LAYER_SHAPES = [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096)]
LAYERS = 32


def matmul_time(
    device, cache, timer, fmt: str, K: int, N: int, rows: int, copies: list, precision: str, int8_tier: bool
) -> float:
    """Median GPU seconds of one K x N matmul over `rows` activation rows (the int8 one without its
    quantize_rows dispatch)."""
    x = device.create_buffer(4 * K * rows)
    device.write_buffer(x, 0, np.random.default_rng(0).standard_normal(K * rows, dtype=np.float32).tobytes())
    y = device.create_buffer(4 * N * rows)
    dummy = device.create_buffer(16)
    # matmul_int8's inputs as quantize_rows leaves them (its own time is not counted): zeros, whose
    # arithmetic costs what any values do.
    xq, xs = device.create_buffer(2 * K * rows), device.create_buffer(4 * rows * (2 * (K // 32) + 1))
    passes = []
    for shards in copies:
        dispatches = []
        for start, count, w in shards:
            defines = linear_defines(K, count, fmt, 64, precision=precision)
            if int8_tier:
                defines["Q8_MATMUL"] = True
            kernel = cache.get(matmul_kernel(defines), **defines)
            params = linear_params(K, count, out_stride=N, out_offset=start, rows=rows)
            inputs = {"x": xq, "norm": xs} if defines["Q8_MATMUL"] else {"x": x, "norm": dummy}
            group = bind(device, kernel, {**inputs, "w": w, "bias": dummy, "residual": dummy, "y": y}, params)
            dispatches.append(
                (
                    kernel.handle.pipeline,
                    group,
                    linear_grid("matmul", rows, count, matmul_per_group=matmul_tile(defines)),
                )
            )
        passes.append(dispatches)
    batch = (passes * 8)[: timer.count // 2]
    timer.warm_up(batch)
    return min(statistics.median(timer.run(batch)) for _ in range(3))


async def measure(args) -> dict:
    if args.int8_matmul_levels:
        linear_plan.INT8_MATMUL_LEVELS = args.int8_matmul_levels
    device = await open_wgpu_device(limits="default", extra_features=("timestamp-query",))
    cache = KernelCache(device)
    timer = Timer(device, 256)
    noise = np.random.default_rng(0).integers(0, 1 << 32, (64 << 20) // 4, dtype=np.uint32) & np.uint32(0x3BFF3BFF)
    rows_list = [int(r) for r in args.rows.split(",")]
    results, layer = [], {}
    for fmt in args.formats.split(","):
        for K, N in LAYER_SHAPES:
            # Two copies: a matmul re-reads its weights per row tile, so cache misses do not matter.
            copies, _ = upload_matrices(device, fmt, K, N, noise, rotate_bytes=0)
            for rows in rows_list:
                seconds = matmul_time(device, cache, timer, fmt, K, N, rows, copies, args.precision, args.int8_matmul)
                layer[(fmt, rows)] = layer.get((fmt, rows), 0.0) + seconds
                r = {
                    "format": fmt,
                    "rows": rows,
                    "K": K,
                    "N": N,
                    "us": round(seconds * 1e6, 1),
                    "tflops": round(2 * rows * K * N / seconds / 1e12, 2),
                }
                results.append(r)
                print(json.dumps(r), file=sys.stderr)
            for shards in copies:
                for _, _, w in shards:
                    w.destroy()
    layers = [
        {"format": f, "rows": r, "layer_us": round(t * 1e6, 1), "prefill_tok_s": round(r / (LAYERS * t))}
        for (f, r), t in layer.items()
    ]
    return {
        "adapter": device.caps.adapter,
        "precision": args.precision,
        "int8_matmul": args.int8_matmul,
        "int8_matmul_levels": linear_plan.INT8_MATMUL_LEVELS,
        "matmul": results,
        "layers": layers,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--formats", default="q4_0")
    parser.add_argument("--rows", default="128,512")
    parser.add_argument("--precision", default="fast", help="the engine's choice of matmul for each format")
    parser.add_argument(
        "--int8-matmul",
        action="store_true",
        help="shaders/matmul_int8.wgsl, whatever the row length (INT8_MATMUL_FORMATS)",
    )
    parser.add_argument("--int8-matmul-levels", type=int, choices=(1, 2), help="override INT8_MATMUL_LEVELS")
    print(json.dumps(asyncio.run(measure(parser.parse_args()))))


if __name__ == "__main__":
    main()
