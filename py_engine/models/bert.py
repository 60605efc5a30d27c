"""BERT encoders (all-MiniLM-L6-v2, bge-small-en-v1.5: HF's BertModel) and the ops sentence
embeddings are made of: LayerNorm with bias, GELU, bidirectional attention over packed sequences,
pooling with L2 normalisation.

A forward packs several texts one after another into its rows, with no padding (an encoder's
attention cannot be cut into chunks the way a decoder's prefill is: every token sees the whole
text, so a text must fit one forward). Three inputs say where each text lies: `positions` (each
row's position in its text, for the position embeddings), `spans` (each row's text, first row and
end row: the rows its attention sees) and `seqs` (each text's rows, for pooling). Step.logit_rows
carries the number of texts, the graph's output rows ("embeddings": one vector per text).

Per layer (post-LN): q|k|v with biases -> attention -> output dense + bias + residual -> LayerNorm
-> intermediate dense + bias -> GELU -> output dense + bias + residual -> LayerNorm.
"""

from __future__ import annotations

from ..runtime.graph import Tensor, WeightSpec, ceil_div
from ..runtime.linear_plan import LOGIT_ROWS, embedding_grid
from . import attention_grid
from .builder import GraphBuilder
from .graph_options import GraphOptions

POOLING_MODES = {"cls": 0, "mean": 1, "lasttoken": 2}  # embed_pool.wgsl's modes
TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh")  # BERT configs' hidden_act for GELU's tanh form


class EmbeddingBuilder(GraphBuilder):
    """A GraphBuilder for embedding graphs, of options whose pooling says how an encoder pools a
    text's rows ("cls", "mean" or "lasttoken"), dense which projections follow (sentence_head) and
    normalize whether it L2-normalises the vectors. A causal LM's graph built with it ends in
    last-token pooling of its final norm's row instead of the LM head (decoder embedders,
    Qwen3-Embedding): the head is never read, so a checkpoint may leave it out."""

    def __init__(self, cfg, tensor_info, options: GraphOptions):
        super().__init__(cfg, tensor_info, options)
        self.pooling, self.normalize, self.dense = options.pooling, options.normalize, options.dense

    def logits(self, x_last: Tensor, head: str) -> Tensor:
        # x_last: the final norm of the forward's last row (Step.logit_rows = 1) in row 0.
        return pool(self, x_last, self.cfg.hidden_size, "cls", 1, output(self, self.cfg.hidden_size, 1))

    def softcap(self, logits: Tensor, cap: float) -> Tensor:
        return logits  # Gemma 2/3's final softcapping belongs to the logits


def build_bert(b: GraphBuilder):
    cfg = b.cfg
    g, hidden = b.g, cfg.hidden_size
    positions = input_tensor(b, "positions", 4)
    spans = input_tensor(b, "spans", 8)
    e = "embeddings."
    words = b.embedding(e + "word_embeddings.weight")
    where = gather(b, e + "position_embeddings.weight", positions)
    token_type = g.tensor(
        e + "token_type_embeddings.weight",
        hidden * 4,
        "weight",
        weight=WeightSpec((e + "token_type_embeddings.weight",), "vector"),
        rows=(0, 1),  # type 0's row: every token is of the first segment
    )
    x = layer_norm(b, words, e + "LayerNorm", residual=where, shift=token_type)
    for i in range(cfg.num_layers):
        p = f"encoder.layer.{i}."
        qkv_parts = [p + f"attention.self.{name}" for name in ("query", "key", "value")]
        qkv = b.linear(x, [n + ".weight" for n in qkv_parts], bias=[n + ".bias" for n in qkv_parts])
        a = encoder_attention(b, qkv, spans)
        out = p + "attention.output.dense."
        x = layer_norm(
            b, b.linear(a, [out + "weight"], bias=[out + "bias"], residual=x), p + "attention.output.LayerNorm"
        )
        inter = p + "intermediate.dense."
        h = gelu(b, b.linear(x, [inter + "weight"], bias=[inter + "bias"]), tanh=cfg.hidden_act in TANH_GELUS)
        out = p + "output.dense."
        x = layer_norm(b, b.linear(h, [out + "weight"], bias=[out + "bias"], residual=x), p + "output.LayerNorm")
    sentence_head(b, x)
    return g


