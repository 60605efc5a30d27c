"""attention_tiled.wgsl (a prompt's attention: blocks of (q head, row) slots sharing a KV head's
staged key and value tiles) then attention_combine.wgsl, vs numpy: many rows in several row
blocks (the last ragged), GQA groups of 1 to 40 q heads (more than a block's slots), head_dims
from 16 to 512 (Gemma 4's full layers: 16 lanes a slot), several splits, windows, rings, softcap, the KV cache formats, subgroups on and
off, and extreme scores. The partials are checked too: every one written (the buffer starts NaN),
an empty split's as attention.wgsl writes it (zeros, m = -3e38, sum 0), nothing before
partials_at touched. And the 8 and 16 lanes of a slot on 4-wide subgroups (lavapipe at 128 bits)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device, run_combine, run_kernel
from test_kernel_attention import KV_FORMATS, NUMPY, attention_reference, in_positions
from test_kernel_metal_safety import ATTN_CASES, attention_ref, extreme_inputs

from py_engine.models.attention_grid import (
    TILED_ROWS_PER_SLOT,
    TILED_THREADS,
    tiled_block,
    tiled_defines,
    tiled_grid,
    tiled_lanes,
)

F32, F32_F16, PACKED = KV_FORMATS
SPLIT_LEN = 64
AT = 7  # partials_at: the partials start past a prefix the kernel must leave alone

CASES = [
    # name, n_heads, n_kv, head_dim, rows, pos, window, ring (0: a row per position), softcap,
    # KV formats, subgroups, magnitude (of q and k; > 1e3: every score about -1e30, one-hot)
    ("gqa4_hd64_ragged_blocks", 4, 1, 64, 70, 130, 0, 0, 0.0, F32, True, 1.0),
    ("gqa4_hd64_no_subgroups", 4, 1, 64, 70, 130, 0, 0, 0.0, F32_F16, False, 1.0),
    ("gqa3_hd24_from_position_0", 9, 3, 24, 31, 0, 0, 0, 0.0, F32_F16, True, 1.0),
    ("gqa7_hd20_packed", 7, 1, 20, 9, 200, 0, 0, 0.0, PACKED, False, 1.0),
    ("gqa1_hd128_packed", 2, 2, 128, 33, 100, 0, 0, 0.0, PACKED, True, 1.0),
    ("gqa2_hd256", 4, 2, 256, 12, 70, 0, 0, 0.0, F32, False, 1.0),
    ("gqa2_hd256_f16", 4, 2, 256, 12, 70, 0, 0, 0.0, F32_F16, True, 1.0),
    ("window_empties_early_splits", 8, 4, 32, 40, 160, 50, 0, 0.0, F32_F16, True, 1.0),
    ("ring_two_splits", 4, 1, 32, 21, 150, 70, 90, 0.0, PACKED, False, 1.0),
    ("ring_wrapped_small", 4, 2, 16, 12, 40, 8, 19, 0.0, F32, True, 1.0),
    ("ring_not_yet_full", 2, 2, 24, 10, 3, 6, 16, 0.0, F32_F16, False, 1.0),
    ("softcap", 4, 2, 32, 17, 80, 0, 0, 30.0, F32, True, 3.0),
    ("gqa16_eight_rows_a_block", 16, 1, 16, 11, 50, 0, 0, 0.0, F32_F16, False, 1.0),
    ("gqa80_two_head_blocks", 80, 1, 16, 3, 66, 0, 0, 0.0, F32, True, 1.0),
    ("huge_scores_windowed", 4, 1, 16, 19, 90, 7, 0, 0.0, F32, True, 1e15),
    ("huge_scores_softcap_no_subgroups", 2, 1, 16, 12, 60, 0, 0, 50.0, F32, False, 1e15),
    # Gemma 4 E2B: its full layers' 8 q heads of 512 on one KV head (16 lanes a slot: on lavapipe's
    # 8-wide subgroups in two pieces; without subgroups the dots over the K tile), a 320 (those
    # past V's room), its sliding layers' 256 over a ring.
    ("gqa8_hd512", 8, 1, 512, 9, 70, 0, 0, 0.0, F32, True, 1.0),
    ("gqa8_hd512_packed_no_subgroups", 8, 1, 512, 9, 70, 0, 0, 0.0, PACKED, False, 1.0),
    ("gqa2_hd320_no_subgroups", 4, 2, 320, 7, 70, 20, 0, 0.0, F32_F16, False, 1.0),
    ("gqa8_hd256_ring", 8, 1, 256, 12, 150, 70, 90, 0.0, F32_F16, True, 1.0),
]


def reference(q, k, v, pos, window, scale, softcap):
    """attention_reference, or (softcap, another scale) its steps with those."""
    hd = q.shape[2]
    if softcap == 0.0 and scale == hd**-0.5:
        return attention_reference(q, k, v, pos, window)
    rows, nh, _ = q.shape
    want = np.zeros((rows, nh, hd))
    for r in range(rows):
        lo = max(0, pos + r + 1 - window) if window else 0
        for h in range(nh):
            kvh = h // (nh // k.shape[0])
            scores = k[kvh, lo : pos + r + 1] @ q[r, h].astype(np.float64) * scale
            if softcap > 0:
                scores = np.tanh(scores / softcap) * softcap
            w = np.exp(scores - scores.max())
            want[r, h] = (w / w.sum()) @ v[kvh, lo : pos + r + 1]
    return want


def run_tiled(
    qkv,
    k_cache,
    v_cache,
    nh,
    nkv,
    hd,
    rows,
    pos,
    window,
    scale,
    softcap,
    split_len,
    kv,
    subgroups,
    ring,
    f16_math=False,
):
    """attention_tiled.wgsl's partials buffer (AT NaNs, then the partials; it starts all NaN)
    for `rows` rows from position pos over caches [nkv, capacity, hd] (ring: a sliding layer's)."""
    cap = k_cache.shape[1]
    splits = -(-cap // split_len)
    n_partials = rows * nh * splits * (hd + 2)
    out = run_kernel(
        "attention_tiled",
        {
            "qkv": qkv,
            "k_cache": k_cache,
            "v_cache": v_cache,
            "partials": np.full(AT + n_partials, np.nan, np.float32),
            "cos_sin": np.zeros(4, np.float32),
            "q_norm": np.zeros(4, np.float32),
            "k_norm": np.zeros(4, np.float32),
        },
        {
            "n_heads": nh,
            "n_kv_heads": nkv,
            "head_dim": hd,
            "q_stride": qkv.shape[1],
            "capacity": cap,
            "window": window,
            "scale": scale,
            "softcap": softcap,
            "split_len": split_len,
            "splits": splits,
            "rotary_dim": hd,
            "has_qk_norm": 0,
            "interleaved": 0,
            "eps": 1e-6,
            "norm_offset": 0.0,
            "partials_at": AT,
            "q_head_stride": hd,
            "tiled_split_len": split_len,
            "tiled_splits": splits,
            "has_v_norm": 0,
            "owns_kv": 1,
            "pad0": 0,
            "pad1": 0,
            "pad2": 0,
        },
        grid=tiled_grid(rows, nh, nkv, hd, splits),
        step=(rows, pos, pos + rows),
        defines={
            "K_CACHE": kv[0],
            "V_CACHE": kv[1],
            "RING": bool(ring),
            "ROPE_KV": False,
            **tiled_defines(hd, f16_math),
        },
        subgroups=subgroups,
        read=["partials"],
    )
    return np.frombuffer(out["partials"], np.float32)


@pytest.mark.parametrize(
    "name,nh,nkv,hd,rows,pos,window,ring,softcap,kv,subgroups,mag", CASES, ids=[c[0] for c in CASES]
)
def test_tiled_attention(name, nh, nkv, hd, rows, pos, window, ring, softcap, kv, subgroups, mag):
    check_tiled(name, nh, nkv, hd, rows, pos, window, ring, softcap, kv, subgroups, mag)


# F16_MATH (precision "fast" with shader-f16): K and V staged in f16, a lane's dots and a tile's
# weighted values summed in f16. Its error on these N(0, 1) inputs is ~3e-3 (and ~0 without it);
# a masking or indexing slip moves outputs by ~0.1-1. Not the huge-score cases: f16 holds |x| <
# 65,504, and a model's normalised q, k, v stay far below that.
# Nor the 320 and the 256 ring: their F16_MATH tile layouts are other cases' (a compile each, saved).
F16_CASES = [
    c for c in CASES if c[-1] < 1e3 and c[0] not in ("gqa7_hd20_packed", "gqa2_hd320_no_subgroups", "gqa8_hd256_ring")
]


@pytest.mark.parametrize(
    "name,nh,nkv,hd,rows,pos,window,ring,softcap,kv,subgroups,mag", F16_CASES, ids=[c[0] for c in F16_CASES]
)
def test_tiled_attention_f16_math(name, nh, nkv, hd, rows, pos, window, ring, softcap, kv, subgroups, mag):
    check_tiled(name, nh, nkv, hd, rows, pos, window, ring, softcap, kv, subgroups, mag, f16_math=True)


def check_tiled(name, nh, nkv, hd, rows, pos, window, ring, softcap, kv, subgroups, mag, f16_math=False):
    if ("f16" in kv or f16_math) and not device(True)[0].caps.shader_f16:
        pytest.skip("no shader-f16")
    rng = np.random.default_rng(sum(map(ord, name)))
    kv_len = pos + rows
    cap = ring or kv_len + 45  # no ring: rows past the keys (NaN: never read), whole splits empty
    stride = (nh + 2 * nkv) * hd + 4  # q heads, k, v, and a few more: q_stride is not derived
    qkv = rng.standard_normal((rows, stride)).astype(np.float32)
    k = rng.standard_normal((nkv, cap, hd))
    v = rng.standard_normal((nkv, cap, hd))
    if mag > 1e3:
        # q > 0 and k < 0 everywhere: every score is about -1e30 (mag^2 * head_dim), the size of a
        # "masked" score, and neighbouring scores differ by ~1e29: the softmax is one-hot.
        qkv, k = np.abs(qkv) * mag, -np.abs(k) * mag
    else:
        qkv, k = qkv * mag, k * mag
    qkv = qkv.astype(np.float32)
    k_cache, v_cache = k.astype(NUMPY[kv[0]]), v.astype(NUMPY[kv[1]])
    written = np.arange(max(0, kv_len - cap), kv_len) % cap  # the rows that hold a position
    unwritten = np.setdiff1d(np.arange(cap), written)
    k_cache[:, unwritten], v_cache[:, unwritten] = np.nan, np.nan
    split_len, splits = SPLIT_LEN, -(-cap // SPLIT_LEN)
    scale = hd**-0.5

    heads, block_rows = tiled_block(nh, nkv, hd)
    assert heads * block_rows <= TILED_ROWS_PER_SLOT * TILED_THREADS // tiled_lanes(hd)
    assert tiled_grid(rows, nh, nkv, hd, splits)[1] > 1 or rows <= block_rows
    raw = run_tiled(
        qkv, k_cache, v_cache, nh, nkv, hd, rows, pos, window, scale, softcap, split_len, kv, subgroups, ring, f16_math
    )
    assert np.isnan(raw[:AT]).all(), "written before partials_at"
    partials = raw[AT:]
    assert np.isfinite(partials).all(), "a partial not written, or NaN/Inf in one"

    # Splits that hold none of a row's keys: zeros, m = -3e38, sum 0; the others a positive sum.
    parts = partials.reshape(rows, nh, splits, hd + 2)
    oldest = max(0, kv_len - cap) if ring else 0
    for r in range(rows):
        q_pos = pos + r
        lo = max(0, q_pos + 1 - window) if window else 0
        for z in range(splits):
            first, end = oldest + z * split_len, oldest + (z + 1) * split_len
            if max(first, lo) < min(end, q_pos + 1):
                assert (parts[r, :, z, hd + 1] > 0).all(), (r, z)
            else:
                assert (parts[r, :, z, :hd] == 0).all() and (parts[r, :, z, hd + 1] == 0).all(), (r, z)
                assert (parts[r, :, z, hd] == np.float32(-3e38)).all(), (r, z)

    got = run_combine(partials, rows=rows, nh=nh, hd=hd, splits=splits, split_len=split_len, step=(rows, pos, kv_len))
    assert np.isfinite(got).all()
    q = qkv[:, : nh * hd].reshape(rows, nh, hd)
    by_position = [in_positions(c.astype(np.float64), kv_len) for c in (k_cache, v_cache)]
    want = reference(q, *by_position, pos, window, scale, softcap)
    if f16_math:
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("subgroups", [True, False], ids=["subgroups", "workgroup-memory"])
@pytest.mark.parametrize(
    "name,nh,nkv,hd,rows,pos,window,split_len,mag,softcap,ring", ATTN_CASES, ids=[c[0] for c in ATTN_CASES]
)
def test_metal_safety_cases(name, nh, nkv, hd, rows, pos, window, split_len, mag, softcap, ring, subgroups):
    """test_kernel_metal_safety's masked and extreme attention cases (splits of 4 to 32 keys, fewer
    than a tile's) through this kernel: no NaN/Inf, numpy's output."""
    qkv, k_cache, v_cache, cap = extreme_inputs(name, nh, nkv, hd, rows, pos, mag, ring)
    kw = dict(nh=nh, nkv=nkv, hd=hd, rows=rows, pos=pos, window=window, scale=hd**-0.5, softcap=softcap)
    raw = run_tiled(
        qkv, k_cache, v_cache, nh, nkv, hd, rows, pos, window, hd**-0.5, softcap, split_len, F32, subgroups, ring
    )
    splits = -(-cap // split_len)
    partials = raw[AT:]
    assert np.isfinite(partials).all(), "NaN/Inf in the attention partials (or one not written)"
    got = run_combine(
        partials, rows=rows, nh=nh, hd=hd, splits=splits, split_len=split_len, step=(rows, pos, pos + rows)
    )
    assert np.isfinite(got).all(), "NaN/Inf in the attention output"
    by_position = np.arange(pos + rows) % cap
    want = attention_ref(qkv, k_cache[:, by_position], v_cache[:, by_position], **kw)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_four_wide_subgroups():
    """head_dim > 128 takes 8 lanes a slot, > 256 16; on 4-wide subgroups (WebGPU's least, lavapipe
    with LP_NATIVE_VECTOR_WIDTH=128) the last step of their sums goes through workgroup memory."""
    if "llvmpipe" not in device(True)[0].caps.adapter:
        pytest.skip("needs lavapipe, whose subgroup width an environment variable sets")
    names = (
        "gqa4_hd64_ragged_blocks",
        "gqa1_hd128_packed",
        "gqa2_hd256_f16",
        "window_empties_early_splits",
        "gqa8_hd512",
    )
    code = (
        "from gpu_harness import device; import test_kernel_attention_tiled as t\n"
        "assert '128 bits' in device(True)[0].caps.adapter, device(True)[0].caps.adapter\n"
        f"for case in t.CASES:\n    if case[0] in {names!r}: t.test_tiled_attention(*case)\n"
    )
    env = {**os.environ, "LP_NATIVE_VECTOR_WIDTH": "128"}
    here = Path(__file__).resolve().parent
    env["PYTHONPATH"] = os.pathsep.join([str(here), str(here.parent), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", code], cwd=here, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
