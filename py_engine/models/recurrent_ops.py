"""The recurrent half of GraphBuilder, for hybrids: causal short convolutions (LFM2's blocks,
Qwen3.5's DeltaNet input) and the gated delta rule. Their states are graph tensors of kind
"state" listed in Graph.recurrent: unlike a KV cache they cannot be read at an earlier position,
so the engine snapshots them and goes back by restoring one (py_engine/recurrent_state.py)."""

from __future__ import annotations

from math import prod

from ..graph import Tensor, WeightSpec, ceil_div
from ..linear_plan import LOGIT_ROWS_MAX
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

    def short_conv(self, x: Tensor, weight: str, x_stride: int, gated_bcx: bool, bias: str | None = None) -> Tensor:
        """The causal depthwise conv of `weight` ([channels, 1, kernel]) over x's first channels
        per row (x_stride floats), then SiLU; gated_bcx: over B * X of x's B | C | X, then C * it
        (LFM2). Its state: each channel's last kernel - 1 inputs."""
        channels, kernel = self.shape(weight)[0], self.shape(weight)[-1]
        if not 1 <= kernel <= 8:
            raise ValueError(f"{weight}: a conv of width {kernel} (at most 8)")
        y = self.act("conv", channels)
        self.g.op(
            "short_conv",
            {
                "x": x,
                "w": self.flat_vector(weight),
                "bias": self.vector([bias]) if bias else self.dummy,
                "state": self.recurrent_state("conv_state", channels * (kernel - 1)),
                "y": y,
            },
            {"channels": channels, "kernel": kernel, "x_stride": x_stride, "has_bias": int(bias is not None)},
            lambda rows: (ceil_div(channels, 256), 1, 1),
            {"GATED_BCX": gated_bcx},
        )
        return y

    def gated_delta_net(self, x: Tensor, prefix: str, norm: str, norm_offset: float) -> Tensor:
        """Qwen3.5's linear-attention mixer of x (RMS-normalised by `norm` first): the fused
        q|k|v, z, b, a projection, the short conv with SiLU over q|k|v, the gated delta rule and
        its gated RMSNorm (shaders/delta_rule.wgsl). Returns its output before out_proj."""
        cfg = self.cfg
        nk, nv = cfg.linear_key_heads, cfg.linear_value_heads
        dk, dv = cfg.linear_key_head_dim, cfg.linear_value_head_dim
        if not (nk and nv and dk and dv) or nv % nk or max(dk, dv) > 256:
            raise ValueError(f"DeltaNet heads {nk}x{dk} / {nv}x{dv}: need nv a multiple of nk, dims <= 256")
        conv_dim, value_dim = 2 * nk * dk + nv * dv, nv * dv
        parts = [prefix + f"in_proj_{p}.weight" for p in ("qkv", "z", "b", "a")]
        proj = self.linear(x, parts, norm=norm, norm_offset=norm_offset)
        stride = conv_dim + value_dim + 2 * nv
        mixed = self.short_conv(proj, prefix + "conv1d.weight", stride, gated_bcx=False)
        y = self.act("delta", value_dim)
        state = self.recurrent_state("delta_state", nv * dk * dv)
        rule = {"mixed": mixed, "proj": proj, "a_log": self.vector([prefix + "A_log"]), "state": state, "y": y}
        rule["dt_bias"] = self.vector([prefix + "dt_bias"])
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
        # A decode token and a verifying forward's few rows: token by token, each row as a decode
        # token computes it (Engine.picks_after's promise). A prefill: the chunked form.
        few = min(LOGIT_ROWS_MAX, self.g.max_rows)
        self.g.op("delta_rule", rule, params, lambda rows: (nv, ceil_div(dv, 16), 1), rows_range=(1, few))
        if self.g.max_rows > few:
            many = (few + 1, self.g.max_rows)
            plan = delta_chunk_plan
            chunks = self.act("delta_chunks", plan.scratch_bytes(self.g.max_rows, nv, dk, dv) // 4, 1)
            self.g.op(
                "delta_chunk_prep", {**rule, "chunks": chunks}, params, lambda r: plan.prep_grid(r, nv), rows_range=many
            )
            self.g.op(
                "delta_chunk_scan",
                {**rule, "chunks": chunks},
                params,
                lambda r: plan.scan_grid(nv, dv),
                rows_range=many,
            )
        norm = {"proj": proj, "norm": self.vector([prefix + "norm.weight"]), "y": y}
        self.g.op("delta_norm", norm, params, lambda rows: delta_chunk_plan.norm_grid(rows, nv))
        return y
