"""A GGUF file's tokenizer: the `tokenizer.ggml.*` keys read the way llama.cpp reads them
(src/llama-vocab.cpp, llama_vocab::impl::load), with its defaults where a key is missing, and
`tokenizer.chat_template`. llama.cpp is the reference: the tokenizer encodes and decodes as
llama_tokenize and llama_detokenize do (see py_engine/tokenizer/llama_tokenizer.py).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

from ..errors import ModelFileError
from ..tokenizer.llama_pre import PRE_TOKENIZERS
from ..tokenizer.llama_tokenizer import LlamaTokenizer
from ..tokenizer.llama_vocab import NORMAL, TYPE_ATTRS, LlamaVocab, apply_text_rules
from ..tokenizer.spec_error import SpecError
from .gguf import GGUFFile

log = logging.getLogger("wisp")

KEY = "tokenizer.ggml."

# tokenizer.ggml.model -> (our kind, llama.cpp's default special ids)
_MODELS = {
    "llama": ("spm", {"bos": 1, "eos": 2, "unk": 0}),
    "gpt2": ("bpe", {"bos": 11, "eos": 11}),
    "bert": ("wpm", {"bos": 101, "unk": 100, "sep": 102, "pad": 0, "mask": 103}),
    "t5": ("ugm", {"eos": 1, "unk": 2, "pad": 0}),
}

# Our name of a special token -> its key (after "tokenizer.ggml."); later keys win.
_SPECIAL_KEYS = (
    ("bos", "bos_token_id"),
    ("eos", "eos_token_id"),
    ("eot", "eot_token_id"),
    ("eom", "eom_token_id"),
    ("unk", "unknown_token_id"),
    ("sep", "seperator_token_id"),  # sic: llama.cpp's spelling
    ("pad", "padding_token_id"),
    ("mask", "mask_token_id"),
    ("fim_pre", "fim_pre_token_id"),
    ("fim_suf", "fim_suf_token_id"),
    ("fim_mid", "fim_mid_token_id"),
    ("fim_pad", "fim_pad_token_id"),
    ("fim_rep", "fim_rep_token_id"),
    ("fim_sep", "fim_sep_token_id"),
    ("fim_pre", "prefix_token_id"),
    ("fim_suf", "suffix_token_id"),
    ("fim_mid", "middle_token_id"),
)


def tokenizer_from_gguf(gguf: GGUFFile) -> LlamaTokenizer:
    """The tokenizer a GGUF file describes. Raises ModelFileError."""
    meta, path = gguf.metadata, gguf.path
    chat_template = meta.get("tokenizer.chat_template")
    if chat_template is not None and not isinstance(chat_template, str):
        raise ModelFileError(path, "tokenizer.chat_template is not a string")
    with _errors_naming(path):
        return LlamaTokenizer(read_vocab(meta, path), chat_template=chat_template)


@contextmanager
def _errors_naming(path):
    try:
        yield
    except SpecError as err:
        raise ModelFileError(path, str(err)) from None


def read_vocab(meta: dict, path) -> LlamaVocab:
    model = _value(meta, path, "model", str)
    if model is None:
        raise ModelFileError(path, f"missing metadata key '{KEY}model' (the file has no tokenizer)")
    if model not in _MODELS:
        raise ModelFileError(path, f"unsupported {KEY}model {model!r} (supported: {', '.join(_MODELS)})")
    kind, special = _MODELS[model]
    special = dict(special)
    pre_name = _value(meta, path, "pre", str) or "default"
    tokens = _array(meta, path, "tokens", str, required=True)
    if not tokens:
        raise ModelFileError(path, f"metadata key '{KEY}tokens' is empty")
    # llama.cpp names empty tokens so that no text matches them.
    tokens = [token or f"[EMPTY_{index}]" for index, token in enumerate(tokens)]
    scores = _array(meta, path, "scores", (int, float), length=len(tokens))
    types = _array(meta, path, "token_type", int, length=len(tokens))
    vocab = LlamaVocab(
        kind=kind,
        tokens=tokens,
        scores=[float(score) for score in scores] if scores else [0.0] * len(tokens),
        attrs=[TYPE_ATTRS.get(kind_, 0) for kind_ in types] if types else [NORMAL] * len(tokens),
        special=special,
        add_bos=kind in ("spm", "wpm"),
        add_eos=kind == "ugm",
        add_space_prefix=kind == "spm",
        clean_spaces=kind in ("bpe", "wpm"),
    )
    if kind == "bpe":
        _read_bpe(vocab, meta, path, pre_name)
    if kind == "ugm":
        charsmap = _array(meta, path, "precompiled_charsmap", int) or []
        vocab.charsmap = bytes(value & 0xFF for value in charsmap)
    vocab.add_space_prefix = _flag(meta, path, "add_space_prefix", vocab.add_space_prefix)
    vocab.remove_extra_whitespaces = _flag(meta, path, "remove_extra_whitespaces", False)
    _read_special_ids(vocab, meta, path)
    vocab.add_bos = _flag(meta, path, "add_bos_token", vocab.add_bos)
    vocab.add_eos = _flag(meta, path, "add_eos_token", vocab.add_eos)
    if vocab.pre is not None and vocab.pre.force_bos:
        vocab.add_bos = True
    vocab.lowercase = _flag(meta, path, "normalizer.lowercase", False)
    vocab.strip_accents = _flag(meta, path, "normalizer.strip_accents", vocab.lowercase)
    apply_text_rules(
        vocab,
        model_name=_value(meta, path, "general.name", str, prefix="") or "",
        pre_name=pre_name,
        architecture=_value(meta, path, "general.architecture", str, prefix="") or "",
    )
    return vocab


def _read_bpe(vocab: LlamaVocab, meta: dict, path, pre_name: str) -> None:
    pre = PRE_TOKENIZERS.get(pre_name)
    if pre is None:
        raise ModelFileError(path, f"unknown {KEY}pre {pre_name!r}: llama.cpp does not know this pre-tokenizer either")
    vocab.pre = pre
    # Kimi-K2 files may have no merges: llama.cpp accepts that for it alone.
    vocab.merges = _array(meta, path, "merges", str, required=pre_name != "kimi-k2") or []
    vocab.add_space_prefix = False
    vocab.escape_whitespaces = pre.escape_whitespaces
    vocab.clean_spaces = pre.clean_spaces
    vocab.ignore_merges = pre.ignore_merges
    vocab.add_bos = pre.add_bos
    if pre.no_bos_token:
        vocab.special["bos"] = None


def _read_special_ids(vocab: LlamaVocab, meta: dict, path) -> None:
    """Defaults outside the vocabulary are dropped; a key outside it is ignored with a warning."""
    special, n_tokens = vocab.special, len(vocab.tokens)
    for name, value in list(special.items()):
        if value is not None and value >= n_tokens:
            special[name] = None
    for name, key in _SPECIAL_KEYS:
        value = _value(meta, path, key, int)
        if value is None:
            continue
        if not 0 <= value < n_tokens:
            log.warning("%s: %s%s = %d is not a token id; using %s", path, KEY, key, value, special.get(name))
            continue
        special[name] = value


def _value(meta: dict, path, key: str, kind, prefix: str = KEY):
    value = meta.get(prefix + key)
    if value is not None and (isinstance(value, bool) != (kind is bool) or not isinstance(value, kind)):
        raise ModelFileError(path, f"metadata key {prefix + key!r} has the wrong type")
    return value


def _flag(meta: dict, path, key: str, default: bool) -> bool:
    value = _value(meta, path, key, bool)
    return default if value is None else value


def _array(meta: dict, path, key: str, kind, *, required: bool = False, length: int | None = None) -> list | None:
    value = meta.get(KEY + key)
    if value is None:
        if required:
            raise ModelFileError(path, f"missing metadata key '{KEY}{key}'")
        return None
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, kind) for v in value):
        raise ModelFileError(path, f"metadata key '{KEY}{key}' has the wrong type")
    if length is not None and len(value) < length:
        raise ModelFileError(path, f"{KEY}{key} has {len(value)} entries for {length} tokens")
    return value
