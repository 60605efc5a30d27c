"""Gemma 4's attention (tests/test_kernel_attention.py's checks at its shapes): heads of 512
(WIDE_HEADS), proportional RoPE, and a decode token's attention doing rope_kv's work for the layers
with a V norm and the shared-KV ones."""

import numpy as np
import pytest
from gpu_harness import attend, run_kernel
from test_kernel_attention import (
    KERNELS,
    KV_FORMATS,
    NUMPY,
    attention_reference,
    check_rope_then_attention,
    in_positions,
    rope_ref,
    skip_unless_runnable,
)

from py_engine.models import attention_grid
from py_engine.models.rope import Rotary

# Gemma 4 E2B's decode layers (8 q heads on one KV head, QK norms; cheap: one row): a sliding
# layer's heads of 256 over a ring in its second lap, a full layer's 512 in the second split.
GEMMA4_LAYERS = [(8, 1, 256, 256, 1, 150, 70, True, False, 90), (8, 1, 512, 512, 1, 70, 0, True, False, 0)]


@pytest.mark.parametrize("kernel,subgroups", KERNELS, ids=["subgroups", "workgroup-memory", "attention_subgroups"])
@pytest.mark.parametrize("nh,nkv,hd,rd,rows,pos,window,qk_norm,interleaved,ring", GEMMA4_LAYERS)
@pytest.mark.parametrize("kv", KV_FORMATS, ids="/".join)
def test_v_norm_in_the_fused_decode(
    nh, nkv, hd, rd, rows, pos, window, qk_norm, interleaved, ring, kv, kernel, subgroups
):
    """Gemma 4's V norm (values RMS-normalised without a weight before they are cached,
    rope_kv.wgsl has_v_norm): a one-row forward's attention (ROPE_KV) normalises the new value
    itself, caching the very bits rope_kv.wgsl caches."""
    check_rope_then_attention(
        nh, nkv, hd, rd, rows, pos, window, qk_norm, interleaved, ring, kv, kernel, subgroups, v_norm=True
    )


