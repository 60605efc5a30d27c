"""Fused QK-norm + RoPE + KV append, then causal GQA attention (with sliding window, over a full
cache or a sliding layer's ring), vs numpy; and a one-row forward's attention doing the first's
work itself (ROPE_KV), Gemma 4's V norm and shared-KV layers (no K/V of their own) included.
Heads up to 512 wide (attention.wgsl WIDE_HEADS: Gemma 4's full layers)."""

import numpy as np
import pytest
from gpu_harness import as_f32, attend, device, run_kernel

from py_engine.models import attention_grid


def rope_ref(x, cos, sin, rotary_dim, interleaved):
    x = x.copy()
    half = rotary_dim // 2
    a = np.arange(half) * 2 if interleaved else np.arange(half)
    b = a + 1 if interleaved else a + half
    xa, xb = x[..., a].copy(), x[..., b].copy()
    x[..., a] = xa * cos - xb * sin
    x[..., b] = xb * cos + xa * sin
    return x


CASES = [
    # n_heads, n_kv, head_dim, rotary_dim, rows, pos, window, qk_norm, interleaved, ring (0: a row per position)
    (4, 2, 16, 16, 5, 0, 0, False, False, 0),
    (4, 2, 24, 24, 3, 70, 0, True, False, 0),
    (8, 1, 64, 32, 1, 130, 0, False, True, 0),
    (4, 4, 32, 32, 6, 9, 8, False, False, 0),
    (2, 2, 256, 256, 2, 3, 0, True, False, 0),
    (2, 1, 20, 20, 2, 65, 0, False, False, 0),  # head_dim not a multiple of 8: attention.wgsl's remainder pairs
    # Rings of window + rows - 1 rows or more (kv_cache.py), their positions wrapped: a ring of 12
    # in its fourth lap; one of 90 rows in two splits, position 90 (row 0) inside the first split's
    # tile; one not yet full, whose unwritten rows must not be read.
    (4, 2, 16, 16, 5, 40, 8, False, False, 12),
    (4, 1, 32, 32, 3, 150, 70, True, False, 90),
    (2, 2, 24, 24, 2, 3, 6, False, True, 8),
    # Gemma 4 E2B's layers: full ones of 512 (WIDE_HEADS: 4 of the 8 q heads a workgroup, two output
    # dimensions a thread), one of 512 rotating 128 dims over several splits, one of 320 in a
    # window (dimensions past the head: threads idle); its sliding layers' 256 over a ring.
    (8, 1, 512, 512, 2, 70, 0, True, False, 0),
    (8, 1, 512, 128, 1, 130, 0, False, True, 0),
    (8, 2, 320, 320, 2, 9, 4, False, False, 0),
    (8, 1, 256, 256, 2, 150, 70, True, False, 90),
]


# (K cache, V cache) formats: the desktop f32 path, the shader-f16 path, WebKit's packed f16.
# A packed f16 pair in a little-endian u32 has the bytes of two f16s, so numpy reads both as f16.
KV_FORMATS = [("f32", "f32"), ("f32", "f16"), ("f16_packed", "f16_packed")]
NUMPY = {"f32": np.float32, "f16": np.float16, "f16_packed": np.float16}


# attention.wgsl with and without subgroups; attention_subgroups.wgsl (32-wide subgroups, run here
# with its exchanges through workgroup memory) where the shape fits it.
KERNELS = [("attention", True), ("attention", False), ("attention_subgroups", False)]


@pytest.mark.parametrize("kernel,subgroups", KERNELS, ids=["subgroups", "workgroup-memory", "attention_subgroups"])
@pytest.mark.parametrize("nh,nkv,hd,rd,rows,pos,window,qk_norm,interleaved,ring", CASES)
@pytest.mark.parametrize("kv", KV_FORMATS, ids="/".join)
def test_rope_then_attention(nh, nkv, hd, rd, rows, pos, window, qk_norm, interleaved, ring, kv, kernel, subgroups):
    check_rope_then_attention(nh, nkv, hd, rd, rows, pos, window, qk_norm, interleaved, ring, kv, kernel, subgroups)


def skip_unless_runnable(nh, nkv, hd, kv, kernel):
    """Skips a case this device or kernel cannot run: f16 caches without shader-f16, a shape the
    few-rows kernel would not be given."""
    if "f16" in kv and not device(True)[0].caps.shader_f16:
        pytest.skip("no shader-f16")
    if (
        kernel != "attention"
        and attention_grid.few_rows_kernel(nh, nkv, hd, kv, attention_grid.SUBGROUP_LANES)[0] != kernel
    ):
        pytest.skip(f"{kernel}.wgsl does not take this shape")


