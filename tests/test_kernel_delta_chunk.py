"""The chunked Gated DeltaNet forward (shaders/delta_chunk_{prep,scan,norm}.wgsl, chained on the same
buffers as py_engine/models/delta_chunk_plan.py lays them out) against a numpy port of transformers'
torch_recurrent_gated_delta_rule (token by token, float64) plus the gated RMSNorm."""

import asyncio
import re
import struct

import numpy as np
import pytest
from gpu_harness import device

from py_engine.gpu import Dispatch
from py_engine.models import delta_chunk_plan as plan
from py_engine.runtime.kernels import SHADER_DIR, STEP_FORMAT

KERNELS = ("delta_chunk_prep", "delta_chunk_scan", "delta_norm")


def reference(mixed, proj, a_log, dt_bias, norm, state, *, nk, nv, dk, dv, z_at, b_at, a_at, a_is_log, eps):
    """(y [R, nv dv], final state [nv, dk, dv]) in float64; state None: zero."""
    rows = mixed.shape[0]
    mixed, proj = mixed.astype(np.float64), proj.astype(np.float64)
    q = mixed[:, : nk * dk].reshape(rows, nk, dk)
    k = mixed[:, nk * dk : 2 * nk * dk].reshape(rows, nk, dk)
    v = mixed[:, 2 * nk * dk :].reshape(rows, nv, dv)
    rep = nv // nk
    q, k = np.repeat(q, rep, axis=1), np.repeat(k, rep, axis=1)
    q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6) * dk**-0.5
    k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    beta = 1 / (1 + np.exp(-proj[:, b_at : b_at + nv]))
    big_a = -np.exp(a_log.astype(np.float64)) if a_is_log else a_log.astype(np.float64)
    g = big_a * np.logaddexp(0, proj[:, a_at : a_at + nv] + dt_bias)
    s = np.zeros((nv, dk, dv)) if state is None else state.astype(np.float64).copy()
    o = np.zeros((rows, nv, dv))
    for t in range(rows):
        s *= np.exp(g[t])[:, None, None]
        kv = np.einsum("hij,hi->hj", s, k[t])
        delta = (v[t] - kv) * beta[t][:, None]
        s += k[t][:, :, None] * delta[:, None, :]
        o[t] = np.einsum("hij,hi->hj", s, q[t])
    z = proj[:, z_at : z_at + nv * dv].reshape(rows, nv, dv)
    y = o / np.sqrt((o * o).mean(-1, keepdims=True) + eps) * norm * (z / (1 + np.exp(-z)))
    return y.reshape(rows, nv * dv), s


def run_chunked(arrays: dict, params: dict, rows: int, pos: int, *, read=("y", "state")) -> dict:
    """The three kernels in one submit over shared buffers (binding name → numpy array or byte
    size, as gpu_harness.run_kernel takes them); the named buffers' bytes back."""
    dev, cache = device(False)
    nv, dk, dv = params["nv"], params["dk"], params["dv"]
    arrays = {**arrays, "chunks": plan.scratch_bytes(rows, nv, dk, dv)}
    buffers, sizes = {}, {}
    for name, value in arrays.items():
        data = value if isinstance(value, int) else np.ascontiguousarray(value, np.float32).tobytes()
        size = data if isinstance(data, int) else len(data)
        buffers[name] = dev.create_buffer(max(size, 16))
        sizes[name] = size
        if not isinstance(data, int):
            dev.write_buffer(buffers[name], 0, data + bytes(-len(data) % 4))
    step = struct.pack(STEP_FORMAT, rows, pos, pos + rows, 1)
    grids = {
        "delta_chunk_prep": plan.prep_grid(rows, nv),
        "delta_chunk_scan": plan.scan_grid(nv, dv),
        "delta_norm": plan.norm_grid(rows, nv),
    }
    commands = []
    for name in KERNELS:
        kernel = cache.get(name)
        resources = []
        for b in kernel.bindings:
            if b.kind == "uniform":
                data = step if b.name == "step" else kernel.pack_params(params)
                buf = dev.create_buffer(len(data), "uniform")
                dev.write_buffer(buf, 0, data)
            else:
                buf = buffers[b.name]
            resources.append((buf, 0, buf.size))
        commands.append(Dispatch(kernel.handle, dev.create_bind_group(kernel.handle, resources), grids[name]))
    dev.submit(commands)
    return {n: asyncio.run(dev.read_buffer(buffers[n], 0, sizes[n])) for n in read}


def make_case(rng, rows, nk, nv, dk, dv, *, a_is_log=True, extra_cols=3):
    conv_dim = 2 * nk * dk + nv * dv
    # proj: a few unrelated columns first, then z, b, a (the layout is the caller's)
    z_at, b_at = extra_cols, extra_cols + nv * dv
    a_at = b_at + nv
    proj_stride = a_at + nv + 2
    mixed = rng.standard_normal((rows, conv_dim)).astype(np.float32)
    proj = rng.standard_normal((rows, proj_stride)).astype(np.float32)
    a_log = np.log(rng.uniform(1, 16, nv)).astype(np.float32)
    if not a_is_log:
        a_log = (-np.exp(a_log.astype(np.float64))).astype(np.float32)
    dt_bias = rng.uniform(0, 1, nv).astype(np.float32)
    norm = (1 + 0.1 * rng.standard_normal(dv)).astype(np.float32)
    params = plan.params(
        nk=nk,
        nv=nv,
        dk=dk,
        dv=dv,
        proj_stride=proj_stride,
        z_at=z_at,
        b_at=b_at,
        a_at=a_at,
        a_is_log=a_is_log,
        eps=1e-6,
    )
    return {"mixed": mixed, "proj": proj, "a_log": a_log, "dt_bias": dt_bias, "norm": norm}, params


