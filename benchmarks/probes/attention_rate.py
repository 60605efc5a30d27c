"""One layer's attention kernel alone at a model's shape after a depth of cached keys: a prompt
forward's (attention_tiled.wgsl) or a decode token's (attention.wgsl, --rows up to
attention_grid.FEW_ROWS), or a variant of either in shaders/. GPU time per dispatch, TFLOP/s and
the cache's GB/s. Prints one JSON object.

    python benchmarks/probes/attention_rate.py [--shapes 8b,smollm2,gemma3] [--rows 512] [--depth 4000]
        [--splits-most N] [--variant "KERNEL [NAME=VALUE ...]" ...]

The caches hold random keys and values in the engine's formats for a quantized model (K f32, V f16).
Splits as the engine's (attention_ops.attention_splits over depth + rows keys, at most
attention_grid.tiled_splits_most for a prompt, FEW_ROWS_SPLITS for a decode token), or at most
--splits-most. A decode token's kernel runs as the engine's (ROPE_KV: it rotates q and the new key
itself, GROUP_HEADS), timed as 32 dispatches in a pass (a model's layers, back to back) and divided:
a lone dispatch's time is mostly its pass's. TFLOP/s counts the causal (query, key) pairs' 4 *
head_dim flops (QK^T and PV), kv_gb_s the caches' bytes. Time is the GPU's own
(gemv_bandwidth.Timer). The merge of the splits (attention_combine.wgsl) is not counted. A
--variant names a kernel in shaders/ and its defines (a ROWS_PER_SLOT define scales a prompt grid's
row blocks, SLOTS_SET sets its slots a workgroup); the default is the kernel the engine runs under
precision exact ("attention_tiled F16_MATH=true ATT_MATH=f16" is fast's on a device with shader-f16;
"attention_subgroups HEAD_DIM=128 WARPS=4" the 8B's decode kernel on subgroups of 32 or more,
attention_grid.few_rows_kernel). NAME=none drops a define. Each
result's max_diff is the largest difference of its per-split outputs (Σ exp(s - m) v / Σ exp(s - m))
from the first variant's at the same shape: a variant's time counts only where it computes the same
thing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from gemv_bandwidth import Timer  # noqa: E402

from py_engine.gpu.wgpu_host import open_wgpu_device  # noqa: E402
from py_engine.models.attention_grid import (  # noqa: E402
    FEW_ROWS,
    FEW_ROWS_SPLITS,
    attention_grid,
    group_heads,
    tiled_block,
    tiled_defines,
    tiled_splits_most,
    wide_heads,
)
from py_engine.models.attention_ops import attention_splits  # noqa: E402
from py_engine.runtime.graph import ceil_div  # noqa: E402
from py_engine.runtime.kernels import STEP_FORMAT, KernelCache  # noqa: E402

# name: (q heads, KV heads, head_dim, the engine's max_rows); e2b: Gemma 4 E2B's full layers
SHAPES = {"8b": (32, 8, 128, 512), "smollm2": (9, 3, 64, 512), "gemma3": (4, 1, 256, 512), "e2b": (8, 1, 512, 512)}


def parse_define(text: str):
    name, _, value = text.partition("=")
    if value in ("true", "false"):
        return name, value == "true"
    return name, int(value) if value.isdigit() else value


def attention_time(device, cache, timer, shape, rows, depth, kernel_name, defines, rows_per_slot, most) -> dict:
    nh, nkv, hd, max_rows = SHAPES[shape]
    keys = depth + rows
    few = rows <= FEW_ROWS  # a decode token's forward: attention.wgsl, rotating q and the new key itself
    split_len, splits = attention_splits(
        keys, most or (FEW_ROWS_SPLITS if few else tiled_splits_most(max_rows, nh, hd))
    )
    rng = np.random.default_rng(0)
    stride = (nh + 2 * nkv) * hd
    buffers = {
        "qkv": rng.standard_normal(rows * stride, dtype=np.float32),
        "k_cache": rng.standard_normal(nkv * keys * hd, dtype=np.float32),
        "v_cache": rng.standard_normal(nkv * keys * hd, dtype=np.float32).astype(np.float16),
        "partials": np.zeros(rows * nh * splits * (hd + 2), np.float32),
        "cos_sin": np.tile(np.array([1.0, 0.0], np.float32), rows * hd // 2),  # RoPE by angle 0
        "q_norm": np.zeros(4, np.float32),
        "k_norm": np.zeros(4, np.float32),
    }
    all_defines = {"K_CACHE": "f32", "V_CACHE": "f16", "RING": False, "ROPE_KV": few, **tiled_defines(hd)}
    if few:
        all_defines["GROUP_HEADS"] = group_heads(nh, nkv, hd)
        all_defines["WIDE_HEADS"] = wide_heads(hd)  # attention.wgsl's
    all_defines.update(defines)
    all_defines = {k: v for k, v in all_defines.items() if v != "none"}  # NAME=none drops a define
    kernel = cache.get(kernel_name, **all_defines)
    params = {
        "n_heads": nh, "n_kv_heads": nkv, "head_dim": hd, "q_stride": stride, "capacity": keys, "window": 0,
        "scale": hd**-0.5, "softcap": 0.0, "split_len": split_len, "splits": splits, "rotary_dim": hd,
        "has_qk_norm": 0, "interleaved": 0, "eps": 1e-6, "norm_offset": 0.0, "partials_at": 0,
        "q_head_stride": hd, "tiled_split_len": split_len, "tiled_splits": splits, "has_v_norm": 0,
        "owns_kv": 1, "pad0": 0, "pad1": 0, "pad2": 0,
    }  # fmt: skip
    resources, partials = [], None
    for b in kernel.bindings:
        if b.name == "step":
            data = struct.pack(STEP_FORMAT, rows, depth, keys, 1)
            buf = device.create_buffer(len(data), "uniform")
        elif b.name == "p":
            data = kernel.pack_params(params)
            buf = device.create_buffer(len(data), "uniform")
        else:
            data = buffers[b.name].tobytes()
            buf = device.create_buffer(len(data))
            if b.name == "partials":
                partials = buf
        device.write_buffer(buf, 0, data)
        resources.append((buf, 0, buf.size))
    group = device.create_bind_group(kernel.handle, resources)
    if few:
        grid = attention_grid(rows, nh, nkv, hd, splits)
    else:
        heads, block_rows = tiled_block(nh, nkv, hd)
        if "SLOTS_SET" in defines:  # a variant's own slots a workgroup
            heads = min(nh // nkv, defines["SLOTS_SET"])
            block_rows = defines["SLOTS_SET"] // heads
        grid = (nkv * ceil_div(nh // nkv, heads), ceil_div(rows, block_rows * rows_per_slot), splits)
    # A decode token's: a pass of 32 dispatches (a model's layers, back to back), per dispatch.
    per_pass = 32 if few else 1
    batch = [[(kernel.handle.pipeline, group, grid)] * per_pass] * 16
    timer.warm_up(batch)
    seconds = min(statistics.median(timer.run(batch)) for _ in range(3)) / per_pass
    pairs = nh * sum(depth + r + 1 for r in range(rows))
    return partials, {
        "shape": shape,
        "kernel": kernel_name,
        "defines": defines,
        "rows": rows,
        "depth": depth,
        "splits": splits,
        "ms": round(seconds * 1e3, 4),
        "kv_gb_s": round(nkv * keys * hd * 6 / seconds / 1e9, 1),
        "tflops": round(4 * hd * pairs / seconds / 1e12, 2),
    }


async def measure(args) -> dict:
    device = await open_wgpu_device(limits="default", extra_features=("timestamp-query",))
    cache = KernelCache(device)
    timer = Timer(device, 64)
    results, first = [], {}
    for variant in args.variant or ["attention" if args.rows <= FEW_ROWS else "attention_tiled"]:
        kernel, *words = variant.split()
        defines = dict(parse_define(w) for w in words)
        for shape in args.shapes.split(","):
            rows_per_slot = defines.get("ROWS_PER_SLOT", 1)
            partials, r = attention_time(
                device, cache, timer, shape, args.rows, args.depth, kernel, defines, rows_per_slot, args.splits_most
            )
            out = np.frombuffer(await device.read_buffer(partials, 0, partials.size), np.float32)
            width = SHAPES[shape][2] + 2
            out = out[: out.size // width * width].reshape(-1, width)  # the buffer's size is padded to 16 bytes
            live = out[:, -1] > 0  # splits with keys for their row
            merged = np.where(live[:, None], out[:, :-2] / np.where(live, out[:, -1], 1)[:, None], 0)
            first.setdefault(shape, merged)
            r["max_diff"] = float(np.abs(merged - first[shape]).max())
            print(json.dumps(r), file=sys.stderr)
            results.append(r)
    return {"adapter": device.caps.adapter, "subgroups": device.caps.subgroups, "attention": results}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="8b,smollm2")
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--depth", type=int, default=4000)
    parser.add_argument("--splits-most", type=int, help="at most this many splits (default: the engine's)")
    parser.add_argument("--variant", action="append", help='"KERNEL NAME=VALUE ...": a kernel and its defines')
    print(json.dumps(asyncio.run(measure(parser.parse_args()))))


if __name__ == "__main__":
    main()
