"""A GGUF model's tensors against its config: every tensor the graph reads must have the rank and
shape the metadata implies (llama.cpp's create_tensor checks the same), or loading would read
rows that are not there. Tensors of layers past the config's and names the graph does not read
are left alone; the embedding's rows are not compared with the vocabulary (llama.cpp counts the
tokens; the engine takes the rows)."""

from __future__ import annotations

import re

from ..errors import ModelFileError
from ..models.config import ModelConfig
from .gguf import GGUFFile

_BLOCK = re.compile(r"blk\.(\d{1,6})\.(.+)")
_NORMS = ("attn_norm", "ffn_norm", "post_attention_norm", "post_ffw_norm")


def check_tensor_shapes(gguf: GGUFFile, cfg: ModelConfig, arch: str) -> None:
    hidden = cfg.hidden_size
    embedding = gguf.tensors.get("token_embd.weight")
    globals_ = {
        "output_norm.weight": (hidden,),
        "token_embd_norm.weight": (hidden,),
        "rope_freqs.weight": (cfg.rotary_dim // 2,),
        "rope_factors_long.weight": (cfg.rotary_dim // 2,),
        "rope_factors_short.weight": (cfg.rotary_dim // 2,),
    }
    for name, info in gguf.tensors.items():
        if name in ("token_embd.weight", "output.weight"):
            rows = embedding.shape[0] if name == "output.weight" and embedding is not None else None
            if len(info.shape) != 2 or info.shape[1] != hidden or rows not in (None, info.shape[0]):
                _fail(gguf, name, info.shape, f"[{rows if rows is not None else 'vocabulary'}, {hidden}]")
            continue
        if name in globals_:
            expected = globals_[name]
        else:
            match = _BLOCK.fullmatch(name)
            if match is None or int(match.group(1)) >= cfg.num_layers:
                continue
            expected = _block_shape(cfg, arch, int(match.group(1)), match.group(2))
        if expected is not None and tuple(info.shape) != expected:
            _fail(gguf, name, info.shape, list(expected))


def _fail(gguf: GGUFFile, name: str, shape, expected) -> None:
    raise ModelFileError(
        gguf.path, f"tensor {name!r} has shape {list(shape)}, but the metadata makes it {expected} ([rows, columns])"
    )


def _block_shape(cfg: ModelConfig, arch: str, layer: int, part: str) -> tuple | None:
    """The [rows, columns] (or [length]) of a block tensor, or None for one not checked here.
    Gemma 4's layers have head dims and MLP widths of their own."""
    hidden, head_dim, ffn = cfg.hidden_size, cfg.layer_head_dim(layer), cfg.layer_intermediate(layer)
    q_rows, kv_rows = cfg.num_heads * head_dim, cfg.num_kv_heads * head_dim
    kind = cfg.layer_type(layer)
    if part.split(".")[0] in _NORMS:
        return (hidden,)
    if kind == "linear_attention":
        return _delta_net_shape(cfg, part)
    if kind == "conv":
        return _short_conv_shape(cfg, part)
    if arch == "qwen35" and part == "attn_q.weight":
        return (2 * q_rows, hidden)  # each head's query rows, then its gate rows
    if arch == "phi3" and part == "ffn_up.weight":
        return (2 * ffn, hidden)  # gate rows, then up rows
    return {
        "attn_q.weight": (q_rows, hidden),
        "attn_k.weight": (kv_rows, hidden),
        "attn_v.weight": (kv_rows, hidden),
        "attn_qkv.weight": (q_rows + 2 * kv_rows, hidden),
        "attn_output.weight": (hidden, q_rows),
        "attn_q.bias": (q_rows,),
        "attn_k.bias": (kv_rows,),
        "attn_v.bias": (kv_rows,),
        "attn_q_norm.weight": (head_dim,),
        "attn_k_norm.weight": (head_dim,),
        "ffn_gate.weight": (ffn, hidden),
        "ffn_up.weight": (ffn, hidden),
        "ffn_down.weight": (hidden, ffn),
    }.get(part)


def _delta_net_shape(cfg: ModelConfig, part: str) -> tuple | None:
    """Qwen3.5's Gated DeltaNet layer (HF names in gguf_hybrids.QWEN35_BLOCK_NAMES)."""
    hidden, value_heads = cfg.hidden_size, cfg.linear_value_heads
    values = value_heads * cfg.linear_value_head_dim
    channels = 2 * cfg.linear_key_heads * cfg.linear_key_head_dim + values
    return {
        "attn_qkv.weight": (channels, hidden),
        "attn_gate.weight": (values, hidden),
        "ssm_beta.weight": (value_heads, hidden),
        "ssm_alpha.weight": (value_heads, hidden),
        "ssm_conv1d.weight": (channels, cfg.conv_kernel),
        "ssm_dt.bias": (value_heads,),
        "ssm_a": (value_heads,),
        "ssm_norm.weight": (cfg.linear_value_head_dim,),
        "ssm_out.weight": (hidden, values),
        "ffn_gate.weight": (cfg.intermediate_size, hidden),
        "ffn_up.weight": (cfg.intermediate_size, hidden),
        "ffn_down.weight": (hidden, cfg.intermediate_size),
    }.get(part)


def _short_conv_shape(cfg: ModelConfig, part: str) -> tuple | None:
    """LFM2's short-convolution layer: in_proj makes B, C and x; the conv is one kernel per channel."""
    hidden = cfg.hidden_size
    return {
        "shortconv.in_proj.weight": (3 * hidden, hidden),
        "shortconv.in_proj.bias": (3 * hidden,),
        "shortconv.conv.weight": (hidden, cfg.conv_kernel),
        "shortconv.conv.bias": (hidden,),
        "shortconv.out_proj.weight": (hidden, hidden),
        "shortconv.out_proj.bias": (hidden,),
        "ffn_gate.weight": (cfg.intermediate_size, hidden),
        "ffn_up.weight": (cfg.intermediate_size, hidden),
        "ffn_down.weight": (hidden, cfg.intermediate_size),
    }.get(part)
