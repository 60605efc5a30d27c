"""Which attention kernel a forward runs and how large a grid it dispatches (pure Python).

A forward of at most FEW_ROWS rows (a decode token, or the drafted tokens a forward verifies) runs
shaders/attention.wgsl (attention_subgroups.wgsl on devices whose subgroups are 32 or more
wide): a workgroup per (group of q heads sharing a KV head, row, split of the keys), each key
read once for the group's heads. A longer forward (a prompt) runs
shaders/attention_tiled.wgsl: a workgroup per (KV head, block of rows, split), its K and V tiles
staged in workgroup memory once for every (row, q head) of the block. Both write the same
per-split partials, which attention_combine.wgsl (or a decode token's O projection) merges.
H200, the 8B shape (32 q heads, 8 KV heads), one 128-row prompt forward after 4,000 keys, its 32
layers' attention: attention_tiled.wgsl 34.8 ms, attention.wgsl (GQA groups, a row per workgroup)
64.2 ms; the kernel before GQA groups (a q head and a row per workgroup) took 41.0 ms a layer for
512 rows, attention_tiled.wgsl 4.4.
"""

from __future__ import annotations

from ..runtime.graph import ceil_div
from ..runtime.linear_plan import LOGIT_ROWS_MAX

# Forwards of up to this many rows take attention.wgsl: a decode token, and picks_after's
# verifying forward, whose rows must equal one-token decodes bit for bit.
FEW_ROWS = LOGIT_ROWS_MAX

# The most splits of a layer's keys (attention_ops.attention_splits: of a multiple of 64 keys) for
# a few rows' forward and for a prompt's (at most TILED_PARTIALS_BYTES of partials: they are
# max_rows rows'). H200, the 8B shape's decode token at 4,200 keys: 22 splits of 192 keys, attention
# 1.38 ms + their merge 0.34; 66 of 64 keys, 1.31 + 0.68.
FEW_ROWS_SPLITS = 32
TILED_SPLITS = 32
# On an adapter on the CPU (Capabilities.cpu) every workgroup costs, even one that finds no keys
# in its split (SwiftShader, 2 cores: a few ms each), and the cores are few: a layer's keys in one
# split. SmolLM2's decode token at 41 keys in the page on SwiftShader (its 2,048-token context: 32
# splits of 64), its 30 layers' attention timed alone: 8.2 s, 6.5 with the empty splits returning
# at once, 0.19 in one split (the GEMVs ~2 s); end to end 5 -> 2.5 s a token (docs/browser.md).
CPU_SPLITS = 1
TILED_PARTIALS_BYTES = 64 << 20


