"""GraphBuilder: the ops a decoder-only transformer is made of, emitted into a Graph.

Family generators (llama.py, qwen2.py, …) call these; every tensor the builder creates is sized
for the largest forward (graph.max_rows rows) and every weight it declares is split into shards
that fit one storage binding."""

from __future__ import annotations

from itertools import groupby

from ..errors import ModelFileError
from ..runtime.graph import Graph, Op, Tensor, WeightSpec, ceil_div
from ..runtime.linear_plan import (
    GEMV_MAX_ROWS,
    LOGIT_ROWS,
    LOGIT_ROWS_MAX,
    check_precision,
    choose_linear,
    embedding_grid,
    gemv_features,
    gemv_q8_input,
    linear_defines,
    linear_grid,
    linear_params,
    matmul_tile,
    q8_output_layout,
    q8_row_bytes,
    quantize_spread_grid,
)
from ..runtime.quant import FORMATS, GGUF_TYPES
from .attention_ops import AttentionOps
from .config import ModelConfig
from .graph_options import GraphOptions
from .recurrent_ops import RecurrentOps
from .rope import Rotary


class GraphBuilder(AttentionOps, RecurrentOps):
    def __init__(self, cfg: ModelConfig, tensor_info, options: GraphOptions):
        """options: how the graph is planned (graph_options.py says what each field means)."""
        max_rows, ring_slack = options.max_rows, options.ring_slack
        if ring_slack and ring_slack < max(max_rows, LOGIT_ROWS_MAX):
            raise ValueError(f"ring_slack {ring_slack} < a forward's rows ({max(max_rows, LOGIT_ROWS_MAX)})")
        self.cfg = cfg
        self.tensor_info = tensor_info  # checkpoint tensor name → TensorInfo (shape, dtype)
        self.g = Graph(max_rows)
        self.kv_capacity = options.kv_capacity
        self.half = options.half  # the device has shader-f16: half-precision weights stay half
        self.cpu = options.cpu  # the adapter runs on the CPU: the GEMV's CPU layout
        self.subgroup_min_size = options.subgroup_min_size  # the decode attention kernel (0: not known)
        self.k_format, self.v_format = options.kv_formats  # KV cache storage (kernels.KV_WORDS; rope_kv.wgsl says why)
        self.max_binding = options.max_binding
        self.ring_slack = ring_slack
        self.precision = check_precision(options.precision)
        self.dummy = self.g.tensor("dummy", 16, "dummy")
        self.ids = self.g.inputs["ids"] = self.g.tensor("ids", max_rows * 4, "input")
        self.cos_sin = self.rope_table("cos_sin", cfg.rope_theta, cfg.rope_scaling)
        self.kv_layers = 0
        # (output, merge params, fold_until) of the last attention() that folds: its partials for the O projection
        self._merge = None
        # A GEMV's output -> [its op, None or (norm weight, norm offset, (xq, xs)) once it quantizes
        # them for the GEMV after it (gemv.wgsl Q8_OUTPUT)]: gemv_input()'s producers.
        self._producers: dict[Tensor, list] = {}
        self._attention_outputs: list[Tensor] = []
        self._count = 0

    def rope_table(self, name: str, theta: float, scaling: dict | None) -> Tensor:
        """A cos/sin input of every forward (Graph.rotary: the engine fills it per forward) for
        RoPE of this base and scaling; rope_kv() takes it. A model has one, or one per layer kind."""
        rotary = Rotary(self.cfg.rotary_dim, theta, scaling)
        self.g.rotary[name] = rotary
        self.g.inputs[name] = self.g.tensor(name, self.g.max_rows * rotary.row_bytes, "input")
        return self.g.inputs[name]

    def act(self, label: str, width: int, rows: int | None = None) -> Tensor:
        self._count += 1
        return self.g.tensor(f"{label}#{self._count}", (rows or self.g.max_rows) * width * 4)

    # weights ---------------------------------------------------------------------------------
    def shape(self, name: str) -> tuple:
        return self.tensor_info(name).shape

    def weight_format(self, name: str) -> str:
        """How the kernels read this matrix: in its stored format wherever one exists (f32, f16,
        bf16, ggml blocks, MLX 4-bit). f16 without shader-f16 is read as packed pairs; the odd
        16-bit matrix with an odd row length is converted to f32 (or f16) at upload."""
        info = self.tensor_info(name)
        k = info.shape[-1]
        if info.dtype == "F32":
            return "f32"
        if info.dtype == "F16":
            return "f16" if self.half else ("f16_packed" if k % 2 == 0 else "f32")
        if info.dtype == "BF16":
            return "bf16" if k % 2 == 0 else ("f16" if self.half else "f32")
        fmt = GGUF_TYPES.get(info.dtype) or info.dtype.lower()
        if fmt not in FORMATS:
            known = ", ".join(sorted(set(GGUF_TYPES) - {"F32", "F16", "BF16"}))
            raise ModelFileError(
                info.path,
                f"tensor {name!r}: weight type {info.dtype} is not supported "
                f"(supported: F32, F16, BF16, {known}, MLX 4-bit)",
            )
        try:
            FORMATS[fmt].check_k(k, getattr(info, "group", 64))
        except ValueError as exc:
            raise ModelFileError(info.path, f"tensor {name!r}: {exc}") from None
        return fmt

    def matrix(self, parts, **fused) -> tuple[list[tuple[Tensor, int, dict]], int, int]:
        """The row-concatenation of `parts` as weight shards, each (shard, its first row, the
        defines of the kernels that read it: linear_defines with `fused`), plus (rows N, columns K).
        Consecutive parts of one format share shards; a format change (a Q4_K_M file's Q6_K V next
        to Q4_K Q and K) starts new ones. A shard fits one binding."""
        parts = tuple(parts)
        k = self.shape(parts[0])[1]
        shards, first = [], 0
        for fmt, group in groupby(parts, key=self.weight_format):
            group = tuple(group)
            n = sum(self.shape(p)[0] for p in group)
            mlx_group = getattr(self.tensor_info(group[0]), "group", 64)
            layout = FORMATS[fmt]
            per_shard = max(1, self.max_binding // layout.matrix_bytes(1, k, mlx_group))
            spec = WeightSpec(group, "matrix")
            for r in range(0, n, per_shard):
                count = min(per_shard, n - r)
                nbytes = -(-layout.matrix_bytes(count, k, mlx_group) // 16) * 16
                shard = self.g.tensor(f"{group[0]}[{r}]", nbytes, "weight", weight=spec, rows=(r, count), dtype=fmt)
                defines = linear_defines(k, count, fmt, mlx_group, precision=self.precision, cpu=self.cpu, **fused)
                shards.append((shard, first + r, defines))
            first += n
        return shards, first, k

    def one_shard(self, parts) -> bool:
        """Whether the row-concatenation of `parts` is one format and fits one storage binding."""
        formats = {self.weight_format(p) for p in parts}
        if len(formats) != 1:
            return False
        k = self.shape(parts[0])[1]
        n = sum(self.shape(p)[0] for p in parts)
        group = getattr(self.tensor_info(parts[0]), "group", 64)
        return -(-FORMATS[formats.pop()].matrix_bytes(n, k, group) // 16) * 16 <= self.max_binding

    def vector(self, parts, rows: tuple | None = None) -> Tensor:
        """An f32 vector (norm weight, bias): the concatenation of `parts`, or its `rows` slice."""
        parts = tuple(parts)
        rows = rows or (0, sum(self.shape(p)[0] for p in parts))
        return self.g.tensor(parts[0], rows[1] * 4, "weight", weight=WeightSpec(parts, "vector"), rows=rows)

    # ops -------------------------------------------------------------------------------------
    def embedding(self, name: str, scale: float = 1.0) -> Tensor:
        shards, vocab, dim = self.matrix([name])
        y = self.act("embed", dim)
        for shard, start, defines in shards:
            self.g.op(
                "embedding",
                {"ids": self.ids, "w": shard, "y": y},
                {"dim": dim, "row_start": start, "row_count": shard.rows[1], "scale": scale},
                lambda rows, dim=dim: embedding_grid(dim, rows),
                defines,
            )
        return y

    def rmsnorm(
        self,
        x: Tensor,
        weight: str,
        last_row_only: bool = False,
        offset: float = 0.0,
        residual: Tensor | None = None,
    ) -> Tensor:
        """x RMS-normalised by `weight` (+ offset: Gemma's 1 + w), + residual (a post-norm:
        Gemma 2/3 normalise a sublayer's output before adding it). last_row_only: the rows the
        LM head scores (the forward's last, or its last Step.logit_rows)."""
        dim = self.shape(weight)[0]
        y = self.act("norm", dim, LOGIT_ROWS_MAX if last_row_only else None)
        self.g.op(
            "rmsnorm",
            {"x": x, "w": self.vector([weight]), "residual": residual or self.dummy, "y": y},
            {
                "dim": dim,
                "eps": self.cfg.rms_norm_eps,
                "w_offset": offset,
                "last_row_only": int(last_row_only),
                "add_residual": int(residual is not None),
                "pad0": 0,
                "pad1": 0,
                "pad2": 0,
            },
            (lambda rows: (min(rows, LOGIT_ROWS_MAX), 1, 1)) if last_row_only else (lambda rows: (rows, 1, 1)),
        )
        return y

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
        op.defines = {**op.defines, **layout, "Q8_OUTPUT": True, "Q8_OUT_NORM": norm_weight is not None}
        op.grid = self._linear_grid(op.params["N"], op.defines)
        op.bind = {**op.bind, "yq": xq}
        op.gemv_bind = dict(op.gemv_bind or {})
        if norm_weight is not None:
            op.bind["next_norm"] = norm_weight
            op.gemv_bind["norm"] = "next_norm"
            op.params = {**op.params, "norm_offset": norm_offset}
        producer[1] = (norm_weight, norm_offset, xq)
        return xq

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

    def logits(self, x_last: Tensor, head: str) -> Tensor:
        """LM head on the forward's scored rows (Step.logit_rows: its last, or its last few when
        drafted tokens are verified): [rows, vocab] float32 logits, the graph's output."""
        vocab = self.shape(head)[0]
        out = self.g.outputs["logits"] = self.g.tensor("logits", LOGIT_ROWS_MAX * vocab * 4, "output")
        return self.linear(x_last, [head], fixed_rows=1, out=out, rows=LOGIT_ROWS)

    def softcap(self, logits: Tensor, cap: float) -> Tensor:
        """cap * tanh(logits / cap) in place over the scored rows (Gemma 2's final softcapping)."""
        vocab = logits.nbytes // (LOGIT_ROWS_MAX * 4)
        self.g.op(
            "softcap",
            {"y": logits},
            {"count": vocab, "cap": cap, "pad0": 0, "pad1": 0},
            lambda rows: (ceil_div(vocab, 256), LOGIT_ROWS_MAX, 1),
        )
        return logits
