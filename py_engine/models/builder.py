"""GraphBuilder: the ops a decoder-only transformer is made of, emitted into a Graph.

Family generators (llama.py, qwen2.py, …) call these; every tensor the builder creates is sized
for the largest forward (graph.max_rows rows) and every weight it declares is split into shards
that fit one storage binding."""

from __future__ import annotations

from itertools import groupby

from ..errors import ModelFileError
from ..runtime.graph import Graph, Tensor, WeightSpec, ceil_div
from ..runtime.linear_plan import (
    LOGIT_ROWS,
    LOGIT_ROWS_MAX,
    check_precision,
    embedding_grid,
    linear_defines,
    weight_defines,
)
from ..runtime.quant import FORMATS, GGUF_TYPES
from .attention_ops import AttentionOps
from .config import ModelConfig
from .graph_options import GraphOptions
from .linear_ops import LinearOps
from .recurrent_ops import RecurrentOps
from .rope import Rotary


class GraphBuilder(AttentionOps, LinearOps, RecurrentOps):
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
        self.image_rows = options.image_rows
        # Each position's picture's end (0: text), for the prompt attention's keys (GraphOptions.picture_spans).
        self.picture_ends = None
        if options.image_rows and options.picture_spans:
            ends = self.g.tensor("picture_ends", options.kv_capacity * 4, "input")
            self.picture_ends = self.g.inputs["picture_ends"] = ends
        self.ring_slack = ring_slack
        self.precision = check_precision(options.precision)
        self.dummy = self.g.tensor("dummy", 16, "dummy")
        self.ids = self.g.inputs["ids"] = self.g.tensor("ids", max_rows * 4, "input")
        self.cos_sin = self.rope_table("cos_sin", cfg.rope_theta, cfg.rope_scaling)
        self.kv_layers = 0
        self.layer_caches: list[tuple[Tensor, Tensor]] = []  # each KV-owning layer's (k, v) caches, in order
        # (output, merge params, fold_until) of the last attention() that folds: its partials for the O projection
        self._merge = None
        # A GEMV's output -> [its op, None or (norm weight, norm offset, (xq, xs)) once it quantizes
        # them for the GEMV after it (gemv.wgsl Q8_OUTPUT)]: gemv_input()'s producers.
        self._producers: dict[Tensor, list] = {}
        # A last-rows RMSNorm's output -> its op, which may quantize it for the LM head (norm_quantizes).
        self._last_rows: dict[Tensor, object] = {}
        self._attention_outputs: list[Tensor] = []
        self._count = 0

    def rope_table(self, name: str, theta: float, scaling: dict | None, rotary_dim: int | None = None) -> Tensor:
        """A cos/sin input of every forward (Graph.rotary: the engine fills it per forward) for
        RoPE of this base and scaling over rotary_dim dims (default the config's); rope_kv() takes
        it. A model has one, or one per layer kind."""
        rotary_dim = rotary_dim or self.cfg.rotary_dim
        rotary = Rotary(rotary_dim, theta, scaling, mrope_section=self.cfg.mrope_section)
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
        if self.image_rows:
            self.splice_images(y, dim)
        return y

    def splice_images(self, y: Tensor, dim: int) -> None:
        """A vision-language model's image embeddings over the token embeddings y of the positions
        that hold picture tokens (embedding.wgsl BY_POSITION): the inputs image_slots (a slot per
        position of the context, 0xffffffff for text) and image_embeds (image_rows rows of dim)."""
        slots = self.g.inputs["image_slots"] = self.g.tensor("image_slots", self.kv_capacity * 4, "input")
        embeds = self.g.inputs["image_embeds"] = self.g.tensor("image_embeds", self.image_rows * dim * 4, "input")
        self.g.op(
            "embedding",
            {"ids": slots, "w": embeds, "y": y},
            {"dim": dim, "row_start": 0, "row_count": self.image_rows, "scale": 1.0},
            lambda rows: embedding_grid(dim, rows),
            {**weight_defines(dim, "f32"), "BY_POSITION": True},
            # Not in one-row forwards: a decode token is text, and a prompt's last row (its only
            # one-row forward) never a picture token (Engine.place_images refuses such a prompt).
            decode_skip=True,
        )

    def rmsnorm(
        self,
        x: Tensor,
        weight: str,
        last_row_only: bool = False,
        offset: float = 0.0,
        residual: Tensor | None = None,
        slices: int = 1,
        eps: float | None = None,
        out_scale: str | None = None,
    ) -> Tensor:
        """x RMS-normalised by `weight` (+ offset: Gemma's 1 + w), + residual (a post-norm:
        Gemma 2/3 normalise a sublayer's output before adding it). last_row_only: the rows the
        LM head scores (the forward's last, or its last Step.logit_rows). slices: each row is that
        many rows of the weight's length, each normalised on its own (Gemma 4's per-layer inputs).
        eps: other than the config's. out_scale: a one-number weight the result is multiplied by
        (Gemma 4's layer_scalar; rmsnorm.wgsl OUT_SCALE)."""
        dim = self.shape(weight)[0]
        y = self.act("norm", dim * slices, LOGIT_ROWS_MAX if last_row_only else None)
        scale = {"out_scale": self.vector([out_scale])} if out_scale else {}
        op = self.g.op(
            "rmsnorm",
            {"x": x, "w": self.vector([weight]), "residual": residual or self.dummy, "y": y, **scale},
            {
                "dim": dim,
                "eps": self.cfg.rms_norm_eps if eps is None else eps,
                "w_offset": offset,
                "last_row_only": int(last_row_only),
                "add_residual": int(residual is not None),
                "pad0": 0,
                "pad1": 0,
                "pad2": 0,
            },
            (lambda rows: (min(rows, LOGIT_ROWS_MAX), 1, 1)) if last_row_only else (lambda rows: (rows * slices, 1, 1)),
            {"OUT_SCALE": True} if out_scale else None,
        )
        if last_row_only:
            self._last_rows[y] = op
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
