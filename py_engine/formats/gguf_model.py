"""A GGUF file as a model: its ModelConfig, its tensors under HF names, its tokenizer.

Everything comes from the header `gguf.read_gguf` / `parse_gguf` returns: `general.architecture`
picks the `<arch>.*` keys of the config, llama.cpp's tensor names are mapped onto the HF names our
graph builders use, and the `tokenizer.*` keys describe the tokenizer (vocabulary, merges or
SentencePiece scores, token types, special ids, chat template).

The reference for the tokenizer is what HF transformers builds from the same file
(`AutoTokenizer.from_pretrained(dir, gguf_file=...)`); where llama.cpp and transformers disagree,
the comments say which one we follow and why.
"""
from __future__ import annotations

import re

from ..errors import ModelFileError, UnsupportedArchitectureError
from ..models.config import ModelConfig
from ..tokenizer import AddedToken, Tokenizer
from ..tokenizer.byte_level import CHAR_TO_BYTE, text_to_byte_chars
from .gguf import GGUFFile
from .safetensors import TensorInfo

# ---- config ----

_REQUIRED = object()

ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
}


def gguf_rope_interleaved(arch: str | None) -> bool:
    """Whether the model's Q/K use interleaved-pair RoPE as stored in the GGUF.

    llama.cpp's converter permutes the rows of Llama-family attn_q / attn_k so that its "normal"
    RoPE (rotating pairs (x[2i], x[2i+1])) computes what HF's rotate-half RoPE computes on the
    original rows. We keep the rows as stored, so for those models the engine must rotate
    interleaved pairs. Qwen2/Qwen3/Gemma3 use llama.cpp's NEOX RoPE (rotate-half, like HF) and
    are stored unpermuted."""
    return arch == "llama"


def config_from_gguf(gguf: GGUFFile) -> ModelConfig:
    """The ModelConfig of a GGUF model (llama, qwen2, qwen3, gemma3). Raises ModelFileError naming
    a missing or malformed key, UnsupportedArchitectureError for other architectures."""
    meta, path = gguf.metadata, gguf.path
    arch = meta.get("general.architecture")
    if arch is None:
        raise ModelFileError(path, "missing metadata key 'general.architecture'")
    if arch not in ARCHITECTURES:
        raise UnsupportedArchitectureError(
            f"{path}: unsupported GGUF architecture {arch!r}; supported: {', '.join(sorted(ARCHITECTURES))}")

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

    eos_ids = end_of_generation_ids(meta)
    bos_id = meta.get("tokenizer.ggml.bos_token_id")

    cfg = ModelConfig(
        architecture=ARCHITECTURES[arch],
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=key("feed_forward_length"),
        num_layers=key("block_count"),
        num_heads=heads,
        num_kv_heads=key("attention.head_count_kv", heads),
        head_dim=head_dim,
        rms_norm_eps=key("attention.layer_norm_rms_epsilon", kind=float),
        rope_theta=theta,
        rope_scaling=_rope_scaling(key, path, arch),
        partial_rotary_factor=rotary_dim / head_dim,
        max_position=key("context_length"),
        # llama.cpp reuses token_embd for the output when there is no output.weight.
        tie_word_embeddings="output.weight" not in gguf.tensors,
        sliding_window=key("attention.sliding_window", 0) if arch == "gemma3" else 0,
        attention_bias=arch == "qwen2" or "blk.0.attn_q.bias" in gguf.tensors,
        qk_norm=arch in ("qwen3", "gemma3"),
        eos_token_ids=eos_ids,
        bos_token_id=bos_id if isinstance(bos_id, int) else None,
    )
    cfg.rope_interleaved = gguf_rope_interleaved(arch)
    return cfg


# Token texts llama.cpp also stops on (llama-vocab.cpp's end-of-generation list), whatever eos says.
END_OF_GENERATION_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
                           "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>",
                           "<end_of_utterance>")


