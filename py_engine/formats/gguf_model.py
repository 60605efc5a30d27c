"""A GGUF file as a model: its ModelConfig and its tensors under HF names (the tokenizer is in
gguf_tokenizer.py).

Everything comes from the header `gguf.read_gguf` / `parse_gguf` returns: `general.architecture`
picks the `<arch>.*` keys of the config, and llama.cpp's tensor names are mapped onto the HF names
our graph builders use.
"""

from __future__ import annotations

import re

from ..errors import ModelFileError, UnsupportedArchitectureError
from ..models.config import ModelConfig
from ..tokenizer.llama.vocab import END_OF_GENERATION
from .gguf import GGUFFile
from .gguf_gemma4 import gemma4_config, gemma4_tensor_name, proportional_rope
from .gguf_hybrids import (
    HYBRID_ARCHITECTURES,
    hybrid_config,
    hybrid_tensor_name,
    lfm2_kv_heads,
    shared_kv_heads,
    trunk_layers,
)
from .gguf_rope import longrope_scaling, rope_scaling_from_keys
from .gguf_tensor_check import check_tensor_shapes
from .gguf_values import MAX_LAYERS, Metadata, is_flag, is_int
from .safetensors import TensorInfo

__all__ = [
    "config_from_gguf",
    "hf_tensors",
    "hf_tensor_name",
    "longrope_scaling",
    "proportional_rope",
    "gguf_rope_interleaved",
]

# ---- config ----

