"""A llama.cpp vocabulary: tokens, scores, attributes, special ids and flags (llama_vocab::impl).

`formats/gguf_tokenizer.py` fills it from a GGUF file's `tokenizer.ggml.*` keys with llama.cpp's
defaults; `apply_text_rules` then makes the adjustments llama.cpp makes from token texts and model
names. The attributes decide how a token is matched in text and decoded (llama_token_attr bits).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .pre import PreTokenizer

# llama_token_attr bits.
UNKNOWN, UNUSED, NORMAL, CONTROL, USER_DEFINED, BYTE = 1, 2, 4, 8, 16, 32
LSTRIP, RSTRIP = 128, 256

# GGUF token type (llama_token_type) -> attribute; any other type is "undefined" (0).
TYPE_ATTRS = {1: NORMAL, 2: UNKNOWN, 3: CONTROL, 4: USER_DEFINED, 5: UNUSED, 6: BYTE}

# Tokens matched in text before the model runs (control ones only where special tokens are parsed).
MATCHED_IN_TEXT = CONTROL | USER_DEFINED | UNKNOWN


@dataclass
class LlamaVocab:
    kind: str  # "spm" (llama), "bpe" (gpt2), "wpm" (bert) or "ugm" (t5)
    tokens: list[str]
    scores: list[float]
    attrs: list[int]
    special: dict[str, int | None]  # bos, eos, eot, eom, unk, sep, pad, mask, fim_pre ... fim_sep
    add_bos: bool = False
    add_eos: bool = False
    add_space_prefix: bool = False
    remove_extra_whitespaces: bool = False
    escape_whitespaces: bool = True
    clean_spaces: bool = False
    ignore_merges: bool = False
    lowercase: bool = False  # BERT normalizer options
    strip_accents: bool = False
    pre: PreTokenizer | None = None  # bpe only
    merges: list[str] = field(default_factory=list)  # bpe only
    charsmap: bytes = b""  # ugm only: SentencePiece's precompiled normalization map
    eog_ids: set[int] = field(default_factory=set)
    ids: dict[str, int] = field(init=False)  # text -> id; a repeated text keeps its last id

    def __post_init__(self):
        self.ids = {token: index for index, token in enumerate(self.tokens)}

    def matched_in_text(self) -> list[int]:
        """Ids cut out of the text before tokenizing, longest text (in UTF-8 bytes) first."""
        found = [i for i, attr in enumerate(self.attrs) if attr & MATCHED_IN_TEXT]
        return sorted(found, key=lambda i: -len(self.tokens[i].encode("utf-8")))


# Texts llama.cpp takes for a special token when the file does not name one, in its order.
_DETECTED = {
    "eot": (
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|end_of_text|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "<｜end▁of▁sentence｜>",
        "<end_of_utterance>",
    ),
    "eom": ("<|eom_id|>",),
    "fim_pre": (
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
    ),
    "fim_suf": (
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
    ),
    "fim_mid": (
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
        "<|middle|>",
    ),
    "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep": ("<|file_sep|>",),
}

# Tokens that end generation, whatever the file says.
END_OF_GENERATION = frozenset(
    (
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<|flush|>",
        "<|calls|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "</s>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "[EOT]",
        "[EOS]",
        "<|end_of_text|>",
        "<end_of_utterance>",
        "<eos>",
        "<turn|>",
        "<|tool_response>",
        "<｜end▁of▁sentence｜>",
        "[e~[",
    )
)

# gpt-oss: llama.cpp always renders these, as plain added tokens.
_ALWAYS_RENDERED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")


def apply_text_rules(vocab: LlamaVocab, *, model_name: str, pre_name: str, architecture: str) -> None:
    """llama.cpp's adjustments by token text: special tokens it recognises, control tokens named
    "unused", the end-of-generation set, and the strip flags some model families get."""
    tokens, attrs, special = vocab.tokens, vocab.attrs, vocab.special
    for name, texts in _DETECTED.items():
        if special.get(name) is None:
            # llama.cpp takes the first it meets in a hash map; we take the lowest id (of a
            # repeated text, its last id: the one `ids` keeps). Looked up, not scanned: a
            # vocabulary has some 10^5 tokens.
            found = [vocab.ids[text] for text in texts if text in vocab.ids]
            if found:
                special[name] = min(found)
                attrs[min(found)] |= CONTROL
    for index, token in enumerate(tokens):
        if attrs[index] & CONTROL and "unused" in token:
            attrs[index] |= UNUSED

    eog = {special[name] for name in ("fim_pad", "fim_rep", "fim_sep") if special.get(name) is not None}
    for token, index in vocab.ids.items():
        if token in END_OF_GENERATION:
            eog.add(index)
            attrs[index] |= CONTROL
        if token in _ALWAYS_RENDERED:
            attrs[index] = USER_DEFINED
    eog.update(special[name] for name in ("eos", "eot", "eom") if special.get(name) is not None)
    _drop_false_ends(vocab, eog)
    vocab.eog_ids = eog
    _strip_flags(vocab, model_name.lower(), pre_name, architecture)


def _drop_false_ends(vocab: LlamaVocab, eog: set[int]) -> None:
    """gpt-oss and Solar Open end turns with "<|end|>" but keep generating; Gemma 4 and PLaMo
    write "</s>" as a normal token."""
    by_text = {vocab.tokens[i]: i for i in sorted(eog)}
    has_call = "<|call|>" in by_text or "<|calls|>" in by_text
    if "<|end|>" in by_text and has_call and ("<|return|>" in by_text or "<|flush|>" in by_text):
        eog.discard(by_text["<|end|>"])
        vocab.attrs[by_text["<|end|>"]] = USER_DEFINED
    if "</s>" in by_text and ("<|tool_response>" in by_text or "<|plamo:eos|>" in by_text):
        eog.discard(by_text["</s>"])
        vocab.attrs[by_text["</s>"]] = NORMAL


def _strip_flags(vocab: LlamaVocab, model_name: str, pre_name: str, architecture: str) -> None:
    ids, attrs = vocab.ids, vocab.attrs
    if any(name in pre_name for name in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or any(
        name in architecture for name in ("nomic-bert-moe", "jina-bert-v3")
    ):
        if "<mask>" in ids:
            attrs[ids["<mask>"]] |= LSTRIP
    elif "phi-3" in model_name or "phi3" in model_name:
        for index in vocab.matched_in_text():
            attrs[index] |= RSTRIP
        for token, strip in (("</s>", True), ("<unk>", False), ("<s>", False), ("<|endoftext|>", False)):
            if token in ids:
                attrs[ids[token]] = attrs[ids[token]] | RSTRIP if strip else attrs[ids[token]] & ~RSTRIP
    elif "modern-bert" in model_name and "[MASK]" in ids:
        attrs[ids["[MASK]"]] |= LSTRIP