def tiled_splits_most(max_rows: int, n_heads: int, head_dim: int) -> int:
    """The most splits attention_tiled.wgsl's partials may have for a forward of max_rows rows."""
    return max(1, min(TILED_SPLITS, TILED_PARTIALS_BYTES // (max_rows * n_heads * (head_dim + 2) * 4)))


# attention.wgsl keeps its group's q vectors in workgroup memory as vec4s of 4 heads per
# dimension (at most 2 vec4s, 8 heads, of at most 256 dimensions; WIDE_HEADS: one vec4, 4 heads, of
# at most HEAD_DIM_MAX).
GROUP_HEADS_MAX = 8
# The widest head every attention path takes (config_check.MAX_HEAD_DIM): Gemma 4's full layers.
HEAD_DIM_MAX = 512
# attention.wgsl's heads past this many dimensions are WIDE_HEADS: its workgroup arrays sized for
# HEAD_DIM_MAX, a thread's two value dimensions, fewer heads a workgroup (few_rows_kernel).
NARROW_HEAD_DIM = 256


def wide_heads(head_dim: int) -> bool:
    """attention.wgsl's WIDE_HEADS: head_dim past NARROW_HEAD_DIM (up to HEAD_DIM_MAX)."""
    return head_dim > NARROW_HEAD_DIM


# attention_tiled.wgsl's threads a workgroup, and the rows each (q head, rows) slot takes.
TILED_THREADS = 256
TILED_ROWS_PER_SLOT = 2


def group_heads(n_heads: int, n_kv_heads: int, head_dim: int) -> int:
    """q heads one attention.wgsl workgroup takes (its GROUP_HEADS): the largest divisor of the
    GQA group size (q heads per KV head) that is at most GROUP_HEADS_MAX and whose q vectors fit
    its workgroup array (a vec4 of 4 heads per dimension, 256 vec4s; WIDE_HEADS: HEAD_DIM_MAX)."""
    group = n_heads // n_kv_heads
    room = HEAD_DIM_MAX if wide_heads(head_dim) else NARROW_HEAD_DIM
    fits = [d for d in range(1, min(group, GROUP_HEADS_MAX) + 1) if -(-d // 4) * head_dim <= room]
    return max(d for d in fits if group % d == 0)


def attention_grid(rows: int, n_heads: int, n_kv_heads: int, head_dim: int, splits: int) -> tuple[int, int, int]:
    """attention.wgsl's workgroups: (head groups, rows, splits)."""
    return (n_heads // group_heads(n_heads, n_kv_heads, head_dim), rows, splits)


# attention_subgroups.wgsl: a decode token's attention in warps of 32 invocations (subgroups at
# least 32 wide, a multiple of 32), each its own online softmax, no barrier between its keys
# (attention.wgsl waits at 3 a tile of 64 keys). H200, benchmarks/probes/attention_rate.py
# --rows 1, a layer: the 8B shape at 4,513 keys 32.4 -> 19.1 us
# (4 subgroups a workgroup; 19.5 with 8), at 129 keys 11.5 -> 7.9; SmolLM2 at 4,513 16.6 -> 9.8 (8
# subgroups; 10.9 with 4).
SUBGROUP_LANES = 32


def subgroup_warps(head_dim: int) -> int:
    """attention_subgroups.wgsl's subgroups a workgroup (WARPS): 8 for head_dim <= 64, else 4."""
    return 8 if head_dim <= 64 else 4


def few_rows_kernel(n_heads: int, n_kv_heads: int, head_dim: int, kv_formats: tuple[str, str], subgroup_min_size: int):
    """(kernel, its own defines) of a forward of few rows: attention_subgroups.wgsl where the
    device's subgroups are at least 32 wide (subgroup_min_size, which every device known to run
    them has as a multiple of 32) and the shape fits its loads (a lane's words of a key and of the
    values a step: 1, 2, 4 or 8; a value row at most 32 words: never a head past 256 dimensions),
    else attention.wgsl (WIDE_HEADS: wide_heads)."""
    k_elems, v_elems = (4 if f == "f32" else 8 for f in kv_formats)
    key_words, value_words = head_dim // k_elems, head_dim // v_elems
    key_lanes = 8 if key_words > 32 else 4
    warps = subgroup_warps(head_dim)
    qv = ceil_div(group_heads(n_heads, n_kv_heads, head_dim), 4)
    powers = (1, 2, 4, 8)
    fits = (
        subgroup_min_size >= SUBGROUP_LANES
        and head_dim % (k_elems * key_lanes) == 0
        and head_dim % v_elems == 0
        and key_words // key_lanes in powers
        and value_words in (1, 2, 4, 8, 16, 32)
        and SUBGROUP_LANES // key_lanes // (SUBGROUP_LANES // value_words) in powers
        and warps // 2 * qv * head_dim <= 512
        and not wide_heads(head_dim)
    )
    if not fits:
        return "attention", {"WIDE_HEADS": wide_heads(head_dim)}
    return "attention_subgroups", {"HEAD_DIM": head_dim, "WARPS": warps}


def tiled_lanes(head_dim: int) -> int:
    """attention_tiled.wgsl's threads a slot (its LANES): 4, 8 for head_dim > 128, 16 for > 256
    (a lane's q and output chunks of both rows stay 4 x 32 floats)."""
    return 16 if head_dim > 256 else 8 if head_dim > 128 else 4


def tiled_block(n_heads: int, n_kv_heads: int, head_dim: int) -> tuple[int, int]:
    """(q heads, rows) of one attention_tiled.wgsl workgroup: all of a KV head's q heads (at most
    its slots, TILED_THREADS / tiled_lanes) and as many row pairs as fill the rest."""
    slots = TILED_THREADS // tiled_lanes(head_dim)
    heads = min(n_heads // n_kv_heads, slots)
    return heads, TILED_ROWS_PER_SLOT * (slots // heads)


def tiled_defines(head_dim: int, f16_math: bool = False) -> dict:
    """attention_tiled.wgsl's defines from the model's shape: HEAD_VEC4S, the vec4 chunks of a head
    vector (ceil(head_dim / 4)), which size its per-lane registers and its K / V tile; and its
    arithmetic: F16_MATH (K and V staged in f16, a lane's dots and a tile's weighted values summed
    in f16: precision "fast" on a device with shader-f16) with ATT_MATH, the staged type."""
    return {"HEAD_VEC4S": ceil_div(head_dim, 4), "F16_MATH": f16_math, "ATT_MATH": "f16" if f16_math else "f32"}


def tiled_grid(rows: int, n_heads: int, n_kv_heads: int, head_dim: int, splits: int) -> tuple[int, int, int]:
    """attention_tiled.wgsl's workgroups: (KV heads x head blocks, row blocks, splits)."""
    heads, block_rows = tiled_block(n_heads, n_kv_heads, head_dim)
    return (n_kv_heads * ceil_div(n_heads // n_kv_heads, heads), ceil_div(rows, block_rows), splits)


def grid(
    rows: int, n_heads: int, n_kv_heads: int, head_dim: int, splits: int, tiled_splits: int
) -> tuple[int, int, int]:
    """The grid of the attention kernel a forward of `rows` rows runs (splits: attention.wgsl's,
    tiled_splits: attention_tiled.wgsl's)."""
    if rows <= FEW_ROWS:
        return attention_grid(rows, n_heads, n_kv_heads, head_dim, splits)
    return tiled_grid(rows, n_heads, n_kv_heads, head_dim, tiled_splits)


# An encoder's bidirectional attention (bert.encoder_attention): forwards of at most this many
# rows take shaders/encoder_attention.wgsl (a workgroup per head and row); longer ones
# encoder_attention_tiled.wgsl (a workgroup per head and block of rows, K and V tiles shared by
# the block). H200, a tile's attention in all layers, encoder_attention.wgsl -> the tiled kernel
# (4 lanes; f32): SmolVLM-256M's tower (1,024 patch rows, 12 heads of 64, 12 layers) 23.9 -> 5.7
# ms, Gemma 3's (4,096 rows, 16 heads of 72, 27 layers) 2,391 -> 241.
ENCODER_FEW_ROWS = 16
# The tiled kernel's slots take 2 lanes where its workgroups would number at least this many with
# them (and the head is at most 128 wide): fewer lanes, fewer redundant softmax steps and shuffles,
# twice the rows a workgroup. H200, lanes 2 / 4 / 8, f32 (F16_MATH): Gemma 3's tower (256
# workgroups at 2 lanes) 184 / 241 / 305 ms (164 / 182 / 273); SmolVLM's (48 at 2) 9.2 / 5.7 / 6.6
# (7.9 / 5.8 / 6.1).
ENCODER_WIDE_WORKGROUPS = 256


def encoder_lanes(rows: int, n_heads: int, head_dim: int, subgroup_min_size: int) -> int:
    """encoder_attention_tiled.wgsl's threads a slot (its LANES) for forwards of up to `rows` rows:
    1 without subgroups (subgroup_min_size 0: none, or not known); with them (WebGPU's are at least
    4 wide) 2 where that makes ENCODER_WIDE_WORKGROUPS workgroups or more, else 4."""
    if subgroup_min_size < 4:
        return 1
    wide = n_heads * ceil_div(rows, TILED_ROWS_PER_SLOT * TILED_THREADS // 2) >= ENCODER_WIDE_WORKGROUPS
    return 2 if wide and head_dim <= 128 else 4


def encoder_defines(head_dim: int, lanes: int, f16_math: bool = False) -> dict:
    """encoder_attention_tiled.wgsl's defines: HEAD_VEC4S, LANES (encoder_lanes'), and its
    arithmetic as tiled_defines' (F16_MATH: precision "fast" on a device with shader-f16)."""
    f16 = {"F16_MATH": f16_math, "ATT_MATH": "f16" if f16_math else "f32"}
    return {"HEAD_VEC4S": head_dim // 4, "LANES": lanes, **f16}


def encoder_grid(rows: int, n_heads: int, lanes: int) -> tuple[int, int, int]:
    """The grid of an encoder's attention over `rows` rows: encoder_attention.wgsl's (a workgroup per
    head and row) for few rows, else encoder_attention_tiled.wgsl's (a workgroup per head and block
    of TILED_ROWS_PER_SLOT rows a slot, TILED_THREADS / lanes slots)."""
    if rows <= ENCODER_FEW_ROWS:
        return (n_heads, rows, 1)
    return (n_heads, ceil_div(rows, TILED_ROWS_PER_SLOT * TILED_THREADS // lanes), 1)