HF_ARCHITECTURE = {  # GGUF general.architecture -> the HF class of the same model
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gemma": "GemmaForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "gemma4": "Gemma4ForCausalLM",  # gguf_gemma4.py
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
    or malformed key or a tensor whose shape disagrees with the keys, UnsupportedArchitectureError
    for other architectures. A Phi-3's LongRoPE factors and a Gemma 4's proportional RoPE are
    tensors: longrope_scaling and proportional_rope read them."""
    meta, path = Metadata(gguf.metadata, gguf.path), gguf.path
    arch = meta.string("general.architecture")
    if arch == "clip":  # llama.cpp's vision projector: the picture side of a text model, not a model
        raise ModelFileError(path, "a vision projector (mmproj) file: give it beside its text model (--mmproj)")
    if arch not in HF_ARCHITECTURE:
        raise UnsupportedArchitectureError(
            f"{path}: unsupported GGUF architecture {arch!r:.60}; supported: {', '.join(sorted(HF_ARCHITECTURE))}"
        )
    k = arch + "."
    layers = meta.integer(k + "block_count", minimum=1, maximum=MAX_LAYERS)
    hidden = meta.integer(k + "embedding_length", minimum=1)
    heads = meta.shared(k + "attention.head_count", layers, minimum=1)
    if k + "attention.key_length" not in gguf.metadata and hidden < heads:
        raise ModelFileError(path, f"{k}embedding_length {hidden} is less than {k}attention.head_count {heads}")
    head_dim = meta.integer(k + "attention.key_length", hidden // heads, minimum=1)
    value_dim = meta.integer(k + "attention.value_length", head_dim, minimum=1)
    if value_dim != head_dim:
        raise ModelFileError(path, f"{k}attention.value_length {value_dim} differs from key_length {head_dim}")
    rotary_dim = meta.integer(k + "rope.dimension_count", head_dim, minimum=2, maximum=head_dim)
    if rotary_dim % 2:
        raise ModelFileError(path, f"metadata key '{k}rope.dimension_count' is {rotary_dim}: RoPE needs an even count")
    # llama.cpp's default base is 10000, except 1e6 for gemma3's global layers.
    theta = meta.number(k + "rope.freq_base", 1_000_000.0 if arch == "gemma3" else 10000.0, positive=True)

    vocab_size = _vocab_size(gguf, meta, k)
    if arch == "lfm2":  # one count per layer, 0 for its short-conv layers
        kv_heads = shared_kv_heads(lfm2_kv_heads(meta, heads), heads)
    else:
        kv_heads = meta.shared(k + "attention.head_count_kv", layers, heads, minimum=1)
    bos_id = gguf.metadata.get("tokenizer.ggml.bos_token_id")

    cfg = ModelConfig(
        architecture=HF_ARCHITECTURE[arch],
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=_feed_forward(meta, k, layers, arch),
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=meta.number(k + "attention.layer_norm_rms_epsilon", positive=True),
        rope_theta=theta,
        rope_scaling=rope_scaling_from_keys(meta, arch),
        partial_rotary_factor=rotary_dim / head_dim,
        max_position=meta.integer(k + "context_length", minimum=1),
        # llama.cpp reuses token_embd for the output when there is no output.weight.
        tie_word_embeddings="output.weight" not in gguf.tensors,
        attention_bias=arch == "qwen2" or "blk.0.attn_q.bias" in gguf.tensors,
        qk_norm=arch in ("qwen3", "gemma3"),
        eos_token_ids=end_of_generation_ids(gguf.metadata, vocab_size),
        bos_token_id=bos_id if is_int(bos_id) and 0 <= bos_id < vocab_size else None,
        norm_weights_include_one=arch in GEMMAS,
    )
    cfg.rope_interleaved = gguf_rope_interleaved(arch)
    if arch in ("gemma2", "gemma3"):
        _gemma_attention(cfg, meta, arch)
    if arch in HYBRID_ARCHITECTURES:
        hybrid_config(cfg, gguf, meta)
    if arch == "gemma4":
        gemma4_config(cfg, meta)
    check_tensor_shapes(gguf, cfg, arch)
    return cfg


def _feed_forward(meta: Metadata, k: str, layers: int, arch: str) -> int:
    """feed_forward_length: one width for all layers (Gemma 4's first layer's: gemma4_config reads
    the rest, twice as wide in its shared-KV layers)."""
    if arch == "gemma4":
        return meta.per_layer(k + "feed_forward_length", layers, minimum=1)[0]
    return meta.shared(k + "feed_forward_length", layers, minimum=1)


def _vocab_size(gguf: GGUFFile, meta: Metadata, k: str) -> int:
    """<arch>.vocab_size, else the number of tokens (as llama.cpp counts them), else the embedding's rows."""
    if meta.has(k + "vocab_size"):
        return meta.integer(k + "vocab_size", minimum=1)
    tokens = gguf.metadata.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list):
        if not tokens:
            raise ModelFileError(gguf.path, "metadata key 'tokenizer.ggml.tokens' is an empty array")
        return len(tokens)
    embedding = gguf.tensors.get("token_embd.weight")
    if embedding is None or len(embedding.shape) != 2 or embedding.shape[0] < 1:
        raise ModelFileError(gguf.path, f"missing metadata key {k + 'vocab_size'!r} (and no tokenizer.ggml.tokens)")
    return embedding.shape[0]