def end_of_generation_ids(meta: dict) -> list[int]:
    """The ids generation stops on, the eos token first: tokenizer.ggml.eos/eot/eom_token_id and,
    like llama.cpp, every token spelled like a known end-of-turn token (e.g. Qwen's <|endoftext|>
    besides its eos <|im_end|>)."""
    ids = []
    for name in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        token_id = meta.get(name)
        if isinstance(token_id, int) and not isinstance(token_id, bool) and token_id not in ids:
            ids.append(token_id)
    tokens = meta.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list):
        wanted = set(END_OF_GENERATION_TEXTS)
        ids += [i for i, token in enumerate(tokens) if token in wanted and i not in ids]
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
        for name, hf_name in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow"),
                              ("yarn_log_multiplier", "mscale")):
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
# Gemma3 has four norms per block: llama.cpp's attn_norm / post_attention_norm / ffn_norm /
# post_ffw_norm are HF's input / post_attention / pre_feedforward / post_feedforward layernorms.
# (llama.cpp's converter stores Gemma's norm weights with HF's "+1" already added.)
GEMMA3_HF_NAMES = {
    **HF_NAMES,
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
_BLOCK_NAME = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def hf_tensor_name(gguf_name: str, arch: str = "llama") -> str | None:
    """The HF name of a llama.cpp tensor name, or None if it has none (e.g. rope_freqs.weight)."""
    if gguf_name in HF_GLOBAL_NAMES:
        return HF_GLOBAL_NAMES[gguf_name]
    match = _BLOCK_NAME.fullmatch(gguf_name)
    if match is None:
        return None
    layer, part, kind = match.groups()
    hf_part = (GEMMA3_HF_NAMES if arch == "gemma3" else HF_NAMES).get(part)
    return None if hf_part is None else f"model.layers.{int(layer)}.{hf_part}.{kind}"


def hf_tensors(gguf: GGUFFile) -> dict[str, TensorInfo]:
    """The file's tensors keyed by HF name (TensorInfo.name keeps the name in the file). Tensors
    without an HF name (such as rope_freqs.weight) stay under their GGUF name.

    Q/K rows of Llama-family models stay as llama.cpp stored them (permuted for interleaved RoPE);
    see `gguf_rope_interleaved`."""
    arch = gguf.metadata.get("general.architecture", "llama")
    out = {}
    for name, info in gguf.tensors.items():
        hf_name = hf_tensor_name(name, arch) or name
        if hf_name in out:
            raise ModelFileError(gguf.path, f"tensors {out[hf_name].name!r} and {name!r} both map to {hf_name!r}")
        out[hf_name] = info
    return out


# ---- tokenizer ----

# GGUF token types (llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

_GPT2_SPLIT = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
_QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def _regex_then_bytes(regex: str) -> dict:
    return {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
    ]}


# tokenizer.ggml.pre -> (HF pre_tokenizer section, ignore_merges). The splits are llama.cpp's
# (llama-vocab.cpp), which are those of each model's original tokenizer.json.
PRE_TOKENIZERS = {
    # GPT-2's split. llama.cpp's "default" is a guess for unrecognised vocabularies; like
    # transformers we use GPT-2's split for it.
    "default": (_GPT2_SPLIT, False),
    "gpt-2": (_GPT2_SPLIT, False),
    # Digits one by one, then GPT-2's split (SmolLM's and StarCoder's tokenizer.json).
    **{name: ({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, _GPT2_SPLIT]}, False)
       for name in ("smollm", "starcoder", "refact", "command-r", "codeshell")},
    **{name: (_regex_then_bytes(_QWEN2_REGEX), False) for name in ("qwen2", "stablelm2", "deepseek-r1-qwen")},
    # Llama-3 matches a whole word that is itself a token before merging (ignore_merges), as its
    # tokenizer.json and llama.cpp do.
    **{name: (_regex_then_bytes(_LLAMA3_REGEX), True) for name in ("llama-bpe", "llama3", "llama-v3")},
}

_TEMPLATE_TOKEN_KEYS = {
    "bos_token": "tokenizer.ggml.bos_token_id",
    "eos_token": "tokenizer.ggml.eos_token_id",
    "unk_token": "tokenizer.ggml.unknown_token_id",
    "pad_token": "tokenizer.ggml.padding_token_id",
}