def encoder_shapes(cfg) -> dict[str, tuple]:
    """BertModel's tensors -> the shapes they may have (models/tensor_check.py; None: any size)."""
    h, inter = cfg.hidden_size, cfg.intermediate_size
    e = "embeddings."
    shapes = {
        e + "word_embeddings.weight": ((cfg.vocab_size, h),),
        e + "position_embeddings.weight": ((cfg.max_position, h),),
        e + "token_type_embeddings.weight": ((None, h),),
    }
    norms = [e + "LayerNorm"]
    for i in range(cfg.num_layers):
        p = f"encoder.layer.{i}."
        for name, rows, cols in (
            ("attention.self.query", h, h),
            ("attention.self.key", h, h),
            ("attention.self.value", h, h),
            ("attention.output.dense", h, h),
            ("intermediate.dense", inter, h),
            ("output.dense", h, inter),
        ):
            shapes[p + name + ".weight"], shapes[p + name + ".bias"] = ((rows, cols),), ((rows,),)
        norms += [p + "attention.output.LayerNorm", p + "output.LayerNorm"]
    for norm in norms:
        shapes[norm + ".weight"] = shapes[norm + ".bias"] = ((h,),)
    return shapes


# ---- the ops ----------------------------------------------------------------------------------


def input_tensor(b: GraphBuilder, name: str, row_bytes: int) -> Tensor:
    """A per-forward input of row_bytes a row (the embedder writes it before each forward)."""
    if name not in b.g.inputs:
        b.g.inputs[name] = b.g.tensor(name, b.g.max_rows * row_bytes, "input")
    return b.g.inputs[name]


def gather(b: GraphBuilder, table: str, ids: Tensor) -> Tensor:
    """Rows of the embedding table `table` picked by the ids input `ids` (embedding.wgsl)."""
    return gather_rows(b, b.matrix([table]), ids)


def gather_rows(b: GraphBuilder, table: tuple, ids: Tensor) -> Tensor:
    """Rows of `table`, (shards, rows, width) as b.matrix gives a weight's, picked by the ids
    input `ids` (embedding.wgsl); a shard may be an f32 activation of the forward's rows (its
    defines weight_defines(width, "f32")), whose rows it then permutes."""
    shards, _, dim = table
    y = b.act("gather", dim)
    for shard, start, defines in shards:
        count = shard.rows[1] if shard.kind == "weight" else b.g.max_rows
        b.g.op(
            "embedding",
            {"ids": ids, "w": shard, "y": y},
            {"dim": dim, "row_start": start, "row_count": count, "scale": 1.0},
            lambda rows, dim=dim: embedding_grid(dim, rows),
            defines,
        )
    return y


def layer_norm(b: GraphBuilder, x: Tensor, prefix: str, residual: Tensor | None = None, shift=None) -> Tensor:
    """LayerNorm(x + residual + shift) with prefix's weight and bias (layernorm.wgsl)."""
    weight = b.vector([prefix + ".weight"])
    dim = weight.nbytes // 4
    y = b.act("layernorm", dim)
    b.g.op(
        "layernorm",
        {
            "x": x,
            "residual": residual or b.dummy,
            "shift": shift or b.dummy,
            "w": weight,
            "b": b.vector([prefix + ".bias"]),
            "y": y,
        },
        {
            "dim": dim,
            "eps": b.cfg.rms_norm_eps,
            "add_residual": int(residual is not None),
            "add_shift": int(shift is not None),
        },
        lambda rows: (rows, 1, 1),
    )
    return y


def gelu(b: GraphBuilder, x: Tensor, tanh: bool = False) -> Tensor:
    """GELU over the linear layer output x, in place (gelu.wgsl): exact (erf), or tanh's form."""
    width = x.nbytes // (4 * b.g.max_rows)
    b.g.op(
        "gelu",
        {"x": x},
        {"width": width, "pad0": 0, "pad1": 0, "pad2": 0},
        lambda rows: (ceil_div(width, 256), rows, 1),
        {"TANH": tanh, "GELU": True},
    )
    return x


