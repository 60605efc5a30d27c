"""shaders/cross_attention.wgsl and cross_attention_merge.wgsl against numpy: every query row
over every frame of a frozen K/V (Whisper's 1,500 frames in splits, Moonshine's odd head sizes, a
window of fewer frames than the buffers hold, grouped K/V heads)."""

import numpy as np
import pytest
from gpu_harness import as_f32, run_kernel

from py_engine.models.audio_ops import CROSS_SPLIT, NO_LENGTH
from py_engine.runtime.graph import ceil_div


def cross_ref(q, k, v, heads, kv_heads, hd, scale):
    rows, frames = q.shape[0], k.shape[0]
    y = np.zeros((rows, heads * hd))
    group = heads // kv_heads
    for h in range(heads):
        g = h // group
        s = scale * q[:, h * hd : (h + 1) * hd].astype(np.float64) @ k[:, g * hd : (g + 1) * hd].T
        w = np.exp(s - s.max(axis=1, keepdims=True))
        y[:, h * hd : (h + 1) * hd] = (w / w.sum(axis=1, keepdims=True)) @ v[:, g * hd : (g + 1) * hd]
    assert frames
    return y


def run_cross(q, k, v, heads, kv_heads, hd, splits, frames_used=None):
    rows, frames = q.shape[0], k.shape[0]
    split_len = ceil_div(ceil_div(frames, splits), CROSS_SPLIT) * CROSS_SPLIT  # as audio_ops.cross_attention
    scale = hd**-0.5
    res = run_kernel(
        "cross_attention",
        {
            "q": q.astype(np.float32),
            "k": k.astype(np.float32),
            "v": v.astype(np.float32),
            "lengths": np.array([frames_used or 0, 0], np.uint32),
            "partials": rows * heads * splits * (hd + 2) * 4,
        },
        {
            "n_heads": heads,
            "head_dim": hd,
            "kv_group": heads // kv_heads,
            "frames": frames,
            "q_stride": heads * hd,
            "q_offset": 0,
            "kv_stride": kv_heads * hd,
            "scale": scale,
            "split_len": split_len,
            "splits": splits,
            "frames_at": 0 if frames_used else NO_LENGTH,
            "pad0": 0,
        },
        grid=(heads, rows, splits),
    )
    partials = np.frombuffer(res["partials"], np.float32)
    merged = run_kernel(
        "cross_attention_merge",
        {"partials": partials, "y": rows * heads * hd * 4},
        {"n_heads": heads, "head_dim": hd, "splits": splits, "pad0": 0},
        grid=(heads, rows, 1),
    )
    return as_f32(merged["y"], (rows, heads * hd))


# (rows, frames, heads, kv_heads, head_dim, splits, frames used)
CASES = {
    "whisper_decode": (1, 1500, 4, 4, 64, 24, None),
    "splits_past_a_chunk": (1, 1500, 4, 4, 64, 5, None),  # 320 frames a split: a chunk of 256, one of 64
    "whisper_prompt_one_split": (5, 1500, 2, 2, 64, 1, None),
    "moonshine_window": (3, 400, 8, 8, 36, 2, 251),
    "grouped_kv": (2, 300, 4, 2, 52, 2, None),
    "more_splits_than_frames": (1, 100, 2, 2, 64, 3, None),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_cross_attention_matches_numpy(case):
    rows, frames, heads, kv_heads, hd, splits, used = case
    rng = np.random.default_rng(frames + rows)
    q = rng.standard_normal((rows, heads * hd)) * 2
    k = rng.standard_normal((frames, kv_heads * hd))
    v = rng.standard_normal((frames, kv_heads * hd))
    got = run_cross(q, k, v, heads, kv_heads, hd, splits, used)
    n = used or frames
    want = cross_ref(q, k[:n], v[:n], heads, kv_heads, hd, hd**-0.5)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