def _gemma_attention(cfg: ModelConfig, meta: Metadata, arch: str) -> None:
    """Gemma 2/3's attention as llama.cpp reads it: sliding layers by a pattern (every 2nd / 6th
    layer full, or a per-layer list), their own RoPE base, softcapping (Gemma 2), and a scale of
    head_dim^-0.5 (hidden/heads for the 27B models, which llama.cpp knows by their layer count:
    the files do not store query_pre_attn_scalar)."""
    k = arch + "."
    window = meta.integer(k + "attention.sliding_window", 4096 if arch == "gemma2" else 0)
    if window > 0:
        cfg.sliding_window = window
        pattern_key = k + "attention.sliding_window_pattern"
        if isinstance(meta.meta.get(pattern_key), list):  # one flag per layer
            pattern = meta.array(pattern_key, is_flag, length=cfg.num_layers, what="flags (bool)")
        else:  # every n-th layer full (0: all sliding)
            every = meta.integer(pattern_key, 2 if arch == "gemma2" else 6)
            pattern = [every == 0 or i % every < every - 1 for i in range(cfg.num_layers)]
        cfg.layer_types = ["sliding_attention" if swa else "full_attention" for swa in pattern]
    if arch == "gemma2":  # sliding layers share the global base and scaling unless told otherwise
        cfg.local_rope_theta = meta.number(k + "rope.freq_base_swa", cfg.rope_theta, positive=True)
        cfg.local_rope_scaling = cfg.rope_scaling
        cfg.attn_logit_softcapping = _softcap(meta, k + "attn_logit_softcapping", 50.0)
        cfg.final_logit_softcapping = _softcap(meta, k + "final_logit_softcapping", 30.0)
    else:
        cfg.local_rope_theta = meta.number(k + "rope.freq_base_swa", 10000.0, positive=True)
        cfg.final_logit_softcapping = _softcap(meta, k + "final_logit_softcapping", 0.0)
    large = (arch, cfg.num_layers) in (("gemma2", 46), ("gemma3", 62))
    cfg.query_pre_attn_scalar = cfg.hidden_size / cfg.num_heads if large else cfg.head_dim


def _softcap(meta: Metadata, key: str, default: float) -> float:
    value = meta.number(key, default)
    if value < 0:
        meta.fail(key, f"is {value}: a softcap is positive, or 0 for none")
    return value


def end_of_generation_ids(meta: dict, vocab_size: int) -> list[int]:
    """The ids generation stops on without the tokenizer (generate --ids), the eos token first:
    tokenizer.ggml.eos/eot/eom_token_id and every token spelled like one of llama.cpp's end-of-turn
    tokens (e.g. Qwen's <|endoftext|> besides its eos <|im_end|>). Ids outside the vocabulary are
    left out, as llama.cpp ignores them. With the tokenizer, its eos_ids are llama.cpp's exact set
    (tokenizer/llama/vocab.py)."""
    ids = []
    for name in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        token_id = meta.get(name)
        if is_int(token_id) and 0 <= token_id < vocab_size and token_id not in ids:
            ids.append(token_id)
    tokens = meta.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list):
        ends = [
            i for i, token in enumerate(tokens[:vocab_size]) if isinstance(token, str) and token in END_OF_GENERATION
        ]
        texts = {tokens[i] for i in ends}
        if "<|tool_response>" in texts or "<|plamo:eos|>" in texts:  # Gemma 4's and PLaMo's </s> is a normal token
            ends = [i for i in ends if tokens[i] != "</s>"]
        ids += [i for i in ends if i not in ids]
    return ids


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
# (A layer number of more digits than any model has layers is no layer: int() would refuse thousands.)
_BLOCK_NAME = re.compile(r"blk\.(\d{1,6})\.(\w+)\.(weight|bias)")


def hf_tensor_name(gguf_name: str, arch: str = "llama", model_layers: int = 1 << 30) -> str | None:
    """The HF name of a llama.cpp tensor name, or None if it has none (e.g. rope_freqs.weight).
    Hybrids: blocks from `model_layers` on (Qwen3.5's MTP blocks) have none."""
    if arch in HYBRID_ARCHITECTURES:
        return hybrid_tensor_name(gguf_name, arch, model_layers)
    if arch == "gemma4":
        return gemma4_tensor_name(gguf_name)
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
    meta = Metadata(gguf.metadata, gguf.path)
    arch = meta.string("general.architecture", "llama")
    layers = trunk_layers(meta, arch) if arch in HYBRID_ARCHITECTURES else 0
    out = {}
    for name, info in gguf.tensors.items():
        hf_name = hf_tensor_name(name, arch, layers) or name
        if hf_name in out:
            raise ModelFileError(gguf.path, f"tensors {out[hf_name].name!r} and {name!r} both map to {hf_name!r}")
        out[hf_name] = info
    return out
