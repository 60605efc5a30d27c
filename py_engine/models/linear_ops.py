"""The linear half of GraphBuilder: a matrix times x by the forward's rows (a decode token's GEMVs,
a prefill's matmuls; linear_plan.choose_linear), optionally RMS-normalising x first and adding a
bias and a residual. int8 activations are quantized once per input (quantize_rows: for a prefill's
int8 matmuls, or spread for a decode token's Q8_INPUT GEMVs), or by the GEMV that writes the input,
which quantizes its own outputs for the GEMV after it (gemv.wgsl Q8_OUTPUT: gemv_quantizes), or
for the LM head by the final RMSNorm (rmsnorm.wgsl Q8_OUTPUT: norm_quantizes). Also
the fused q|k|v projection and the gated MLP (act(gate) * up: one dispatch where gate | up is one
format in one binding)."""

from __future__ import annotations

from ..runtime.graph import Op, Tensor, ceil_div
from ..runtime.linear_plan import (
    GEMV_MAX_ROWS,
    LOGIT_ROWS_MAX,
    choose_linear,
    gemv_features,
    gemv_groups,
    gemv_q8_input,
    linear_grid,
    linear_params,
    matmul_tile,
    q8_output_layout,
    q8_row_bytes,
    quantize_spread_grid,
)