def check_rope_then_attention(
    nh, nkv, hd, rd, rows, pos, window, qk_norm, interleaved, ring, kv, kernel, subgroups, inv_freq=None, v_norm=False
):
    """rope_kv then a few rows' attention, and the fused one-row forward (ROPE_KV), vs numpy
    (inv_freq: the RoPE frequencies; default 10000's over rotary_dim; v_norm: the values
    RMS-normalised without a weight before they are cached, Gemma 4's)."""
    skip_unless_runnable(nh, nkv, hd, kv, kernel)
    # attention_subgroups: splits of 128 keys, two or more steps of a subgroup's (its rescaling).
    split_len = 64 if kernel == "attention" else 128
    rng = np.random.default_rng(nh * hd + rows + pos)
    cap = ring or pos + rows + 3  # a ring's random rows stand for the positions it holds
    stride = (nh + 2 * nkv) * hd
    qkv = rng.standard_normal((rows, stride)).astype(np.float32)
    k_dtype, v_dtype = NUMPY[kv[0]], NUMPY[kv[1]]
    defines = {"K_CACHE": kv[0], "V_CACHE": kv[1]}
    k_cache = rng.standard_normal((nkv, cap, hd)).astype(k_dtype)
    v_cache = rng.standard_normal((nkv, cap, hd)).astype(v_dtype)
    qn = (1 + 0.3 * rng.standard_normal(hd)).astype(np.float32)
    kn = (1 + 0.3 * rng.standard_normal(hd)).astype(np.float32)
    positions = pos + np.arange(rows)
    if inv_freq is None:
        inv_freq = 1.0 / 10000 ** (np.arange(rd // 2) * 2 / rd)
    inv_freq = np.asarray(inv_freq)
    angles = (positions[:, None] * inv_freq[None, :]).astype(np.float32)
    cos_sin = np.stack([np.cos(angles), np.sin(angles)], -1).astype(np.float32)

    params = {
        "n_heads": nh,
        "n_kv_heads": nkv,
        "head_dim": hd,
        "rotary_dim": rd,
        "qkv_stride": stride,
        "capacity": cap,
        "has_qk_norm": int(qk_norm),
        "interleaved": int(interleaved),
        "eps": 1e-6,
        "norm_offset": 0.0,
        "q_head_stride": hd,
        "has_v_norm": int(v_norm),
    }
    out = run_kernel(
        "rope_kv",
        {"cos_sin": cos_sin, "q_norm": qn, "k_norm": kn, "qkv": qkv, "k_cache": k_cache, "v_cache": v_cache},
        params,
        grid=(nh + 2 * nkv, rows, 1),
        step=(rows, pos, pos + rows),
        defines=defines,
    )

    heads = qkv.reshape(rows, nh + 2 * nkv, hd).astype(np.float64)
    q, k, v = heads[:, :nh], heads[:, nh : nh + nkv], heads[:, nh + nkv :]
    if qk_norm:
        q = q / np.sqrt((q**2).mean(-1, keepdims=True) + 1e-6) * qn
        k = k / np.sqrt((k**2).mean(-1, keepdims=True) + 1e-6) * kn
    if v_norm:
        v = v / np.sqrt((v**2).mean(-1, keepdims=True) + 1e-6)
    c, s = cos_sin[:, None, :, 0], cos_sin[:, None, :, 1]
    q, k = rope_ref(q, c, s, rd, interleaved), rope_ref(k, c, s, rd, interleaved)
    want_k = k_cache.astype(np.float64)
    want_v = v_cache.astype(np.float64)
    want_k[:, positions % cap] = k.transpose(1, 0, 2)
    want_v[:, positions % cap] = v.transpose(1, 0, 2)
    got_qkv = as_f32(out["qkv"], (rows, nh + 2 * nkv, hd))
    np.testing.assert_allclose(got_qkv[:, :nh], q, rtol=1e-5, atol=1e-5)
    got_k = np.frombuffer(out["k_cache"], k_dtype).reshape(nkv, cap, hd).astype(np.float64)
    got_v = np.frombuffer(out["v_cache"], v_dtype).reshape(nkv, cap, hd).astype(np.float64)
    k_tol, v_tol = (2e-3 if fmt != "f32" else 1e-5 for fmt in kv)
    np.testing.assert_allclose(got_k, want_k, rtol=k_tol, atol=k_tol)
    np.testing.assert_allclose(got_v, want_v, rtol=v_tol, atol=v_tol)

    attn = attend(
        got_qkv.reshape(rows, stride),
        np.frombuffer(out["k_cache"], k_dtype),
        np.frombuffer(out["v_cache"], v_dtype),
        params,
        rows,
        pos,
        window,
        defines,
        subgroups,
        ring=bool(ring),
        kernel=kernel,
        split_len=split_len,
    )
    by_position = {name: in_positions(cache, pos + rows) for name, cache in (("k", got_k), ("v", got_v))}
    np.testing.assert_allclose(
        attn["y"],
        attention_reference(got_qkv[:, :nh], by_position["k"], by_position["v"], pos, window),
        rtol=1e-4,
        atol=1e-5,
    )

    # A one-row forward (decode) runs no rope_kv: attention takes its work in (ROPE_KV). Its last
    # row, over the caches as rope_kv left them before that row: the same caches and output.
    last = rows - 1
    before_k, before_v = got_k.astype(k_dtype), got_v.astype(v_dtype)
    before_k[:, (pos + last) % cap], before_v[:, (pos + last) % cap] = 7.0, -7.0  # stale: overwritten, never read
    fused = attend(
        qkv[last:],
        before_k,
        before_v,
        params,
        1,
        pos + last,
        window,
        defines,
        subgroups,
        cos_sin=cos_sin[last:],
        qn=qn,
        kn=kn,
        ring=bool(ring),
        kernel=kernel,
        split_len=split_len,
    )
    np.testing.assert_allclose(fused["k_cache"], got_k, rtol=k_tol, atol=k_tol)
    np.testing.assert_allclose(fused["v_cache"], got_v, rtol=v_tol, atol=v_tol)
    if v_norm:  # the very bits rope_kv.wgsl cached (its norm's sums in its order, one rounding)
        np.testing.assert_array_equal(fused["k_cache"], got_k)
        np.testing.assert_array_equal(fused["v_cache"], got_v)
    np.testing.assert_allclose(
        fused["y"],
        attention_reference(got_qkv[last:, :nh], by_position["k"], by_position["v"], pos + last, window),
        rtol=1e-4,
        atol=1e-5,
    )
    # Bit for bit the many-row forward's row: rope_kv.wgsl and ROPE_KV reduce the QK norm in the
    # same order, rotate alike, and the new key is read as the cache would hold it.
    np.testing.assert_array_equal(fused["y"][0], attn["y"][last])


def in_positions(cache, kv_len):
    """A cache [kv heads, rows, hd] as [kv heads, kv_len, hd] by position: position p at row
    p % rows (a ring, or a cache with a row for every position); NaN where the rows hold no more
    (overwritten by a later lap), so a reference that reads one fails."""
    rows = cache.shape[1]
    out = np.full((cache.shape[0], kv_len, cache.shape[2]), np.nan)
    kept = np.arange(max(0, kv_len - rows), kv_len)
    out[:, kept] = cache[:, kept % rows]
    return out


def attention_reference(q, k, v, pos, window):
    """Causal GQA attention of rotated q [rows, heads, hd] from position pos over caches [kv heads, cap, hd]."""
    rows, nh, hd = q.shape
    nkv = k.shape[0]
    want = np.zeros((rows, nh, hd))
    for r in range(rows):
        qp = pos + r
        lo = max(0, qp + 1 - window) if window else 0
        for h in range(nh):
            kvh = h // (nh // nkv)
            scores = k[kvh, lo : qp + 1] @ q[r, h].astype(np.float64) * hd**-0.5
            w = np.exp(scores - scores.max())
            want[r, h] = (w / w.sum()) @ v[kvh, lo : qp + 1]
    return want


# (n_heads, n_kv, head_dim, pos, window, weight format, ring): several splits of 64 keys in use; a
# window that leaves the first splits empty; one split; a ring's two splits, both in use.
MERGES = [
    (8, 1, 64, 130, 0, "q4_0", 0),
    (4, 2, 32, 200, 70, "f32", 0),
    (4, 4, 32, 9, 0, "q4_1", 0),
    (4, 2, 32, 200, 70, "q4_0", 90),
]


@pytest.mark.parametrize("nh,nkv,hd,pos,window,fmt,ring", MERGES)
def test_o_projection_merges_partials(nh, nkv, hd, pos, window, fmt, ring):
    """A decode token's O projection (gemv.wgsl COMBINE) reads attention.wgsl's partials and merges
    them as attention_combine.wgsl does: its output equals the combine's then the plain GEMV's, bit
    for bit, so folding the combine away changes no logit (under int8 activations too)."""
    from gpu_harness import repacked
    from quant_ref import QuantMatrix

    from py_engine.runtime.linear_plan import (
        attention_merge_params,
        gemv_features,
        linear_defines,
        linear_grid,
        linear_params,
    )

    rng = np.random.default_rng(pos + hd)
    cap, stride = ring or pos + 70, (nh + 2 * nkv) * hd  # splits past the keys: skipped by the merge
    qkv = rng.standard_normal((1, stride)).astype(np.float32)
    k_cache = rng.standard_normal((nkv, cap, hd)).astype(np.float32)
    v_cache = rng.standard_normal((nkv, cap, hd)).astype(np.float32)
    params = {
        "n_heads": nh,
        "n_kv_heads": nkv,
        "head_dim": hd,
        "rotary_dim": hd,
        "qkv_stride": stride,
        "capacity": cap,
        "has_qk_norm": 0,
        "interleaved": 0,
        "eps": 1e-6,
    }
    att = attend(
        qkv, k_cache, v_cache, params, 1, pos, window, {"K_CACHE": "f32", "V_CACHE": "f32"}, True, ring=bool(ring)
    )
    K, N, splits = nh * hd, 40, -(-cap // 64)
    m = QuantMatrix(fmt, N, K, rng, 64)
    w = repacked(m.raw(), fmt)

    def project(x, combine, precision):
        defines = {**linear_defines(K, N, fmt, precision=precision), "COMBINE": combine is not None}
        out = run_kernel(
            "gemv",
            {"x": x, "w": w, "bias": 16, "residual": 16, "norm": 16, "y": N * 4},
            linear_params(K, N, rows=1, combine=combine),
            defines=defines,
            grid=linear_grid("gemv", 1, N, gemv_per_group=gemv_features(defines)),
            step=(1, pos, pos + 1),
        )
        return as_f32(out["y"], (1, N))

    stale = np.full(K, 7.0, np.float32)  # the output region, which attention_combine would have written
    for precision in ("exact", "fast") if fmt != "f32" else ("exact",):
        want = project(att["y"].reshape(1, K).astype(np.float32), None, precision)
        got = project(np.concatenate([stale, att["partials"]]), attention_merge_params(K, hd, splits, 64), precision)
        np.testing.assert_array_equal(got, want, err_msg=precision)


@pytest.mark.parametrize("fixture", ["mistral-f32", "qwen3_5-f32"])
def test_the_engine_decodes_alike_on_either_few_rows_kernel(fixture, monkeypatch):
    """The engine's forwards of few rows (of 4 rows and of one, every row scored) through
    attention_subgroups.wgsl, as on a device with 32-wide subgroups (here its exchanges through
    workgroup memory), give attention.wgsl's logits: it is bound and parameterised alike
    (Mistral's sliding window over a ring; Qwen3.5's gated q heads, 3 to a KV head)."""
    import asyncio
    from pathlib import Path

    from py_engine.engine import Engine

    ids = [(7 * i + 3) % 50 + 2 for i in range(24)]
    dev = device(False)[0]
    real = attention_grid.few_rows_kernel

    def on_subgroups(nh, nkv, hd, kv_formats, subgroup_min_size):
        name, defines = real(nh, nkv, hd, kv_formats, attention_grid.SUBGROUP_LANES)
        assert name == "attention_subgroups"
        return name, {**defines, "SUBGROUPS": False}

    async def logits():
        engine = await Engine.load(Path(__file__).parent / "fixtures" / fixture, dev, max_rows=4, context=64)
        # Forwards of 4 rows (rope_kv.wgsl first), then of one (ROPE_KV: the kernel rotates and caches).
        cuts = [0, 4, 8, *range(9, len(ids) + 1)]
        rows = [row for a, b in zip(cuts, cuts[1:]) for row in await engine.rows_logits(ids[a:b])]
        return engine.executor.kernel_names(1), np.array(rows)

    names, want = asyncio.run(logits())
    assert "attention" in names
    monkeypatch.setattr(attention_grid, "few_rows_kernel", on_subgroups)
    names, got = asyncio.run(logits())
    assert "attention_subgroups" in names and "attention" not in names
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 1e-5, f"{fixture}: attention_subgroups' logits off attention's by {err:.2e}"