def encoder_rope(
    b: GraphBuilder,
    qkv: Tensor,
    cos_sin: Tensor,
    q_norm: Tensor | None = None,
    k_norm: Tensor | None = None,
    offset=0.0,
    rotary_dim: int | None = None,
    interleaved: bool = False,
) -> Tensor:
    """RoPE in place over an encoder's q|k|v rows (rope_rows.wgsl: no KV cache) by `cos_sin`, an
    input of each row's angles; with the q_norm and k_norm weights (+ offset: Gemma 3's 1 + w),
    each q and k head RMS-normalised first. rotary_dim: the dims of a head that turn (default all);
    interleaved: adjacent pairs (Moonshine) instead of split-half. Its qkv, for encoder_attention."""
    cfg = b.cfg
    heads, kv_heads, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    b.g.op(
        "rope_rows",
        {"cos_sin": cos_sin, "qkv": qkv, "q_norm": q_norm or b.dummy, "k_norm": k_norm or b.dummy},
        {
            "n_heads": heads,
            "head_dim": hd,
            "stride": (heads + 2 * kv_heads) * hd,
            "k_offset": heads * hd,
            "n_kv_heads": kv_heads,
            "eps": cfg.rms_norm_eps,
            "norm_offset": offset,
            "rotary_dim": rotary_dim or hd,
        },
        lambda rows: (heads + kv_heads, rows, 1),
        {"QK_NORM": q_norm is not None, "INTERLEAVED": interleaved},
    )
    return qkv


def encoder_attention(b: GraphBuilder, qkv: Tensor, spans: Tensor, scale: float | None = None) -> Tensor:
    """Bidirectional attention of each row over the rows `spans` gives it: its own text's, or the
    window of them a sliding layer sees (encoder_attention.wgsl; a forward of many rows,
    encoder_attention_tiled.wgsl). Grouped-query where the model has fewer k/v heads than q heads;
    scale: the scores' (default head_dim^-0.5)."""
    cfg = b.cfg
    heads, kv_heads, hd = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    width = heads * hd
    y = b.act("attn", width)
    lanes = attention_grid.encoder_lanes(b.g.max_rows, heads, hd, b.subgroup_min_size)
    b.g.op(
        "encoder_attention",
        {"qkv": qkv, "spans": spans, "y": y},
        {
            "n_heads": heads,
            "head_dim": hd,
            "q_stride": width + 2 * kv_heads * hd,
            "k_offset": width,
            "v_offset": width + kv_heads * hd,
            "scale": hd**-0.5 if scale is None else scale,
            "kv_group": heads // kv_heads,
            "pad1": 0,
        },
        lambda rows: attention_grid.encoder_grid(rows, heads, lanes),
        attention_grid.encoder_defines(hd, lanes, b.precision == "fast" and b.half),
        many_rows=(attention_grid.ENCODER_FEW_ROWS, "encoder_attention_tiled"),  # K/V tiles shared by a block's rows
    )
    return y


def sentence_head(b: GraphBuilder, x: Tensor) -> Tensor:
    """An encoder's output "embeddings", one vector a text: its rows of x pooled as the builder
    says, then through its Dense projections (sentence-transformers' modules: the texts' rows,
    Step.logit_rows of them). L2-normalised in the pooling where the builder says so and nothing
    follows it; after projections, the embedder normalises (embedding/embedder.py)."""
    rows = b.g.max_rows
    dense = getattr(b, "dense", ())
    if not dense:
        return pool(b, x, b.cfg.hidden_size, getattr(b, "pooling", "mean"), rows, output(b, b.cfg.hidden_size, rows))
    y = pool(b, x, b.cfg.hidden_size, b.pooling, rows, b.act("pooled", b.cfg.hidden_size), normalize=False)
    for i, layer in enumerate(dense):
        out = output(b, layer.n_out, rows) if i == len(dense) - 1 else b.act("dense", layer.n_out)
        y = b.linear(y, [layer.weight], bias=[layer.bias] if layer.bias else None, rows=LOGIT_ROWS, out=out)
    return y


def output(b: GraphBuilder, dim: int, texts: int) -> Tensor:
    """The graph's output "embeddings" [texts, dim]."""
    y = b.g.outputs["embeddings"] = b.g.tensor("embeddings", texts * dim * 4, "output")
    return y


def pool(b: GraphBuilder, x: Tensor, dim: int, mode: str, sequences: int, y: Tensor, normalize=None) -> Tensor:
    """Into y [sequences, dim]: each text's rows of x (the `seqs` input) pooled by `mode` and, where
    `normalize` (default: the builder's) says so, L2-normalised (embed_pool.wgsl)."""
    seqs = input_tensor(b, "seqs", 8)
    normalize = getattr(b, "normalize", True) if normalize is None else normalize
    b.g.op(
        "embed_pool",
        {"x": x, "seqs": seqs, "y": y},
        {"dim": dim, "mode": POOLING_MODES[mode], "normalize": int(normalize), "pad0": 0},
        lambda rows: (min(rows, sequences), 1, 1),
    )
    return y