class LinearOps:
    """Mixed into GraphBuilder (its cfg, g, dummy, shape, matrix, one_shard, vector, act, and the state
    its __init__ sets: _merge, attention()'s partials an O projection folds in, _producers, the
    GEMVs that may quantize their outputs, and _last_rows, the final norms that may)."""

    def linear(
        self,
        x: Tensor,
        parts,
        bias=None,
        residual: Tensor | None = None,
        fixed_rows: int = 0,
        out: Tensor | None = None,
        norm: str | None = None,
        norm_offset: float = 0.0,
        rows: int | None = None,
    ) -> Tensor:
        """x (RMS-normalised by the `norm` weight first, when given) times the row-concatenation
        of `parts`, + bias, + residual. rows: the kernel's row count (linear_params; default
        fixed_rows)."""
        shards, n, k = self.matrix(parts, norm=norm is not None)
        y = out or self.act("linear", n, fixed_rows or None)
        norm_weight = self.vector([norm]) if norm else self.dummy
        merges = self._merge is not None and x is self._merge[0]  # x: attention() with its partials
        quantized = gemv_quantized = None
        if not fixed_rows and rows is None and any(d["Q8_MATMUL"] for _, _, d in shards):
            levels = shards[0][2]["X_LEVELS"]
            quantized = self.quantize_rows(x, k, norm_weight if norm else None, norm_offset, levels)
        if not fixed_rows and rows is None and not merges:
            gemv_quantized = self.gemv_input(
                x, k, n, [d for _, _, d in shards], norm_weight if norm else None, norm_offset
            )
        elif x in self._last_rows and not norm and any(gemv_q8_input(d, k, n) for _, _, d in shards):
            gemv_quantized = self.norm_quantizes(x, k)  # the LM head's x, from the final norm
        for shard, start, defines in shards:
            count = shard.rows[1]
            op = self._linear_op(
                {
                    "x": x,
                    "w": shard,
                    "bias": self.vector(bias, (start, count)) if bias else self.dummy,
                    "residual": residual or self.dummy,
                    "y": y,
                    "norm": norm_weight,
                },
                linear_params(
                    k,
                    count,
                    out_stride=n,
                    out_offset=start,
                    rows=fixed_rows if rows is None else rows,
                    bias=bias is not None,
                    residual=residual is not None,
                    norm_eps=self.cfg.rms_norm_eps if norm else 0.0,
                    norm_offset=norm_offset,
                    combine=self._merge[1] if merges else None,
                ),
                defines,
                fixed_rows,
                fold_defines={"COMBINE": True} if merges else None,
                fold_until=self._merge[2] if merges else 0,
                quantized=quantized,
                gemv_quantized=gemv_quantized if gemv_q8_input(defines, k, n) else None,
            )
        if len(shards) == 1 and out is None and not fixed_rows and rows is None:
            self._producers[y] = [op, None]
        return y

    def quantize_rows(
        self, x: Tensor, k: int, norm_weight: Tensor | None, norm_offset: float, levels: int, spread: bool = False
    ) -> tuple:
        """x's rows (times norm_weight + norm_offset, with their RMS factors) as `levels` int8
        levels (the matmuls' X_LEVELS) for the int8 matmuls after it (shaders/quantize_rows.wgsl),
        in the forwards that run them (more than GEMV_MAX_ROWS rows): (xq, xs), their
        Op.matmul_bind inputs. spread: two levels for the GEMVs after it (gemv.wgsl Q8_INPUT,
        linear_plan.gemv_q8_input) in the forwards that run those (Op.gemv_bind): (xq,), its scales
        inside it."""
        xq = self.act("xq", q8_row_bytes(k) // 4 if spread else levels * k // 4)
        xs = None if spread else self.act("xs", 2 * (k // 32) + 1)
        self.g.op(
            "quantize_rows",
            {"x": x, "norm": norm_weight or self.dummy, "xq": xq, **({"xs": xs} if xs else {})},
            {
                "K": k,
                "has_norm": int(norm_weight is not None),
                "norm_eps": self.cfg.rms_norm_eps if norm_weight is not None else 0.0,
                "norm_offset": norm_offset,
            },
            (lambda rows: quantize_spread_grid(k, rows)) if spread else (lambda rows: (rows, 1, 1)),
            {"X_LEVELS": levels, "SPREAD": spread},
            rows_range=(1, GEMV_MAX_ROWS) if spread else (GEMV_MAX_ROWS + 1, self.g.max_rows),
        )
        return (xq,) if spread else (xq, xs)

    def gemv_input(
        self, x: Tensor, k: int, n: int, shard_defines: list, norm_weight: Tensor | None, norm_offset: float
    ) -> Tensor | None:
        """x quantized once for a decode token's GEMVs on it where they read it so (gemv.wgsl
        Q8_INPUT, whose int8 units take two levels; linear_plan.gemv_q8_input of shard_defines,
        those GEMVs', over n weight rows of k): by the GEMV that writes x where it can
        (gemv_quantizes), else by a quantize_rows dispatch (spread); None: the GEMVs quantize x
        themselves."""
        if not any(gemv_q8_input(d, k, n) for d in shard_defines):
            return None
        return (
            self.gemv_quantizes(x, k, norm_weight, norm_offset)
            or self.quantize_rows(x, k, norm_weight, norm_offset, 2, spread=True)[0]
        )

    def gemv_quantizes(self, x: Tensor, k: int, norm_weight: Tensor | None, norm_offset: float) -> Tensor | None:
        """x as quantize_rows (spread) would leave it, written by the GEMV that computes x (a
        linear op of one shard that writes all of x): its workgroups quantize their own outputs
        (gemv.wgsl Q8_OUTPUT, times the next norm weight with Q8_OUT_NORM, which takes its norm
        binding: only where its own input's norm weight is not read there). None where it cannot."""
        producer = self._producers.get(x)
        if producer is None or k % 32:
            return None
        op, done = producer
        if done is not None:
            return done[2] if done[0] is norm_weight and done[1] == norm_offset else None
        layout = q8_output_layout(op.defines)
        norm_read = op.defines["NORM"] and not op.defines["Q8_INPUT"]
        if layout is None or (norm_weight is not None and norm_read):
            return None
        xq = self.act("xq", q8_row_bytes(k) // 4)
        op.defines = self._grouped(
            {**op.defines, **layout, "Q8_OUTPUT": True, "Q8_OUT_NORM": norm_weight is not None}, op.params["N"]
        )
        op.grid = self._linear_grid(op.params["N"], op.defines)
        op.bind = {**op.bind, "yq": xq}
        op.gemv_bind = dict(op.gemv_bind or {})
        if norm_weight is not None:
            op.bind["next_norm"] = norm_weight
            op.gemv_bind["norm"] = "next_norm"
            op.params = {**op.params, "norm_offset": norm_offset}
        producer[1] = (norm_weight, norm_offset, xq)
        return xq

    def norm_quantizes(self, x: Tensor, k: int) -> Tensor | None:
        """x (a last-rows RMSNorm's output: the LM head's input) also as quantize_rows (spread)
        would leave it, written by that RMSNorm (rmsnorm.wgsl Q8_OUTPUT), so that the head's GEMVs
        read it quantized (Q8_INPUT) instead of each workgroup staging and quantizing f32 x. H200, the
        8B shape's Q8_0 head (two shards, 4096 x 30840 and x 18312): 53.6 and 36.2 us -> 44.1 and 29.9.
        None where k is no whole number of 32s."""
        if k % 32:
            return None
        op = self._last_rows[x]
        if "yq" not in op.bind:
            op.defines = {**op.defines, "Q8_OUTPUT": True}
            op.bind = {**op.bind, "yq": self.act("xq", q8_row_bytes(k) // 4, LOGIT_ROWS_MAX)}
        return op.bind["yq"]

    def qkv(self, x: Tensor, attn: str, norm: str, norm_offset: float = 0.0, bias: bool | None = None) -> Tensor:
        """A layer's fused q|k|v projection (`attn`: its "model.layers.N.self_attn." prefix) of x
        RMS-normalised by `norm`, with the q/k/v biases where bias (default: the config's
        attention_bias) says so."""
        bias = self.cfg.attention_bias if bias is None else bias
        return self.linear(
            x,
            [attn + f"{p}_proj.weight" for p in "qkv"],
            bias=[attn + f"{p}_proj.bias" for p in "qkv"] if bias else None,
            norm=norm,
            norm_offset=norm_offset,
        )

    def _linear_op(
        self,
        bind: dict,
        params: dict,
        defines: dict,
        fixed_rows: int = 0,
        fold_defines: dict | None = None,
        fold_until: int = 0,
        quantized: tuple | None = None,
        gemv_quantized: Tensor | None = None,
    ) -> Op:
        """A "linear" op (gemv or matmul by the forward's rows) over params' N weight rows; with
        fold_defines, its folded form for decode tokens of at most fold_until keys (Op). An int8
        matmul (Q8_MATMUL) reads x as quantize_rows left it (`quantized`); without, the f32 one.
        The GEMV reads x as quantize_rows (spread) left it where `gemv_quantized` is given."""
        matmul_bind = gemv_bind = None
        defines = self._grouped(defines, params["N"])
        if gemv_quantized is not None:
            defines = {**defines, "Q8_INPUT": True}
            bind = {**bind, "gemv_xq": gemv_quantized}
            gemv_bind = {"x": "gemv_xq"}
        if defines["Q8_MATMUL"]:
            if quantized is None:
                defines = {**defines, "Q8_MATMUL": False}
            else:
                bind = {**bind, "xq": quantized[0], "xs": quantized[1]}
                matmul_bind = {"x": "xq", "norm": "xs"}
        return self.g.op(
            "linear",
            bind,
            params,
            self._linear_grid(params["N"], defines),
            defines,
            fixed_rows,
            fold_defines=fold_defines,
            fold_until=fold_until,
            matmul_bind=matmul_bind,
            gemv_bind=gemv_bind,
        )

    def _grouped(self, defines: dict, n: int) -> dict:
        """defines with the GEMV's GROUPS for n weight rows (linear_plan.gemv_groups; one on a CPU)."""
        return {**defines, "GROUPS": 1 if self.cpu else gemv_groups({**defines, "GROUPS": 1}, n)}

    @staticmethod
    def _linear_grid(n: int, defines: dict):
        """A linear op's grid function (rows -> workgroups) over n weight rows under `defines`."""
        per, tile, gated = gemv_features(defines), matmul_tile(defines), defines["GATED"]
        return lambda rows: linear_grid(
            choose_linear(rows), rows, n, gemv_per_group=per, gated=gated, matmul_per_group=tile
        )

    def gated_mlp(self, x: Tensor, gate_up: list, norm: str, gelu: bool = False, norm_offset: float = 0.0) -> Tensor:
        """act(gate . h) * (up . h) with h = x RMS-normalised by `norm`; gate_up: the gate and up
        matrices ([gate, up], or one fused tensor of gate rows then up rows). One dispatch where
        gate | up is one format in one binding, else the normalising gate | up projection and
        gated_mul."""
        if not self.one_shard(gate_up):
            inter = sum(self.shape(p)[0] for p in gate_up) // 2
            return self.gated_mul(self.linear(x, gate_up, norm=norm, norm_offset=norm_offset), inter, gelu)
        [(shard, _, defines)], n, k = self.matrix(gate_up, norm=True, gated=True, gelu=gelu)
        y = self.act("mlp", n // 2)
        norm_weight = self.vector([norm])
        quantized = (
            self.quantize_rows(x, k, norm_weight, norm_offset, defines["X_LEVELS"]) if defines["Q8_MATMUL"] else None
        )
        gemv_quantized = self.gemv_input(x, k, n, [defines], norm_weight, norm_offset)
        op = self._linear_op(
            {"x": x, "w": shard, "bias": self.dummy, "residual": self.dummy, "y": y, "norm": norm_weight},
            linear_params(k, n, out_stride=n // 2, norm_eps=self.cfg.rms_norm_eps, norm_offset=norm_offset),
            defines,
            quantized=quantized,
            gemv_quantized=gemv_quantized,
        )
        self._producers[y] = [op, None]
        return y

    def gated_mul(self, gate_up: Tensor, inter: int, gelu: bool = False) -> Tensor:
        """act(gate) * up of the fused gate|up projection: SiLU, or GELU-tanh (Gemma)."""
        y = self.act("mlp", inter)
        self.g.op(
            "gated_mul",
            {"gate_up": gate_up, "y": y},
            {"inter": inter, "pad0": 0, "pad1": 0, "pad2": 0},
            lambda rows: (ceil_div(inter, 256), rows, 1),
            {"GELU": gelu},
        )
        return y
