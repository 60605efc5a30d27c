"""A GGUF file as a model: its ModelConfig and its tensors under HF names (the tokenizer is in
gguf_tokenizer.py).

Everything comes from the header `gguf.read_gguf` / `parse_gguf` returns: `general.architecture`
picks the `<arch>.*` keys of the config, and llama.cpp's tensor names are mapped onto the HF names
our graph builders use.
"""

from __future__ import annotations

import re
import struct

from ..errors import ModelFileError, UnsupportedArchitectureError
from ..models.config import ModelConfig
from ..tokenizer.llama_vocab import END_OF_GENERATION
from .gguf import GGUFFile
from .gguf_hybrids import (
    HYBRID_ARCHITECTURES,
    hybrid_config,
    hybrid_tensor_name,
    lfm2_kv_heads,
    shared_kv_heads,
    trunk_layers,
)
from .safetensors import TensorInfo

# ---- config ----

_REQUIRED = object()

HF_ARCHITECTURE = {  # GGUF general.architecture -> the HF class of the same model
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gemma": "GemmaForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
    "phi3": "Phi3ForCausalLM",
    **HYBRID_ARCHITECTURES,  # gguf_hybrids.py
}
GEMMAS = ("gemma", "gemma2", "gemma3")


def gguf_rope_interleaved(arch: str | None) -> bool:
    """Whether the model's Q/K use interleaved-pair RoPE as stored in the GGUF.

    llama.cpp's converter permutes the rows of Llama-family attn_q / attn_k so that its "normal"
    RoPE (rotating pairs (x[2i], x[2i+1])) computes what HF's rotate-half RoPE computes on the
    original rows. We keep the rows as stored, so for those models the engine must rotate
    interleaved pairs. Qwen2/Qwen3, the Gemmas, Phi-3, LFM2 and Qwen3.5 (whose text-only
    interleaved MRoPE turns the same pairs) use rotate-half, like HF, and are stored unpermuted."""
    return arch == "llama"


