"""The shapes a checked ModelConfig implies for the tensors the graph builders read, checked when
a model is read (formats/model_files.read_model), whatever its format: before graph planning
indexes a shape (a 1-D "matrix", a q_proj of the wrong height, a conv kernel wider than the
config's) or uploads a vector from a dtype it cannot convert. Names are HF names (GGUF tensors
are renamed first); a tensor the graphs never read, or of a layer past num_hidden_layers, is left
alone. Whether a tensor is present at all, and whether a matrix's dtype is one the kernels read,
graph planning says (GraphBuilder.tensor_info, GraphBuilder.weight_format)."""

from __future__ import annotations

import re

from ..errors import ModelFileError
from ..formats.json_file import describe
from .bert import encoder_shapes
from .config import ModelConfig
from .config_check import MAX_COUNT

LAYER = re.compile(r"model\.layers\.(\d{1,9})\.(.+)")
VECTOR_DTYPES = ("F32", "F16", "BF16")  # what weights.py converts norms, biases and conv taps from
NORMS = (
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "pre_feedforward_layernorm.weight",
    "post_feedforward_layernorm.weight",
    "operator_norm.weight",  # LFM2's
    "ffn_norm.weight",
)
FFN = "ffn"  # a dimension: the layer's feed-forward width, its down projection's columns (LFM2 adjusts it)
ANY = None  # a dimension of any size (the down projection's own columns)


def global_shapes(cfg: ModelConfig) -> dict[str, tuple]:
    if cfg.architecture == "BertModel":
        return encoder_shapes(cfg)  # every tensor by its full name (models/bert.py)
    vocab, hidden = cfg.vocab_size, cfg.hidden_size
    return {
        "model.embed_tokens.weight": ((vocab, hidden),),
        "lm_head.weight": ((vocab, hidden),),
        "model.norm.weight": ((hidden,),),
        "model.embedding_norm.weight": ((hidden,),),  # LFM2's final norm
        **_per_layer_embedding_shapes(cfg),
    }


def _per_layer_embedding_shapes(cfg: ModelConfig) -> dict[str, tuple]:
    """Gemma 4's per-layer embeddings: the table and the projection of every layer's slices."""
    width, layers = cfg.per_layer_input_size, cfg.num_layers
    if not width:
        return {}
    return {
        "model.embed_tokens_per_layer.weight": ((cfg.per_layer_vocab, layers * width),),
        "model.per_layer_model_projection.weight": ((layers * width, cfg.hidden_size),),
        "model.per_layer_projection_norm.weight": ((width,),),
    }


def layer_shapes(cfg: ModelConfig) -> dict[str, tuple]:
    """Each per-layer tensor (the part after "model.layers.N.") → the shapes it may have."""
    h, hd = cfg.hidden_size, cfg.head_dim
    q = cfg.num_heads * hd * (2 if cfg.architecture == "Qwen3_5ForCausalLM" else 1)  # Qwen3.5: + the output gate
    kv = cfg.num_kv_heads * hd
    nk, nv, dk, dv = cfg.linear_key_heads, cfg.linear_value_heads, cfg.linear_key_head_dim, cfg.linear_value_head_dim
    conv_dim, kernel = 2 * nk * dk + nv * dv, cfg.conv_kernel
    shapes = {norm: ((h,),) for norm in NORMS}
    # Gemma 4's full layers have a head_dim of their own: either shape (which layer has which,
    # graph planning's matrix() reads from the shapes it finds).
    dims = (hd, cfg.global_head_dim) if cfg.global_head_dim else (hd,)
    heads = cfg.num_heads
    for proj, proj_heads in (("q_proj", cfg.num_heads), ("k_proj", cfg.num_kv_heads), ("v_proj", cfg.num_kv_heads)):
        rows = [q if proj == "q_proj" and d == hd else proj_heads * d for d in dims]
        shapes[f"self_attn.{proj}.weight"] = tuple((r, h) for r in rows)
        shapes[f"self_attn.{proj}.bias"] = tuple((r,) for r in rows)
    for norm in ("q_norm", "k_norm", "q_layernorm", "k_layernorm"):
        shapes[f"self_attn.{norm}.weight"] = tuple((d,) for d in dims)
    if cfg.per_layer_input_size:  # Gemma 4's per-layer input
        width = cfg.per_layer_input_size
        shapes["per_layer_input_gate.weight"] = ((width, h),)
        shapes["per_layer_projection.weight"] = ((h, width),)
        shapes["post_per_layer_input_norm.weight"] = ((h,),)
    shapes["layer_scalar"] = ((1,),)
    shapes["self_attn.qkv_proj.weight"] = ((q + 2 * kv, h),)  # Phi-3's fused q|k|v
    shapes["self_attn.o_proj.weight"] = shapes["self_attn.out_proj.weight"] = tuple((h, heads * d) for d in dims)
    for gate in ("mlp.gate_proj", "mlp.up_proj", "feed_forward.w1", "feed_forward.w3"):
        shapes[gate + ".weight"] = ((FFN, h),)
    shapes["mlp.gate_up_proj.weight"] = ((2, FFN, h),)  # Phi-3's fused gate|up: 2 x FFN rows
    shapes["mlp.down_proj.weight"] = shapes["feed_forward.w2.weight"] = ((h, ANY),)
    # LFM2's short-conv block: in_proj gives B, C and X; the depthwise conv [C, 1, K] ([C, K] in GGUF).
    for proj, rows, cols in (("in_proj", 3 * h, h), ("out_proj", h, h)):
        shapes[f"conv.{proj}.weight"], shapes[f"conv.{proj}.bias"] = ((rows, cols),), ((rows,),)
    shapes["conv.conv.weight"], shapes["conv.conv.bias"] = ((h, 1, kernel), (h, kernel)), ((h,),)
    # Qwen3.5's Gated DeltaNet.
    shapes["linear_attn.in_proj_qkv.weight"] = ((conv_dim, h),)
    shapes["linear_attn.in_proj_z.weight"] = ((nv * dv, h),)
    shapes["linear_attn.in_proj_b.weight"] = shapes["linear_attn.in_proj_a.weight"] = ((nv, h),)
    shapes["linear_attn.conv1d.weight"] = ((conv_dim, 1, kernel), (conv_dim, kernel))
    shapes["linear_attn.A_log"] = shapes["linear_attn.dt_bias"] = ((nv,),)
    shapes["linear_attn.norm.weight"] = ((dv,),)
    shapes["linear_attn.out_proj.weight"] = ((h, nv * dv),)
    return shapes