def check(rng, rows, nk, nv, dk, dv, *, pos, a_is_log=True, slow_decay=False):
    arrays, params = make_case(rng, rows, nk, nv, dk, dv, a_is_log=a_is_log)
    if slow_decay:  # A near 0 and beta large: the state carries far, (I + L)^-1 is least damped
        arrays["a_log"] = np.log(rng.uniform(1e-3, 1e-2, nv)).astype(np.float32)
        arrays["proj"][:, params["b_at"] : params["b_at"] + nv] += 3
    if pos == 0:
        state_in = np.full((nv, dk, dv), np.nan, np.float32)  # ignored: the forward starts from zero
    else:
        state_in = (rng.standard_normal((nv, dk, dv)) * 0.5).astype(np.float32)
    out = run_chunked({**arrays, "state": state_in, "y": rows * nv * dv * 4}, params, rows, pos)
    y = np.frombuffer(out["y"], np.float32).reshape(rows, nv * dv)
    state = np.frombuffer(out["state"], np.float32).reshape(nv, dk, dv)
    keys = ("nk", "nv", "dk", "dv", "z_at", "b_at", "a_at", "eps")
    y_ref, state_ref = reference(
        **arrays, state=None if pos == 0 else state_in, a_is_log=a_is_log, **{k: params[k] for k in keys}
    )
    assert np.isfinite(y).all() and np.isfinite(state).all()
    np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-4 * np.abs(y_ref).max())
    np.testing.assert_allclose(state, state_ref, rtol=1e-4, atol=1e-4 * np.abs(state_ref).max())


@pytest.mark.parametrize(
    "rows,nk,nv,dk,dv,pos",
    [
        (1, 2, 6, 24, 20, 0),
        (7, 2, 6, 24, 20, 5),
        (64, 2, 6, 24, 20, 0),  # whole chunks
        (131, 2, 6, 24, 20, 17),  # a partial last chunk; dv not a multiple of the scan's 16 columns
        (40, 1, 3, 8, 36, 3),  # dk below the Gram slice, dv over two tiles
        (33, 4, 4, 128, 128, 9),  # the largest key head dim
    ],
)
def test_chunked_matches_recurrence(rows, nk, nv, dk, dv, pos):
    check(np.random.default_rng(rows * 1000 + dk + pos), rows, nk, nv, dk, dv, pos=pos)


def test_stored_decay_rate_and_long_memory():
    """a_is_log = 0 (GGUF stores A = -exp(A_log)), and a slowly decaying state over 300 rows."""
    check(np.random.default_rng(1), 97, 2, 4, 32, 32, pos=4, a_is_log=False)
    check(np.random.default_rng(2), 300, 1, 2, 32, 16, pos=8, slow_decay=True)


def test_real_shape():
    """Qwen3.5's head shape: dk = dv = 128, 16 key and value heads."""
    check(np.random.default_rng(3), 70, 16, 16, 128, 128, pos=12)


def test_chunks_continue_a_forward():
    """Two forwards (rows 0..50, then 50..81) give the one forward of 81 rows: the state carries."""
    rng = np.random.default_rng(4)
    rows, nk, nv, dk, dv = 81, 2, 4, 16, 12
    arrays, params = make_case(rng, rows, nk, nv, dk, dv)
    state = np.zeros((nv, dk, dv), np.float32)
    ys = []
    for lo, hi in ((0, 50), (50, 81)):
        part = {n: (a[lo:hi] if n in ("mixed", "proj") else a) for n, a in arrays.items()}
        out = run_chunked({**part, "state": state, "y": (hi - lo) * nv * dv * 4}, params, hi - lo, lo)
        ys.append(np.frombuffer(out["y"], np.float32).reshape(hi - lo, nv * dv))
        state = np.frombuffer(out["state"], np.float32).reshape(nv, dk, dv).copy()
    keys = ("nk", "nv", "dk", "dv", "z_at", "b_at", "a_at", "eps")
    y_ref, state_ref = reference(**arrays, state=None, a_is_log=True, **{k: params[k] for k in keys})
    np.testing.assert_allclose(np.concatenate(ys), y_ref, rtol=1e-4, atol=1e-4 * np.abs(y_ref).max())
    np.testing.assert_allclose(state, state_ref, rtol=1e-4, atol=1e-4 * np.abs(state_ref).max())


def wgsl_const(name: str, const: str) -> int:
    src = (SHADER_DIR / f"{name}.wgsl").read_text()
    return int(re.search(rf"\bconst {const}: u32 = (\d+)u;", src).group(1))


def test_plan_mirrors_the_kernels():
    assert wgsl_const("delta_chunk_prep", "C") == wgsl_const("delta_chunk_scan", "C") == plan.CHUNK
    assert wgsl_const("delta_chunk_scan", "TJ") == plan.SCAN_COLUMNS
    assert wgsl_const("delta_chunk_scan", "DK_MAX") == plan.DK_MAX
    params = [re.search(r"struct Params \{[^}]*\}", (SHADER_DIR / f"{n}.wgsl").read_text()).group(0) for n in KERNELS]
    assert params[0] == params[1] == params[2]  # one Params dict serves all three
    # scratch: one block per (value head, chunk); the real shape at the engine's 128 rows is 4.6 MiB
    assert plan.scratch_bytes(128, 32, 128, 128) == 4 * 32 * 4 * (32 * 290 + 4)
    assert plan.scratch_bytes(1, 6, 24, 20) == 4 * 6 * (32 * 78 + 4)
