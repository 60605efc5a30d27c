"""Run one kernel on numpy arrays: the kernel unit tests' bridge to the GPU."""

from __future__ import annotations

import asyncio
import struct

import numpy as np

from py_engine.gpu import Dispatch, open_device
from py_engine.models import attention_grid
from py_engine.runtime.kernels import STEP_FORMAT, KernelCache
from py_engine.runtime.linear_plan import q8_row_bytes, quantize_spread_grid

_devices = {}


def device(f16: bool = True, subgroups: bool = True):
    """One device per (f16, subgroups) setting for the whole test session."""
    key = (f16, subgroups)
    if key not in _devices:
        dev = asyncio.run(open_device(allow_f16=f16, allow_subgroups=subgroups))
        _devices[key] = (dev, KernelCache(dev))
    return _devices[key]


def run_kernel(
    name,
    buffers: dict,
    params: dict | None = None,
    grid=(1, 1, 1),
    step=(1, 0, 1),
    defines: dict | None = None,
    f16: bool = True,
    read: list[str] | None = None,
    subgroups: bool = True,
) -> dict:
    """buffers: binding name → numpy array (uploaded as raw bytes) or int (zeroed byte size).
    Returns the read_write buffers (or those named in `read`) as raw bytes. subgroups=False
    opens a device without them (the workgroup-memory reductions)."""
    dev, cache = device(f16, subgroups)
    kernel = cache.get(name, **(defines or {}))
    resources, handles = [], {}
    for b in kernel.bindings:
        if b.name == "step":
            data = struct.pack(STEP_FORMAT, *step, *(1,)[len(step) - 3 :])  # logit_rows: 1 unless given
            buf = dev.create_buffer(len(data), "uniform")
        elif b.name == "p":
            data = kernel.pack_params(params or {})
            buf = dev.create_buffer(len(data), "uniform")
        else:
            value = buffers[b.name]
            data = None if isinstance(value, int) else np.ascontiguousarray(value).tobytes()
            size = value if data is None else len(data)
            buf = dev.create_buffer(size)
            if data is None:
                data = bytes((size + 15) // 16 * 16)
        if data is not None:
            padded = data + bytes(-len(data) % 4)
            dev.write_buffer(buf, 0, padded)
        handles[b.name] = (buf, len(data) if data is not None else buf.size)
        resources.append((buf, 0, buf.size))
    dev.submit([Dispatch(kernel.handle, dev.create_bind_group(kernel.handle, resources), tuple(grid))])
    names = read or [b.name for b in kernel.bindings if b.kind == "rw"]
    out = {}
    for n in names:
        buf, size = handles[n]
        out[n] = asyncio.run(dev.read_buffer(buf, 0, size))
    return out


def as_f32(raw: bytes, shape) -> np.ndarray:
    n = int(np.prod(shape))
    return np.frombuffer(raw, dtype=np.float32, count=n).reshape(shape)


def repacked(raw: np.ndarray, fmt: str, f16: bool = True) -> np.ndarray:
    """raw weight bytes as the kernels read them: repacked on the GPU by shaders/repack.wgsl,
    as the uploader does (py_engine/runtime/weights.py), for formats that have a repack."""
    from py_engine.runtime.quant import FORMATS
    from py_engine.runtime.weights import repack_params

    info = FORMATS[fmt]
    if not info.repack:
        return raw
    params, grid = repack_params(fmt, raw.size // info.block_bytes)
    out = run_kernel("repack", {"w": raw}, params, grid=grid, f16=f16)
    return np.frombuffer(out["w"], np.uint8, count=raw.size)


def run_combine(
    partials: np.ndarray, *, rows: int, nh: int, hd: int, splits: int, split_len: int, step=(1, 0, 1)
) -> np.ndarray:
    """attention_combine.wgsl over attention.wgsl's or attention_tiled.wgsl's partials (written
    from element 0, `splits` of split_len keys): the attention output [rows, nh, hd]. The kernel's
    one tensor holds the output, then the partials."""
    out_elems = rows * nh * hd
    attn = np.concatenate([np.zeros(out_elems, np.float32), partials.astype(np.float32)])
    out = run_kernel(
        "attention_combine",
        {"attn": attn, "gate": np.zeros(4, np.float32)},
        {"n_heads": nh, "head_dim": hd, "splits": splits, "partials_at": out_elems}
        | {"gate_stride": 0, "gate_head_stride": 0, "gate_offset": 0, "split_len": split_len}
        | {"tiled_splits": splits, "tiled_split_len": split_len, "pad0": 0, "pad1": 0},
        grid=(nh, rows, 1),
        step=step,
        defines={"FEW_ROWS": attention_grid.FEW_ROWS},
    )
    return as_f32(out["attn"][: out_elems * 4], (rows, nh, hd))


async def collect(tokens, limit: int | None = None) -> list[int]:
    """An answer generator's tokens; with `limit`, close it after that many (a cancel)."""
    out = []
    async for t in tokens:
        out.append(t)
        if limit is not None and len(out) == limit:
            await tokens.aclose()
            break
    return out


def attend(
    qkv,
    k_cache,
    v_cache,
    rope_params,
    rows,
    pos,
    window,
    defines,
    subgroups=True,
    cos_sin=None,
    qn=None,
    kn=None,
    *,
    scale=None,
    softcap=0.0,
    split_len=64,
    ring=False,
    kernel="attention",
):
    """attention + attention_combine over `rows` rows from position pos: y [rows, heads, hd], the
    partials and the caches after it. cos_sin given: ROPE_KV (one row; qkv not yet rotated, the
    row's k/v not yet cached; rope_params' has_v_norm and owns_kv, default 0 and 1, as rope_kv's).
    scale: head_dim ** -0.5 unless given. ring: the caches' capacity rows are a sliding layer's
    ring (RING: position k at row k % capacity). kernel: a few rows' kernel, attention.wgsl or
    attention_subgroups.wgsl (run without subgroups: its lanes' exchanges through workgroup
    memory, the arithmetic of 32-wide subgroups)."""
    p = rope_params
    nh, hd, cap = p["n_heads"], p["head_dim"], p["capacity"]
    splits = -(-cap // split_len)  # several splits once pos > split_len
    k_dtype, v_dtype = k_cache.dtype, v_cache.dtype
    dummy = np.zeros(4, np.float32)
    fused = cos_sin is not None
    few = rows <= attention_grid.FEW_ROWS  # else the prompt's kernel, attention_tiled.wgsl
    own = {"WIDE_HEADS": attention_grid.wide_heads(hd)}  # attention.wgsl's
    if kernel == "attention_subgroups":
        own = {"HEAD_DIM": hd, "WARPS": attention_grid.subgroup_warps(hd)}
        subgroups = False
    out = run_kernel(
        kernel if few else "attention_tiled",
        {
            "qkv": qkv,
            "k_cache": k_cache,
            "v_cache": v_cache,
            "partials": rows * nh * splits * (hd + 2) * 4,
            "cos_sin": cos_sin if fused else dummy,
            "q_norm": qn if fused else dummy,
            "k_norm": kn if fused else dummy,
        },
        {
            "n_heads": nh,
            "n_kv_heads": p["n_kv_heads"],
            "head_dim": hd,
            "q_stride": p["qkv_stride"],
            "capacity": cap,
            "window": window,
            "scale": hd**-0.5 if scale is None else scale,
            "softcap": softcap,
            "split_len": split_len,
            "splits": splits,
            "rotary_dim": p["rotary_dim"],
            "has_qk_norm": p["has_qk_norm"],
            "interleaved": p["interleaved"],
            "eps": p["eps"],
            "norm_offset": 0.0,
            "partials_at": 0,
            "q_head_stride": hd,
            "tiled_split_len": split_len,
            "tiled_splits": splits,
            "has_v_norm": p.get("has_v_norm", 0),
            "owns_kv": p.get("owns_kv", 1),
            "pad0": 0,
            "pad1": 0,
            "pad2": 0,
        },
        grid=attention_grid.grid(rows, nh, p["n_kv_heads"], hd, splits, splits),
        step=(rows, pos, pos + rows),
        defines={
            **defines,
            "ROPE_KV": fused,
            "RING": ring,
            "GROUP_HEADS": attention_grid.group_heads(nh, p["n_kv_heads"], hd),
            **attention_grid.tiled_defines(hd),
            **own,
        },
        subgroups=subgroups,
        read=["partials", "k_cache", "v_cache"],
    )
    partials = np.frombuffer(out["partials"], np.float32)
    shape = (p["n_kv_heads"], cap, hd)
    return {
        "y": run_combine(
            partials, rows=rows, nh=nh, hd=hd, splits=splits, split_len=split_len, step=(rows, pos, pos + rows)
        ),
        "partials": partials,
        "k_cache": np.frombuffer(out["k_cache"], k_dtype).reshape(shape).astype(np.float64),
        "v_cache": np.frombuffer(out["v_cache"], v_dtype).reshape(shape).astype(np.float64),
    }


NORM_EPS = 1e-5


def quantized_rows(x, norm, norm_offset: float, levels: int, spread: bool = False):
    """quantize_rows.wgsl's (xq, xs) of x (times the norm weight, when given) in `levels` int8
    levels: matmul_int8's inputs; spread: the GEMV's (Q8_INPUT), xq alone (its scales inside)."""
    rows, K = x.shape
    params = {"K": K, "has_norm": int(norm is not None), "norm_eps": NORM_EPS, "norm_offset": norm_offset}
    buffers = {"x": x, "norm": 16 if norm is None else norm}
    if spread:
        buffers["xq"] = rows * q8_row_bytes(K)
    else:
        buffers.update(xq=rows * K * levels, xs=rows * (2 * (K // 32) + 1) * 4)
    defines = {"X_LEVELS": levels, "SPREAD": spread}
    grid = quantize_spread_grid(K, rows) if spread else (rows, 1, 1)
    out = run_kernel("quantize_rows", buffers, params, grid=grid, step=(rows, 0, rows), defines=defines)
    if spread:
        return np.frombuffer(out["xq"], np.uint32)
    return np.frombuffer(out["xq"], np.uint32), np.frombuffer(out["xs"], np.float32)
