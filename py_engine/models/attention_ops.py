"""The attention half of GraphBuilder: a layer's Q/K norm, RoPE and KV append (rope_kv), its K
and V caches (a ring for a sliding layer: py_engine/runtime/kv_cache.py) and flash-decoding attention
over them, whose split merge a decode token folds into the O projection (gemv.wgsl COMBINE)."""

from __future__ import annotations

from typing import NamedTuple

from ..runtime.graph import Tensor, ceil_div
from ..runtime.kernels import KV_BYTES
from ..runtime.linear_plan import MERGE_HEADS, attention_merge_params
from . import attention_grid

# A decode token merges the attention's splits inside the O projection (gemv.wgsl COMBINE) while
# each GEMV thread merges at most MERGE_WORK (x blocks it stages) x (splits in use): every
# workgroup merges the whole x, and past some point its latency costs more than the merge's own
# dispatch saves. H200, 2026-11-30, decode tok/s with MERGE_WORK 48 / 0 (never) / 8, same call:
# SmolLM2 (1 block a thread) from a 16-token prompt (1-5 splits) 886 / 825-858 / 899, from 200
# (4-8 splits) 844-855 / 843 / 844, 640 keys (11) 779 / 805, 4,500 keys (24) 554-561 / 636; the 8B
# shape (4 blocks) 3 splits 311.3 / 308.6 / 311.5, 4-6 splits 295.4 / 308.3 / 309.1, 11 splits
# 278 / 302. (On an H100 with session 33's GEMV, 48 had measured best.)
MERGE_WORK = 8
GEMV_THREADS = 256  # linear_plan.gemv_layout: LANES * SLOTS


def attention_splits(capacity: int, most: int) -> tuple[int, int]:
    """(keys per split, splits): at most `most` splits of a multiple of 64 keys (one tile)."""
    split_len = max(64, ceil_div(ceil_div(capacity, most), 64) * 64)
    return split_len, ceil_div(capacity, split_len)


class KVLayer(NamedTuple):
    """A layer's qkv and how rope_kv() normalises, rotates and caches its keys: attention() takes
    it (and in a one-row forward does rope_kv's work itself, with these norms and RoPE params:
    attention.wgsl ROPE_KV, the V norm and a layer without K/V of its own included)."""

    qkv: Tensor
    norms: dict  # cos_sin, q_norm, k_norm bindings
    rope: dict  # rope_kv's RoPE / QK-norm params
    gated: bool  # each q head's head_dim output-gate values follow it in qkv (Qwen3.5)
    v_norm: bool = False  # values RMS-normalised without a weight before they are cached (Gemma 4)
    # False: qkv holds the q heads only, and attention() reads another layer's caches (Gemma 4's
    # shared-KV layers).
    owns_kv: bool = True

    @property
    def q_head_stride(self) -> int:
        return self.rope["head_dim"] * (2 if self.gated else 1)

    @property
    def stride(self) -> int:
        """qkv's row: the q heads (and their gates), then the k and v heads."""
        kv = 2 * self.rope["n_kv_heads"] * self.rope["head_dim"] if self.owns_kv else 0
        return self.rope["n_heads"] * self.q_head_stride + kv