@pytest.mark.parametrize("kernel,subgroups", KERNELS, ids=["subgroups", "workgroup-memory", "attention_subgroups"])
@pytest.mark.parametrize("nh,nkv,hd,rd,rows,pos,window,qk_norm,interleaved,ring", GEMMA4_LAYERS)
@pytest.mark.parametrize("kv", KV_FORMATS, ids="/".join)
def test_shared_kv_layer_in_the_fused_decode(
    nh, nkv, hd, rd, rows, pos, window, qk_norm, interleaved, ring, kv, kernel, subgroups
):
    """Gemma 4's shared-KV layers (owns_kv 0: qkv holds only q heads, the caches are an earlier
    layer's, which cached this position earlier in the forward): ROPE_KV normalises and rotates
    the q heads only, appends nothing, and reads the position's key and value from the cache:
    the output of rope_kv.wgsl (q heads only) then attention, bit for bit; the caches as they were."""
    skip_unless_runnable(nh, nkv, hd, kv, kernel)
    split_len = 64 if kernel == "attention" else 128
    rng = np.random.default_rng(hd + pos)
    cap = ring or pos + 3
    stride = nh * hd
    # The row's q heads, then what a pool slot might hold past them (a layer that appended would
    # cache it: the caches must stay as they were).
    qkv = rng.standard_normal((1, stride + 2 * nkv * hd)).astype(np.float32)
    k_dtype, v_dtype = NUMPY[kv[0]], NUMPY[kv[1]]
    defines = {"K_CACHE": kv[0], "V_CACHE": kv[1]}
    k_cache = rng.standard_normal((nkv, cap, hd)).astype(k_dtype)
    v_cache = rng.standard_normal((nkv, cap, hd)).astype(v_dtype)
    qn = (1 + 0.3 * rng.standard_normal(hd)).astype(np.float32)
    inv_freq = 1.0 / 10000 ** (np.arange(rd // 2) * 2 / rd)
    angles = (pos * inv_freq)[None, :].astype(np.float32)
    cos_sin = np.stack([np.cos(angles), np.sin(angles)], -1).astype(np.float32)
    params = {"n_heads": nh, "n_kv_heads": nkv, "head_dim": hd, "rotary_dim": rd, "qkv_stride": stride}
    params |= {"capacity": cap, "has_qk_norm": int(qk_norm), "interleaved": int(interleaved), "eps": 1e-6}
    params |= {"norm_offset": 0.0, "q_head_stride": hd, "has_v_norm": 0}
    # The layer's rope_kv dispatch: its q heads only (k_norm unbound: a dummy).
    dummy = np.zeros(4, np.float32)
    out = run_kernel(
        "rope_kv",
        {"cos_sin": cos_sin, "q_norm": qn, "k_norm": dummy, "qkv": qkv, "k_cache": k_cache, "v_cache": v_cache},
        params,
        grid=(nh, 1, 1),
        step=(1, pos, pos + 1),
        defines=defines,
    )
    rotated = np.frombuffer(out["qkv"], np.float32).reshape(qkv.shape)
    attn = attend(
        rotated,
        k_cache,
        v_cache,
        params,
        1,
        pos,
        window,
        defines,
        subgroups,
        ring=bool(ring),
        kernel=kernel,
        split_len=split_len,
    )
    fused = attend(
        qkv,
        k_cache,
        v_cache,
        {**params, "owns_kv": 0},
        1,
        pos,
        window,
        defines,
        subgroups,
        cos_sin=cos_sin,
        qn=qn,
        kn=dummy,
        ring=bool(ring),
        kernel=kernel,
        split_len=split_len,
    )
    np.testing.assert_array_equal(fused["k_cache"], k_cache.astype(np.float64))
    np.testing.assert_array_equal(fused["v_cache"], v_cache.astype(np.float64))
    np.testing.assert_array_equal(fused["y"], attn["y"])
    q = qkv[:, :stride].reshape(1, nh, hd).astype(np.float64)
    q = q / np.sqrt((q**2).mean(-1, keepdims=True) + 1e-6) * qn
    q = rope_ref(q, cos_sin[:, None, :, 0], cos_sin[:, None, :, 1], rd, interleaved)
    by_position = [in_positions(c.astype(np.float64), pos + 1) for c in (k_cache, v_cache)]
    np.testing.assert_allclose(fused["y"], attention_reference(q, *by_position, pos, window), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kv", KV_FORMATS, ids="/".join)
def test_proportional_rope_of_512(kv):
    """Gemma 4's full layers (E2B: 8 q heads of 512 on one KV head, QK norms): RoPE over the whole
    head whose last three quarters of frequencies stand still (models/rope.py "proportional"): 128
    dims turn, paired with dims 256 on; through the kernel without subgroups (every device's)."""
    rope = Rotary(512, 1e6, {"rope_type": "proportional", "partial_rotary_factor": 0.25})
    assert np.count_nonzero(rope.inv_freq) == 64
    check_rope_then_attention(8, 1, 512, 512, 1, 40, 0, True, False, 0, kv, "attention", False, rope.inv_freq)


def test_wide_heads_take_attention_wgsl_with_fewer_heads():
    """Heads past 256 run attention.wgsl WIDE_HEADS (never attention_subgroups.wgsl, whose value row
    is at most 32 words), 4 q heads a workgroup (one vec4 of q a dimension in 8 KiB), and the
    prompt's kernel 16 lanes a slot; heads of 256 as before."""
    for kv in KV_FORMATS:
        assert attention_grid.few_rows_kernel(8, 1, 512, kv, 32) == ("attention", {"WIDE_HEADS": True})
        assert attention_grid.few_rows_kernel(8, 1, 256, ("f32", "f16"), 32)[0] == "attention_subgroups"
    assert attention_grid.few_rows_kernel(8, 1, 256, ("f32", "f32"), 0) == ("attention", {"WIDE_HEADS": False})
    assert attention_grid.attention_grid(1, 8, 1, 512, 5) == (2, 1, 5)
    assert attention_grid.group_heads(8, 1, 256) == 4 and attention_grid.group_heads(16, 1, 64) == 8
    assert attention_grid.group_heads(6, 1, 320) == 3
    assert attention_grid.tiled_lanes(512) == 16 and attention_grid.tiled_block(8, 1, 512) == (8, 4)


@pytest.mark.parametrize("subgroups", [True, False], ids=["subgroups", "workgroup-memory"])
def test_wide_heads_scores_past_the_exp_clamp(subgroups):
    """Heads of 512 whose scores spread far past safe_exp's clamp (80; a std of 1,000, the softmax
    about one-hot): right only with each tile's true max (WIDE_HEADS without subgroups: lane 0's
    sums, a tree over the tile's keys), not one of a few of its keys."""
    from test_kernel_metal_safety import attention_ref, extreme_inputs

    nh, nkv, hd, rows, pos = 8, 1, 512, 2, 100
    qkv, k_cache, v_cache, cap = extreme_inputs("wide", nh, nkv, hd, rows, pos, 1000.0, 0)
    params = {"n_heads": nh, "n_kv_heads": nkv, "head_dim": hd, "qkv_stride": qkv.shape[1], "capacity": cap}
    params |= {"rotary_dim": hd, "has_qk_norm": 0, "interleaved": 0, "eps": 1e-6}
    got = attend(qkv, k_cache, v_cache, params, rows, pos, 0, {"K_CACHE": "f32", "V_CACHE": "f32"}, subgroups)["y"]
    kw = dict(nh=nh, nkv=nkv, hd=hd, rows=rows, pos=pos, window=0, scale=hd**-0.5, softcap=0.0)
    # (f32 scores of ~1,000 carry ~1e-4 of rounding into the weights; a wrong max moves them by e^x)
    np.testing.assert_allclose(got, attention_ref(qkv, k_cache, v_cache, **kw), rtol=1e-3, atol=1e-4)