def config_from_gguf(gguf: GGUFFile) -> ModelConfig:
    """The ModelConfig of a GGUF model (HF_ARCHITECTURE's). Raises ModelFileError naming a missing
    or malformed key, UnsupportedArchitectureError for other architectures. A Phi-3's LongRoPE
    factors are tensors: longrope_scaling reads them."""
    meta, path = gguf.metadata, gguf.path
    arch = meta.get("general.architecture")
    if arch is None:
        raise ModelFileError(path, "missing metadata key 'general.architecture'")
    if arch not in HF_ARCHITECTURE:
        raise UnsupportedArchitectureError(
            f"{path}: unsupported GGUF architecture {arch!r}; supported: {', '.join(sorted(HF_ARCHITECTURE))}"
        )

    def key(name: str, default=_REQUIRED, kind=int):
        full = f"{arch}.{name}"
        value = meta.get(full, default)
        if value is _REQUIRED:
            raise ModelFileError(path, f"missing metadata key {full!r}")
        if value is None:
            return None
        if isinstance(value, list):
            # Some converters write per-layer values; one shared value is all a ModelConfig holds.
            if not value or any(v != value[0] for v in value):
                raise ModelFileError(path, f"metadata key {full!r}: per-layer values {value[:8]} are not supported")
            value = value[0]
        if kind is str:
            if not isinstance(value, str):
                raise ModelFileError(path, f"metadata key {full!r} should be a string, got {value!r}")
            return value
        if isinstance(value, (str, bool)) or not isinstance(value, (int, float)):
            raise ModelFileError(path, f"metadata key {full!r} should be a number, got {value!r}")
        if kind is int and value != int(value):
            raise ModelFileError(path, f"metadata key {full!r} should be an integer, got {value!r}")
        return kind(value)

    hidden = key("embedding_length")
    heads = key("attention.head_count")
    if heads <= 0 or hidden <= 0:
        raise ModelFileError(path, f"{arch}.attention.head_count and {arch}.embedding_length must be positive")
    head_dim = key("attention.key_length", hidden // heads)
    if head_dim <= 0:
        raise ModelFileError(path, f"{arch}.attention.key_length must be positive, got {head_dim}")
    rotary_dim = key("rope.dimension_count", head_dim)
    # llama.cpp's default base is 10000, except 1e6 for gemma3's global layers.
    theta = key("rope.freq_base", 1_000_000.0 if arch == "gemma3" else 10000.0, float)

    tok_meta = meta.get("tokenizer.ggml.tokens")
    vocab_size = key("vocab_size", None)
    if vocab_size is None:
        if isinstance(tok_meta, list):
            vocab_size = len(tok_meta)
        elif "token_embd.weight" in gguf.tensors:
            vocab_size = gguf.tensors["token_embd.weight"].shape[0]
        else:
            raise ModelFileError(path, f"missing metadata key {arch + '.vocab_size'!r} (and no tokenizer.ggml.tokens)")

    if arch == "lfm2":  # one count per layer, 0 for its short-conv layers
        kv_heads = shared_kv_heads(lfm2_kv_heads(meta, path, heads), heads)
    else:
        kv_heads = key("attention.head_count_kv", heads)
    eos_ids = end_of_generation_ids(meta)
    bos_id = meta.get("tokenizer.ggml.bos_token_id")

    cfg = ModelConfig(
        architecture=HF_ARCHITECTURE[arch],
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=key("feed_forward_length"),
        num_layers=key("block_count"),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=key("attention.layer_norm_rms_epsilon", kind=float),
        rope_theta=theta,
        rope_scaling=_rope_scaling(key, path, arch),
        partial_rotary_factor=rotary_dim / head_dim,
        max_position=key("context_length"),
        # llama.cpp reuses token_embd for the output when there is no output.weight.
        tie_word_embeddings="output.weight" not in gguf.tensors,
        attention_bias=arch == "qwen2" or "blk.0.attn_q.bias" in gguf.tensors,
        qk_norm=arch in ("qwen3", "gemma3"),
        eos_token_ids=eos_ids,
        bos_token_id=bos_id if isinstance(bos_id, int) else None,
        norm_weights_include_one=arch in GEMMAS,
    )
    cfg.rope_interleaved = gguf_rope_interleaved(arch)
    if arch in ("gemma2", "gemma3"):
        _gemma_attention(cfg, key, meta, arch, path)
    if arch in HYBRID_ARCHITECTURES:
        hybrid_config(cfg, gguf, key)
    return cfg


def _gemma_attention(cfg: ModelConfig, key, meta: dict, arch: str, path) -> None:
    """Gemma 2/3's attention as llama.cpp reads it: sliding layers by a pattern (every 2nd / 6th
    layer full, or a per-layer list), their own RoPE base, softcapping (Gemma 2), and a scale of
    head_dim^-0.5 (hidden/heads for the 27B models, which llama.cpp knows by their layer count:
    the files do not store query_pre_attn_scalar)."""
    window = key("attention.sliding_window", 4096 if arch == "gemma2" else 0)
    if window > 0:
        cfg.sliding_window = window
        pattern = meta.get(f"{arch}.attention.sliding_window_pattern", 2 if arch == "gemma2" else 6)
        if isinstance(pattern, list):  # one flag per layer
            pattern = [bool(swa) for swa in pattern]
        elif isinstance(pattern, int) and not isinstance(pattern, bool) and pattern >= 0:
            pattern = [pattern == 0 or i % pattern < pattern - 1 for i in range(cfg.num_layers)]
        if not isinstance(pattern, list) or len(pattern) != cfg.num_layers:
            raise ModelFileError(
                path, f"{arch}.attention.sliding_window_pattern: expected a count or one flag per layer"
            )
        cfg.layer_types = ["sliding_attention" if swa else "full_attention" for swa in pattern]
    if arch == "gemma2":  # sliding layers share the global base and scaling unless told otherwise
        cfg.local_rope_theta, cfg.local_rope_scaling = (
            key("rope.freq_base_swa", cfg.rope_theta, float),
            cfg.rope_scaling,
        )
        cfg.attn_logit_softcapping = key("attn_logit_softcapping", 50.0, float)
        cfg.final_logit_softcapping = key("final_logit_softcapping", 30.0, float)
    else:
        cfg.local_rope_theta = key("rope.freq_base_swa", 10000.0, float)
        cfg.final_logit_softcapping = key("final_logit_softcapping", 0.0, float)
    large = (arch, cfg.num_layers) in (("gemma2", 46), ("gemma3", 62))
    cfg.query_pre_attn_scalar = cfg.hidden_size / cfg.num_heads if large else cfg.head_dim


def longrope_scaling(gguf: GGUFFile, read) -> dict | None:
    """A Phi-3 file's LongRoPE (HF's rope_scaling dict), from its rope_factors_short / _long
    tensors (rotary_dim / 2 floats each, read with read(start, length)) and rope.scaling keys;
    None without those tensors. The attention factor defaults to 1, as llama.cpp's does."""
    tensors, meta = gguf.tensors, gguf.metadata
    if "rope_factors_long.weight" not in tensors or "rope_factors_short.weight" not in tensors:
        return None
    factors = {}
    for which in ("short", "long"):
        info = tensors[f"rope_factors_{which}.weight"]
        if info.dtype != "F32" or len(info.shape) != 1:
            raise ModelFileError(gguf.path, f"rope_factors_{which}.weight should be a 1-D F32 tensor")
        factors[which] = list(struct.unpack(f"<{info.shape[0]}f", read(info.start, info.nbytes)))
    arch = meta.get("general.architecture")
    original = meta.get(f"{arch}.rope.scaling.original_context_length", meta.get(f"{arch}.context_length"))
    return {
        "rope_type": "longrope",
        "short_factor": factors["short"],
        "long_factor": factors["long"],
        "original_max_position_embeddings": original,
        "attention_factor": meta.get(f"{arch}.rope.scaling.attn_factor", 1.0),
    }


def end_of_generation_ids(meta: dict) -> list[int]:
    """The ids generation stops on without the tokenizer (generate --ids), the eos token first:
    tokenizer.ggml.eos/eot/eom_token_id and every token spelled like one of llama.cpp's end-of-turn
    tokens (e.g. Qwen's <|endoftext|> besides its eos <|im_end|>). With the tokenizer, its eos_ids
    are llama.cpp's exact set (tokenizer/llama_vocab.py)."""
    ids = []
    for name in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        token_id = meta.get(name)
        if isinstance(token_id, int) and not isinstance(token_id, bool) and token_id not in ids:
            ids.append(token_id)
    tokens = meta.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list):
        ids += [i for i, token in enumerate(tokens) if token in END_OF_GENERATION and i not in ids]
    return ids