class AttentionOps:
    """Mixed into GraphBuilder (its cfg, g, kv_capacity, ring_slack, formats, dummy, vector, act,
    picture_ends)."""

    def rope_kv(
        self,
        qkv: Tensor,
        q_norm: str | None = None,
        k_norm: str | None = None,
        interleaved=False,
        cos_sin: Tensor | None = None,
        norm_offset: float = 0.0,
        gated: bool = False,
        head_dim: int | None = None,
        v_norm: bool = False,
        owns_kv: bool = True,
    ) -> KVLayer:
        """A layer's Q/K norm (+ norm_offset: Gemma 3's 1 + w), RoPE (the cos_sin table:
        rope_table's, default the model's) and KV append of qkv, for attention(): it sizes the
        layer's caches by its window and emits this op before its own (a forward of many rows
        runs it; in a one-row forward the attention does its work, ROPE_KV, and it is skipped).
        gated: each q head is followed by its output gate (Qwen3.5: attention() multiplies its
        output by sigmoid(gate)). head_dim: the layer's (default the config's; Gemma 4's full layers
        have their own), rotated over the cos_sin table's rotary_dim. v_norm: the values are
        RMS-normalised (no weight) before they are cached. owns_kv False: qkv holds only the q heads,
        whose K/V attention() takes from an earlier layer (its `reads`)."""
        cos_sin = cos_sin or self.cos_sin
        norms = {
            "cos_sin": cos_sin,
            "q_norm": self.vector([q_norm]) if q_norm else self.dummy,
            "k_norm": self.vector([k_norm]) if k_norm else self.dummy,
        }
        rope = {
            "rotary_dim": self.g.rotary[cos_sin.name].rotary_dim,
            "has_qk_norm": int(q_norm is not None),
            "interleaved": int(interleaved),
            "eps": self.cfg.rms_norm_eps,
            "norm_offset": norm_offset,
        }
        shape = {
            "n_heads": self.cfg.num_heads,
            "n_kv_heads": self.cfg.num_kv_heads,
            "head_dim": head_dim or self.cfg.head_dim,
        }
        return KVLayer(qkv, norms, {**shape, **rope}, gated, v_norm, owns_kv)

    def kv_rows(self, window: int) -> int:
        """Rows of a layer's K and V caches: a ring of window - 1 + ring_slack rows for a sliding
        layer (kv_cache.py), where that is fewer than the context's kv_capacity."""
        if window and self.ring_slack and window - 1 + self.ring_slack < self.kv_capacity:
            return window - 1 + self.ring_slack
        return self.kv_capacity

    def _kv_caches(self, kv: KVLayer, cache_rows: int) -> tuple[Tensor, Tensor]:
        """A new layer's K and V caches of cache_rows positions (kept in layer_caches)."""
        cache_elems = kv.rope["n_kv_heads"] * cache_rows * kv.rope["head_dim"]
        layer, self.kv_layers = self.kv_layers, self.kv_layers + 1
        k_cache = self.g.tensor(f"k_cache.{layer}", cache_elems * KV_BYTES[self.k_format], "state", dtype=self.k_format)
        v_cache = self.g.tensor(f"v_cache.{layer}", cache_elems * KV_BYTES[self.v_format], "state", dtype=self.v_format)
        self.layer_caches.append((k_cache, v_cache))
        return k_cache, v_cache

    def _rope_kv_op(self, kv: KVLayer, k_cache: Tensor, v_cache: Tensor, cache_rows: int) -> None:
        """The rope_kv op of kv's layer: its q heads rotated in place and, where it owns its
        caches, its keys and values appended to them (not in a one-row forward, whose attention
        does this itself: attention.wgsl ROPE_KV)."""
        heads = kv.rope["n_heads"] + (2 * kv.rope["n_kv_heads"] if kv.owns_kv else 0)
        self.g.op(
            "rope_kv",
            {**kv.norms, "qkv": kv.qkv, "k_cache": k_cache, "v_cache": v_cache},
            {
                "qkv_stride": kv.stride,
                "capacity": cache_rows,
                **kv.rope,
                "q_head_stride": kv.q_head_stride,
                "has_v_norm": int(kv.v_norm),
            },
            lambda rows: (heads, rows, 1),
            self.kv_defines(),
            decode_skip=True,
        )

    def kv_defines(self) -> dict:
        return {"K_CACHE": self.k_format, "V_CACHE": self.v_format}

    def attention(
        self, kv: KVLayer, window: int = 0, scale: float | None = None, softcap: float = 0.0, reads=None
    ) -> Tensor:
        """Attention of rope_kv()'s qkv over its layer's caches (made here: a ring for a sliding
        layer, kv_rows; the layer's (k, v) in layer_caches), keys within `window` of each query
        when window > 0. reads: an earlier layer's (k, v) caches (its layer_caches entry, of the
        same window and head_dim), which a layer without K/V of its own attends over (Gemma 4)."""
        heads, kv_heads, hd = kv.rope["n_heads"], kv.rope["n_kv_heads"], kv.rope["head_dim"]
        cache_rows = self.kv_rows(window)
        ring = cache_rows < self.kv_capacity
        if ring:
            self.g.ring_slack = self.ring_slack
        k_cache, v_cache = reads or self._kv_caches(kv, cache_rows)
        self._rope_kv_op(kv, k_cache, v_cache, cache_rows)
        # A few rows' forward (attention.wgsl) splits the keys finely: its few workgroups per
        # split wait on memory, and more splits keep more of them in flight. A prompt's
        # (attention_tiled.wgsl) has row blocks to spread and its partials are many rows'. An
        # adapter on the CPU takes one of each (attention_grid.CPU_SPLITS).
        most = attention_grid.CPU_SPLITS if self.cpu else attention_grid.FEW_ROWS_SPLITS
        split_len, splits = attention_splits(cache_rows, most)
        most_tiled = attention_grid.tiled_splits_most(self.g.max_rows, heads, hd)
        tiled_split_len, tiled_splits = attention_splits(
            cache_rows, attention_grid.CPU_SPLITS if self.cpu else most_tiled
        )
        # One tensor: the output [rows, heads * head_dim], then the per-split partials that
        # attention_combine merges into it, or (a decode token with few splits in use) the O
        # projection's GEMV as it reads them (COMBINE): one dispatch fewer. Every layer's is the
        # size of the largest (a ring's fewer splits leave its tail unused): one pool slot.
        max_rows = self.g.max_rows
        partial_rows = max(max_rows * tiled_splits, min(max_rows, attention_grid.FEW_ROWS) * splits)
        y = self.act("attn", max_rows * heads * hd + heads * partial_rows * (hd + 2), rows=1)
        self._attention_outputs.append(y)
        for t in self._attention_outputs:
            t.nbytes = max(t.nbytes, y.nbytes)
        partials_at = self.g.max_rows * heads * hd
        # COMBINE merges 4 dims of one head at a time, and keeps up to MERGE_HEADS heads' sums. A
        # layer folds while its keys fill at most `most` splits: where all its splits do (a ring's
        # keys never fill more), at every KV length.
        most = MERGE_WORK // ceil_div(heads * hd // 4, GEMV_THREADS)
        fold_until = 0
        if hd % 4 == 0 and heads <= MERGE_HEADS and most and not kv.gated:  # the combine applies a gate
            fold_until = split_len * most if splits > most else max(split_len * most, self.kv_capacity)
        kernel, kernel_defines = attention_grid.few_rows_kernel(
            heads, kv_heads, hd, (self.k_format, self.v_format), self.subgroup_min_size
        )
        # A vision model's picture tokens see their whole picture in a prompt (attention_tiled.wgsl
        # PICTURE_SPANS; its own bind group: attention.wgsl, of a few text rows, binds no such input).
        spans = {} if self.picture_ends is None else {"picture_ends": self.picture_ends}
        self.g.op(
            kernel,
            {"qkv": kv.qkv, "k_cache": k_cache, "v_cache": v_cache, "partials": y, **kv.norms, **spans},
            {
                "q_stride": kv.stride,
                "capacity": cache_rows,
                "window": window,
                "scale": scale if scale is not None else hd**-0.5,
                "softcap": softcap,
                "split_len": split_len,
                "splits": splits,
                **kv.rope,
                "partials_at": partials_at,
                "q_head_stride": kv.q_head_stride,
                "tiled_split_len": tiled_split_len,
                "tiled_splits": tiled_splits,
                "has_v_norm": int(kv.v_norm),
                "owns_kv": int(kv.owns_kv),
                "pad0": 0,
                "pad1": 0,
                "pad2": 0,
            },
            lambda rows: attention_grid.grid(rows, heads, kv_heads, hd, splits, tiled_splits),
            {
                **self.kv_defines(),
                "ROPE_KV": False,
                "RING": ring,
                "GROUP_HEADS": attention_grid.group_heads(heads, kv_heads, hd),
                **attention_grid.tiled_defines(hd, self.precision == "fast" and self.v_format == "f16"),
                **kernel_defines,
                **({"PICTURE_SPANS": True} if spans else {}),
            },
            decode_defines={"ROPE_KV": True},
            many_rows=(attention_grid.FEW_ROWS, "attention_tiled"),  # a prompt's: K/V tiles shared by its rows
        )
        gate = {"gate_stride": kv.stride if kv.gated else 0, "gate_head_stride": kv.q_head_stride, "gate_offset": hd}
        self.g.op(
            "attention_combine",
            {"attn": y, "gate": kv.qkv if kv.gated else self.dummy},
            {
                "n_heads": heads,
                "head_dim": hd,
                "splits": splits,
                "partials_at": partials_at,
                **gate,
                "split_len": split_len,
                "tiled_splits": tiled_splits,
                "tiled_split_len": tiled_split_len,
                "pad0": 0,
                "pad1": 0,
            },
            lambda rows: (heads, rows, 1),
            {"FEW_ROWS": attention_grid.FEW_ROWS},
            fold_skip=True,
            fold_until=fold_until,
        )
        merge = attention_merge_params(partials_at, hd, splits, split_len)
        self._merge = (y, merge, fold_until) if fold_until else None
        return y
