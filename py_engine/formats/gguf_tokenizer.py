"""A GGUF file's tokenizer: the `tokenizer.ggml.*` keys read the way llama.cpp reads them
(src/llama-vocab.cpp, llama_vocab::impl::load), with its defaults where a key is missing, and
`tokenizer.chat_template`. llama.cpp is the reference: the tokenizer encodes and decodes as
llama_tokenize and llama_detokenize do (see py_engine/tokenizer/llama/tokenizer.py).
"""

from __future__ import annotations

import logging
import math
import re
from contextlib import contextmanager

from ..errors import ModelFileError
from ..tokenizer.llama.pre import PRE_TOKENIZERS
from ..tokenizer.llama.tokenizer import LlamaTokenizer
from ..tokenizer.llama.vocab import BYTE, NORMAL, TYPE_ATTRS, LlamaVocab, apply_text_rules
from ..tokenizer.spec_error import SpecError
from .gguf import ARRAY, INT8, UINT8, GGUFFile
from .gguf_values import REQUIRED, Metadata, describe, is_int

log = logging.getLogger("wisp")

KEY = "tokenizer.ggml."

# tokenizer.ggml.model -> (our kind, llama.cpp's default special ids)
_MODELS = {
    "llama": ("spm", {"bos": 1, "eos": 2, "unk": 0}),
    "gpt2": ("bpe", {"bos": 11, "eos": 11}),
    "bert": ("wpm", {"bos": 101, "unk": 100, "sep": 102, "pad": 0, "mask": 103}),
    "t5": ("ugm", {"eos": 1, "unk": 2, "pad": 0}),
    # Gemma 4: BPE over raw UTF-8 with "▁" for spaces and <0xNN> byte tokens; no default ids.
    "gemma4": ("bpe", {}),
}
# Models whose pre-tokenizer llama.cpp fixes, whatever tokenizer.ggml.pre says.
_FIXED_PRE = {"gemma4": "gemma4"}

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
    """The tokenizer a GGUF file describes. Raises ModelFileError naming the file and the key."""
    meta = Metadata(gguf.metadata, gguf.path)
    chat_template = meta.string("tokenizer.chat_template", None)
    with _errors_naming(gguf.path):
        return LlamaTokenizer(read_vocab(meta, gguf.metadata_types), chat_template=chat_template)


@contextmanager
def _errors_naming(path):
    try:
        yield
    except SpecError as err:
        raise ModelFileError(path, str(err)) from None


def read_vocab(meta: Metadata, types: dict | None = None) -> LlamaVocab:
    """The vocabulary of the tokenizer.ggml.* keys; `types`: the file's value types, where known
    (GGUFFile.metadata_types), to hold the charsmap to llama.cpp's byte arrays."""
    model = meta.string(KEY + "model", None)
    if model is None:
        raise ModelFileError(meta.path, f"missing metadata key '{KEY}model' (the file has no tokenizer)")
    if model not in _MODELS:
        raise ModelFileError(meta.path, f"unsupported {KEY}model {model!r:.60} (supported: {', '.join(_MODELS)})")
    kind, special = _MODELS[model]
    special = dict(special)
    pre_name = meta.string(KEY + "pre", None) or "default"
    pre_name = _FIXED_PRE.get(model, pre_name)
    tokens = meta.array(KEY + "tokens", types=(str,), what="strings")
    if not tokens:
        meta.fail(KEY + "tokens", "is an empty array")
    # llama.cpp names empty tokens so that no text matches them.
    tokens = [token or f"[EMPTY_{index}]" for index, token in enumerate(tokens)]
    scores = meta.array(
        KEY + "scores", math.isfinite, None, types=(float, int), length=len(tokens), what="finite numbers"
    )
    types_ = meta.array(KEY + "token_type", None, None, types=(int,), length=len(tokens), what="integers")
    vocab = LlamaVocab(
        kind=kind,
        tokens=tokens,
        scores=[float(score) for score in scores] if scores else [0.0] * len(tokens),
        attrs=[TYPE_ATTRS.get(kind_, 0) for kind_ in types_] if types_ else [NORMAL] * len(tokens),
        special=special,
        add_bos=kind in ("spm", "wpm"),
        add_eos=kind == "ugm",
        add_space_prefix=kind == "spm",
        clean_spaces=kind in ("bpe", "wpm"),
    )
    if kind != "bpe":
        _check_byte_tokens(vocab, meta)
    if kind == "bpe":
        _read_bpe(vocab, meta, pre_name)
    if kind == "ugm":
        vocab.charsmap = _charsmap(meta, (types or {}).get(KEY + "precompiled_charsmap"))
    vocab.add_space_prefix = meta.flag(KEY + "add_space_prefix", vocab.add_space_prefix)
    vocab.remove_extra_whitespaces = meta.flag(KEY + "remove_extra_whitespaces", False)
    _read_special_ids(vocab, meta)
    vocab.add_bos = meta.flag(KEY + "add_bos_token", vocab.add_bos)
    vocab.add_eos = meta.flag(KEY + "add_eos_token", vocab.add_eos)
    if vocab.pre is not None and vocab.pre.force_bos:
        vocab.add_bos = True
    vocab.lowercase = meta.flag(KEY + "normalizer.lowercase", False)
    vocab.strip_accents = meta.flag(KEY + "normalizer.strip_accents", vocab.lowercase)
    apply_text_rules(
        vocab,
        model_name=meta.string("general.name", "") or "",
        pre_name=pre_name,
        architecture=meta.string("general.architecture", "") or "",
    )
    return vocab