def tokenizer_from_gguf(gguf: GGUFFile) -> Tokenizer:
    """The tokenizer a GGUF file describes: `tokenizer.ggml.model` "gpt2" (byte-level BPE with
    merges) or "llama" (SentencePiece BPE with scores). Raises ModelFileError."""
    meta, path = gguf.metadata, gguf.path
    model = meta.get("tokenizer.ggml.model")
    if model is None:
        raise ModelFileError(path, "missing metadata key 'tokenizer.ggml.model' (the file has no tokenizer)")
    tokens = _list_of(meta, path, "tokenizer.ggml.tokens", str)
    if not tokens:
        raise ModelFileError(path, "metadata key 'tokenizer.ggml.tokens' is empty")
    types = meta.get("tokenizer.ggml.token_type")
    if types is not None:
        types = _list_of(meta, path, "tokenizer.ggml.token_type", int)
        if len(types) != len(tokens):
            raise ModelFileError(path, f"tokenizer.ggml.token_type has {len(types)} entries for {len(tokens)} tokens")

    def token_id(name: str) -> int | None:
        value = meta.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(tokens):
            raise ModelFileError(path, f"{name} = {value!r} is not a token id (vocabulary of {len(tokens)})")
        return value

    special_ids = {name: token_id(key) for name, key in _TEMPLATE_TOKEN_KEYS.items()}
    template_tokens = {name: tokens[i] for name, i in special_ids.items() if i is not None}
    named_ids = {i for i in special_ids.values() if i is not None}
    bos_id, eos_id, unk_id = special_ids["bos_token"], special_ids["eos_token"], special_ids["unk_token"]
    for name in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        token_id(name)  # validated; end_of_generation_ids collects them
    eos_ids = end_of_generation_ids(meta)
    chat_template = meta.get("tokenizer.chat_template")
    if chat_template is not None and not isinstance(chat_template, str):
        raise ModelFileError(path, "tokenizer.chat_template is not a string")
    common = dict(
        bos_id=bos_id, eos_ids=eos_ids, add_eos=_flag(meta, path, "tokenizer.ggml.add_eos_token", False),
        chat_template=chat_template, template_tokens=template_tokens, source=path,
    )

    if model == "gpt2":
        pre = meta.get("tokenizer.ggml.pre", "default")
        if pre not in PRE_TOKENIZERS:
            raise ModelFileError(path, f"unsupported tokenizer.ggml.pre {pre!r} (supported: "
                                       f"{', '.join(sorted(PRE_TOKENIZERS))})")
        pre_tokenizer, ignore_merges = PRE_TOKENIZERS[pre]
        merges = _list_of(meta, path, "tokenizer.ggml.merges", str)
        vocab, added = _byte_level_vocab(tokens, types, named_ids)
        return Tokenizer.from_spec(
            model_type="bpe", vocab=vocab, merges=merges, added_tokens=added,
            pre_tokenizer=pre_tokenizer, ignore_merges=ignore_merges,
            add_bos=_flag(meta, path, "tokenizer.ggml.add_bos_token", False), **common,
        )
    if model == "llama":
        scores = _list_of(meta, path, "tokenizer.ggml.scores", (int, float))
        if len(scores) != len(tokens):
            raise ModelFileError(path, f"tokenizer.ggml.scores has {len(scores)} entries for {len(tokens)} tokens")
        add_space_prefix = _flag(meta, path, "tokenizer.ggml.add_space_prefix", True)
        return Tokenizer.from_spec(
            model_type="sentencepiece-bpe", vocab=_unique_vocab(tokens), scores=[float(s) for s in scores],
            added_tokens=_added_tokens(tokens, types, named_ids),
            # transformers' LlamaTokenizer: "▁" replaces spaces and is prepended to the input's
            # start only (llama.cpp also prepends it after every special token, the "legacy" way).
            normalizer=None,
            pre_tokenizer={"type": "Metaspace", "replacement": "\u2581", "split": False,
                           "prepend_scheme": "first" if add_space_prefix else "never"},
            decoder={"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"},
                *([{"type": "Strip", "content": " ", "start": 1, "stop": 0}] if add_space_prefix else []),
            ]},
            unk_token=None if unk_id is None else tokens[unk_id], fuse_unk=True, byte_fallback=True,
            # SentencePiece vocabularies add BOS unless the file says otherwise (llama.cpp, transformers).
            add_bos=_flag(meta, path, "tokenizer.ggml.add_bos_token", True), **common,
        )
    raise ModelFileError(path, f"unsupported tokenizer.ggml.model {model!r} (supported: gpt2, llama)")


def _list_of(meta: dict, path, key: str, kind) -> list:
    value = meta.get(key)
    if value is None:
        raise ModelFileError(path, f"missing metadata key {key!r}")
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, kind) for v in value):
        raise ModelFileError(path, f"metadata key {key!r} has the wrong type")
    return value


def _flag(meta: dict, path, key: str, default: bool) -> bool:
    value = meta.get(key, default)
    if not isinstance(value, bool):
        raise ModelFileError(path, f"metadata key {key!r} should be a bool, got {value!r}")
    return value


def _unique_vocab(tokens: list[str]) -> dict[str, int]:
    """{token: id}; like HF's vocab dict, a repeated token keeps its last id."""
    return {token: index for index, token in enumerate(tokens)}


def _added_tokens(tokens: list[str], types: list[int] | None, special_ids, spellable=None) -> list[AddedToken]:
    """Tokens matched whole in the raw text, as transformers' GGUF loader adds them: control
    tokens and the bos / eos / unk / pad tokens as special tokens, user-defined ones as plain
    added tokens. `spellable` filters out tokens transformers cannot add (see `_byte_level_vocab`)."""
    kinds = {}
    for index, kind in enumerate(types or ()):
        if kind in (CONTROL, USER_DEFINED):
            kinds[index] = kind
    for index in special_ids:
        kinds[index] = CONTROL
    return [
        AddedToken(id=index, content=tokens[index], special=kinds[index] == CONTROL, normalized=False)
        for index in sorted(kinds)
        if tokens[index] and (spellable is None or spellable(tokens[index]))
    ]


def _byte_level_vocab(tokens: list[str], types: list[int] | None,
                      special_ids) -> tuple[dict[str, int], list[AddedToken]]:
    """The vocabulary of a "gpt2" model, spelled in the byte alphabet, and its added tokens.

    Every regular token of a byte-level vocabulary is written in GPT-2's byte alphabet. A token
    with any other character (an added token stored as raw text, e.g. with a real space) is
    respelled into it, as transformers does, and transformers only adds control and user-defined
    tokens that are spelled in the alphabet: we follow it, so that such tokens are cut into
    pieces here exactly as there."""

    def spelled(token: str) -> bool:
        return all(char in CHAR_TO_BYTE for char in token)

    vocab = _unique_vocab([token if spelled(token) else text_to_byte_chars(token) for token in tokens])
    return vocab, _added_tokens(tokens, types, special_ids, spelled)