def _rope_scaling(key, path, arch) -> dict | None:
    """HF's rope_scaling dict from the rope.scaling.* keys. Llama 3.1+ files carry their llama3
    scaling as a `rope_freqs.weight` tensor (a divisor per frequency) instead of keys; that tensor
    is kept under its own name by `hf_tensors`, and is not described here."""
    kind = key("rope.scaling.type", None, str)
    factor = key("rope.scaling.factor", None, float)
    if kind is None:
        # Old files only have rope.scale_linear.
        linear = key("rope.scale_linear", None, float)
        return None if linear in (None, 1.0) else {"rope_type": "linear", "factor": linear}
    if kind == "none" or (kind == "linear" and factor in (None, 0.0, 1.0)):
        return None
    scaling = {"rope_type": kind, "factor": factor}
    original = key("rope.scaling.original_context_length", None)
    if original is not None:
        scaling["original_max_position_embeddings"] = original
    if kind == "llama3":  # not written by llama.cpp's converter (it stores rope_freqs.weight), but accepted
        scaling["low_freq_factor"] = key("rope.scaling.low_freq_factor", 1.0, float)
        scaling["high_freq_factor"] = key("rope.scaling.high_freq_factor", 4.0, float)
    elif kind == "yarn":
        for name, hf_name in (
            ("yarn_beta_fast", "beta_fast"),
            ("yarn_beta_slow", "beta_slow"),
            ("yarn_log_multiplier", "mscale"),
        ):
            value = key(f"rope.scaling.{name}", None, float)
            if value is not None:
                scaling[hf_name] = value
    return scaling


# ---- tensor names ----

# llama.cpp name -> HF name. Global tensors by full name; per-block ones ("blk.N.<part>.<weight|bias>")
# by part, under "model.layers.N.".
HF_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
HF_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
# Gemma 2/3 have four norms per block: llama.cpp's attn_norm / post_attention_norm / ffn_norm /
# post_ffw_norm are HF's input / post_attention / pre_feedforward / post_feedforward layernorms.
# (llama.cpp's converter stores Gemma's norm weights with HF's "+1" already added.)
FOUR_NORM_HF_NAMES = {
    **HF_NAMES,
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
# Phi-3's fused weights: attn_qkv, and ffn_up holding gate rows then up rows.
PHI3_HF_NAMES = {**HF_NAMES, "attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"}
HF_NAMES_OF = {"gemma2": FOUR_NORM_HF_NAMES, "gemma3": FOUR_NORM_HF_NAMES, "phi3": PHI3_HF_NAMES}
_BLOCK_NAME = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def hf_tensor_name(gguf_name: str, arch: str = "llama", model_layers: int = 1 << 30) -> str | None:
    """The HF name of a llama.cpp tensor name, or None if it has none (e.g. rope_freqs.weight).
    Hybrids: blocks from `model_layers` on (Qwen3.5's MTP blocks) have none."""
    if arch in HYBRID_ARCHITECTURES:
        return hybrid_tensor_name(gguf_name, arch, model_layers)
    if gguf_name in HF_GLOBAL_NAMES:
        return HF_GLOBAL_NAMES[gguf_name]
    match = _BLOCK_NAME.fullmatch(gguf_name)
    if match is None:
        return None
    layer, part, kind = match.groups()
    hf_part = HF_NAMES_OF.get(arch, HF_NAMES).get(part)
    return None if hf_part is None else f"model.layers.{int(layer)}.{hf_part}.{kind}"


def hf_tensors(gguf: GGUFFile) -> dict[str, TensorInfo]:
    """The file's tensors keyed by HF name (TensorInfo.name keeps the name in the file). Tensors
    without an HF name (such as rope_freqs.weight) stay under their GGUF name.

    Q/K rows of Llama-family models stay as llama.cpp stored them (permuted for interleaved RoPE);
    see `gguf_rope_interleaved`."""
    arch = gguf.metadata.get("general.architecture", "llama")
    layers = trunk_layers(gguf.metadata, arch)
    out = {}
    for name, info in gguf.tensors.items():
        hf_name = hf_tensor_name(name, arch, layers) or name
        if hf_name in out:
            raise ModelFileError(gguf.path, f"tensors {out[hf_name].name!r} and {name!r} both map to {hf_name!r}")
        out[hf_name] = info
    return out