_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def _check_byte_tokens(vocab: LlamaVocab, meta: Metadata) -> None:
    """llama.cpp reads a byte token's byte from its text, <0xNN> (token_to_byte)."""
    for index, attr in enumerate(vocab.attrs):
        if attr & BYTE and not _BYTE_TOKEN.fullmatch(vocab.tokens[index]):
            meta.fail(
                KEY + "token_type", f"makes token {index} ({vocab.tokens[index][:40]!r}) a byte, not spelled <0xNN>"
            )


def _charsmap(meta: Metadata, value_type) -> bytes:
    """SentencePiece's normalization map: llama.cpp takes a uint8 or int8 array."""
    key = KEY + "precompiled_charsmap"
    values = meta.array(key, None, None, types=(int,), what="bytes")
    if values is None:
        return b""
    if values and not -128 <= min(values) <= max(values) <= 255:
        meta.fail(key, f"holds {min(values) if min(values) < -128 else max(values)}: not a byte")
    if value_type is not None and value_type not in ((ARRAY, UINT8), (ARRAY, INT8)):
        meta.fail(key, "should be an array of uint8 or int8")
    return bytes(value & 0xFF for value in values)


def _read_bpe(vocab: LlamaVocab, meta: Metadata, pre_name: str) -> None:
    pre = PRE_TOKENIZERS.get(pre_name)
    if pre is None:
        raise ModelFileError(
            meta.path, f"unknown {KEY}pre {pre_name!r:.60}: llama.cpp does not know this pre-tokenizer either"
        )
    vocab.pre = pre
    # Kimi-K2 files may have no merges: llama.cpp accepts that for it alone.
    required = REQUIRED if pre_name != "kimi-k2" else None
    merges = meta.array(KEY + "merges", None, required, types=(str,), what="strings")
    vocab.merges = merges or []
    vocab.add_space_prefix = False
    vocab.escape_whitespaces = pre.escape_whitespaces
    vocab.clean_spaces = pre.clean_spaces
    vocab.ignore_merges = pre.ignore_merges
    vocab.add_bos = pre.add_bos
    if pre.no_bos_token:
        vocab.special["bos"] = None


def _read_special_ids(vocab: LlamaVocab, meta: Metadata) -> None:
    """Defaults outside the vocabulary are dropped; a key outside it is ignored with a warning, as
    llama.cpp does."""
    special, n_tokens = vocab.special, len(vocab.tokens)
    for name, value in list(special.items()):
        if value is not None and value >= n_tokens:
            special[name] = None
    for name, key in _SPECIAL_KEYS:
        value = meta.meta.get(KEY + key)
        if value is None:
            continue
        if not is_int(value):
            meta.fail(KEY + key, f"should be a token id, got {describe(value)}")
        if not 0 <= value < n_tokens:
            log.warning("%s: %s%s = %d is not a token id; using %s", meta.path, KEY, key, value, special.get(name))
            continue
        special[name] = value
