"""A GGUF file's tokenizer: `tokenizer.ggml.*` keys (vocabulary, merges or SentencePiece scores,
token types, special ids, flags) and `tokenizer.chat_template`, built into our Tokenizer.

The reference is what HF transformers builds from the same file
(`AutoTokenizer.from_pretrained(dir, gguf_file=...)`); where llama.cpp and transformers disagree,
the comments say which one we follow and why.
"""

from __future__ import annotations

from ..errors import ModelFileError
from ..tokenizer import AddedToken, Tokenizer
from ..tokenizer.byte_level import CHAR_TO_BYTE, text_to_byte_chars
from .gguf import GGUFFile
from .gguf_model import end_of_generation_ids

# GGUF token types (llama.cpp's llama_token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

_GPT2_SPLIT = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}
_QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _regex_then_bytes(regex: str) -> dict:
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
        ],
    }


# tokenizer.ggml.pre -> (HF pre_tokenizer section, ignore_merges). The splits are llama.cpp's
# (llama-vocab.cpp), which are those of each model's original tokenizer.json.
PRE_TOKENIZERS = {
    # GPT-2's split. llama.cpp's "default" is a guess for unrecognised vocabularies; like
    # transformers we use GPT-2's split for it.
    "default": (_GPT2_SPLIT, False),
    "gpt-2": (_GPT2_SPLIT, False),
    # Digits one by one, then GPT-2's split (SmolLM's and StarCoder's tokenizer.json).
    **{
        name: (
            {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, _GPT2_SPLIT]},
            False,
        )
        for name in ("smollm", "starcoder", "refact", "command-r", "codeshell")
    },
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
    bos_id, unk_id = special_ids["bos_token"], special_ids["unk_token"]
    for name in ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        token_id(name)  # validated; end_of_generation_ids collects them
    eos_ids = end_of_generation_ids(meta)
    chat_template = meta.get("tokenizer.chat_template")
    if chat_template is not None and not isinstance(chat_template, str):
        raise ModelFileError(path, "tokenizer.chat_template is not a string")
    common = dict(
        bos_id=bos_id,
        eos_ids=eos_ids,
        add_eos=_flag(meta, path, "tokenizer.ggml.add_eos_token", False),
        chat_template=chat_template,
        template_tokens=template_tokens,
        source=path,
    )

    if model == "gpt2":
        pre = meta.get("tokenizer.ggml.pre", "default")
        if pre not in PRE_TOKENIZERS:
            raise ModelFileError(
                path, f"unsupported tokenizer.ggml.pre {pre!r} (supported: {', '.join(sorted(PRE_TOKENIZERS))})"
            )
        pre_tokenizer, ignore_merges = PRE_TOKENIZERS[pre]
        merges = _list_of(meta, path, "tokenizer.ggml.merges", str)
        vocab, added = _byte_level_vocab(tokens, types, named_ids)
        return Tokenizer.from_spec(
            model_type="bpe",
            vocab=vocab,
            merges=merges,
            added_tokens=added,
            pre_tokenizer=pre_tokenizer,
            ignore_merges=ignore_merges,
            add_bos=_flag(meta, path, "tokenizer.ggml.add_bos_token", False),
            **common,
        )
    if model == "llama":
        scores = _list_of(meta, path, "tokenizer.ggml.scores", (int, float))
        if len(scores) != len(tokens):
            raise ModelFileError(path, f"tokenizer.ggml.scores has {len(scores)} entries for {len(tokens)} tokens")
        add_space_prefix = _flag(meta, path, "tokenizer.ggml.add_space_prefix", True)
        return Tokenizer.from_spec(
            model_type="sentencepiece-bpe",
            vocab=_unique_vocab(tokens),
            scores=[float(s) for s in scores],
            added_tokens=_added_tokens(tokens, types, named_ids),
            # transformers' LlamaTokenizer: "▁" replaces spaces and is prepended to the input's
            # start only (llama.cpp also prepends it after every special token, the "legacy" way).
            normalizer=None,
            pre_tokenizer={
                "type": "Metaspace",
                "replacement": "\u2581",
                "split": False,
                "prepend_scheme": "first" if add_space_prefix else "never",
            },
            decoder={
                "type": "Sequence",
                "decoders": [
                    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                    {"type": "ByteFallback"},
                    {"type": "Fuse"},
                    *([{"type": "Strip", "content": " ", "start": 1, "stop": 0}] if add_space_prefix else []),
                ],
            },
            unk_token=None if unk_id is None else tokens[unk_id],
            fuse_unk=True,
            byte_fallback=True,
            # SentencePiece vocabularies add BOS unless the file says otherwise (llama.cpp, transformers).
            add_bos=_flag(meta, path, "tokenizer.ggml.add_bos_token", True),
            **common,
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


def _byte_level_vocab(
    tokens: list[str], types: list[int] | None, special_ids
) -> tuple[dict[str, int], list[AddedToken]]:
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