MATRIX_RANK = 2
CONV_TAPS = ("conv.conv.weight", "linear_attn.conv1d.weight")  # read as flat f32 vectors


def check_tensors(cfg: ModelConfig, tensors: dict, config_path) -> None:
    """Raise ModelFileError naming the tensor and its file where a tensor the graphs read has a
    shape other than cfg implies, or is a vector stored in a dtype weights.py cannot convert."""
    globals_, per_layer = global_shapes(cfg), layer_shapes(cfg)
    for name, info in tensors.items():
        match = LAYER.fullmatch(name)
        if match is None:
            wanted, layer, part = globals_.get(name), None, name
        elif int(match.group(1)) < cfg.num_layers:
            layer, part = match.group(1), match.group(2)
            wanted = per_layer.get(part)
        else:
            continue  # a layer the model does not run (Qwen3.5's multi-token-prediction blocks)
        if wanted is None:
            continue
        ffn = _ffn_width(tensors, f"model.layers.{layer}.") if layer is not None else None
        shape = tuple(info.shape)
        if not any(_fits(shape, want, ffn) for want in wanted):
            expected = " or ".join(_show(want, ffn) for want in wanted)
            raise ModelFileError(
                info.path, f"tensor {name!r} has shape {describe(list(shape))}; {config_path} implies {expected}"
            )
        vector = len(shape) != MATRIX_RANK or part in CONV_TAPS
        if vector and info.dtype not in VECTOR_DTYPES:
            raise ModelFileError(
                info.path, f"tensor {name!r}: dtype {info.dtype} (a norm, bias or conv weight must be F32, F16 or BF16)"
            )


def _ffn_width(tensors: dict, prefix: str) -> int | None:
    """A layer's feed-forward width: its down projection's columns (None: no usable one, which its
    own check reports)."""
    for name in ("mlp.down_proj.weight", "feed_forward.w2.weight"):
        info = tensors.get(prefix + name)
        if info is not None and len(info.shape) == MATRIX_RANK and 1 <= info.shape[1] <= MAX_COUNT:
            return info.shape[1]
    return None


def _dims(want: tuple, ffn: int | None) -> list:
    """The expected dimensions: FFN resolved (None when unknown: then any size), a (2, FFN) pair
    (fused gate|up) merged into one dimension of twice the width."""
    if want[:2] == (2, FFN):
        return [2 * ffn if ffn is not None else ANY, *want[2:]]
    return [ffn if dim == FFN else dim for dim in want]


def _fits(shape: tuple, want: tuple, ffn: int | None) -> bool:
    dims = _dims(want, ffn)
    if len(shape) != len(dims):
        return False
    return all(1 <= got <= MAX_COUNT and (dim is ANY or got == dim) for got, dim in zip(shape, dims))


def _show(want: tuple, ffn: int | None) -> str:
    return "[" + ", ".join("N" if dim is ANY else str(dim) for dim in _dims(want, ffn)) + "]"
