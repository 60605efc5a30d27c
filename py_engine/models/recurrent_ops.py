"""The recurrent half of GraphBuilder, for hybrids: causal short convolutions (LFM2's blocks,
Qwen3.5's DeltaNet input) and the gated delta rule. Their states are graph tensors of kind
"state" listed in Graph.recurrent: unlike a KV cache they cannot be read at an earlier position,
so the engine snapshots them and goes back by restoring one (py_engine/runtime/recurrent_state.py)."""

from __future__ import annotations

from math import prod

from ..errors import ModelFileError, UnsupportedArchitectureError
from ..runtime.graph import Tensor, WeightSpec, ceil_div
from ..runtime.linear_plan import LOGIT_ROWS_MAX
from . import delta_chunk_plan


class RecurrentOps:
    """Mixed into GraphBuilder (its cfg, g, dummy, shape, vector, act)."""

    def recurrent_state(self, name: str, floats: int) -> Tensor:
        t = self.g.tensor(f"{name}.{len(self.g.recurrent)}", floats * 4, "state")
        self.g.recurrent.append(t)
        return t

    def flat_vector(self, name: str) -> Tensor:
        """Every element of a small f32 tensor (a depthwise conv's [channels, 1, kernel] taps)."""
        shape = self.shape(name)
        return self.g.tensor(name, prod(shape) * 4, "weight", weight=WeightSpec((name,), "vector"), rows=(0, shape[0]))

    def conv_ring(self, weight: str) -> tuple[Tensor, int]:
        """A conv's state (shaders/short_conv.wgsl): a ring of its channels' inputs by position,
        kernel - 1 + the most rows delta_rule.wgsl takes, and its rows."""
        channels, kernel = self.shape(weight)[0], self.shape(weight)[-1]
        if not 1 <= kernel <= 4:
            raise ModelFileError(self.tensor_info(weight).path, f"{weight}: a conv of width {kernel} (at most 4)")
        ring = kernel - 1 + LOGIT_ROWS_MAX
        return self.recurrent_state("conv_state", ring * channels), ring

    def short_conv(
        self,
        x: Tensor,
        weight: str,
        x_stride: int,
        gated_bcx: bool,
        bias: str | None = None,
        ring: tuple[Tensor, int] | None = None,
        rows_range: tuple[int, int] | None = None,
    ) -> Tensor:
        """The causal depthwise conv of `weight` ([channels, 1, kernel]) over x's first channels
        per row (x_stride floats), then SiLU; gated_bcx: over B * X of x's B | C | X, then C * it
        (LFM2). Its state: conv_ring's (made here unless given)."""
        channels, kernel = self.shape(weight)[0], self.shape(weight)[-1]
        state, rows = ring or self.conv_ring(weight)
        y = self.act("conv", channels)
        self.g.op(
            "short_conv",
            {
                "x": x,
                "w": self.flat_vector(weight),
                "bias": self.vector([bias]) if bias else self.dummy,
                "state": state,
                "y": y,
            },
            {"channels": channels, "kernel": kernel, "x_stride": x_stride, "has_bias": int(bias is not None)}
            | {"ring": rows, "pad0": 0, "pad1": 0, "pad2": 0},
            lambda rows: (ceil_div(channels, 256), 1, 1),
            {"GATED_BCX": gated_bcx},
            rows_range=rows_range,
        )
        return y

    def gated_delta_net(self, x: Tensor, prefix: str, norm: str, norm_offset: float) -> Tensor:
        """Qwen3.5's linear-attention mixer of x (RMS-normalised by `norm` first): the fused
        q|k|v, z, b, a projection, then the short conv with SiLU over q|k|v and the gated delta
        rule (one dispatch for a decode token or a verifying forward's few rows,
        shaders/delta_rule.wgsl; a conv and two chunked passes for a prefill), then its gated
        RMSNorm. Returns its output before out_proj."""
        cfg = self.cfg
        nk, nv = cfg.linear_key_heads, cfg.linear_value_heads
        dk, dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        if not (nk and nv and dk and dv) or nv % nk or dk > 128:
            raise UnsupportedArchitectureError(
                f"{self.tensor_info(prefix + 'A_log').path}: DeltaNet heads {nk} x {dk} / {nv} x {dv}: need "
                "value heads a multiple of key heads and key heads of at most 128"
            )
        conv_dim, value_dim = 2 * nk * dk + nv * dv, nv * dv
        parts = [prefix + f"in_proj_{p}.weight" for p in ("qkv", "z", "b", "a")]
        proj = self.linear(x, parts, norm=norm, norm_offset=norm_offset)
        stride = conv_dim + value_dim + 2 * nv
        conv_weight = prefix + "conv1d.weight"
        ring = self.conv_ring(conv_weight)
        y = self.act("delta", value_dim)
        state = self.recurrent_state("delta_state", nv * dk * dv)
        a_log, dt_bias = self.vector([prefix + "A_log"]), self.vector([prefix + "dt_bias"])
        norm_weight = self.vector([prefix + "norm.weight"])
        params = delta_chunk_plan.params(
            nk=nk,
            nv=nv,
            dk=dk,
            dv=dv,
            proj_stride=stride,
            z_at=conv_dim,
            b_at=conv_dim + value_dim,
            a_at=conv_dim + value_dim + nv,
            a_is_log=cfg.a_is_log,
            eps=cfg.rms_norm_eps,
            heads_tiled=cfg.linear_value_heads_tiled,
        )
        # A decode token and a verifying forward's few rows: token by token in one dispatch, each
        # row as a decode token computes it (Engine.picks_after's promise). A prefill: chunked.
        few = min(LOGIT_ROWS_MAX, self.g.max_rows)
        self.g.op(
            "delta_rule",
            {"proj": proj, "conv_w": self.flat_vector(conv_weight), "a_log": a_log, "dt_bias": dt_bias}
            | {"conv_state": ring[0], "state": state, "y": y},
            params | {"conv_kernel": self.shape(conv_weight)[-1], "conv_ring": ring[1], "pad0": 0, "pad1": 0},
            lambda rows: (nv, ceil_div(dv, 16), 1),
            rows_range=(1, few),
        )
        if self.g.max_rows > few:
            many = (few + 1, self.g.max_rows)
            plan = delta_chunk_plan
            mixed = self.short_conv(proj, conv_weight, stride, gated_bcx=False, ring=ring, rows_range=many)
            chunks = self.act("delta_chunks", plan.scratch_bytes(self.g.max_rows, nv, dk, dv) // 4, 1)
            rule = {"mixed": mixed, "proj": proj, "a_log": a_log, "dt_bias": dt_bias, "state": state, "y": y}
            self.g.op(
                "delta_chunk_prep", rule | {"chunks": chunks}, params, lambda r: plan.prep_grid(r, nv), rows_range=many
            )
            self.g.op(
                "delta_chunk_scan", rule | {"chunks": chunks}, params, lambda r: plan.scan_grid(nv, dv), rows_range=many
            )
        norm_bind = {"proj": proj, "norm": norm_weight, "y": y}
        self.g.op("delta_norm", norm_bind, params, lambda rows: delta_chunk_plan.norm_grid(rows, nv))
        return y
