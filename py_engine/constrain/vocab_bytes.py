"""The bytes each token id stands for, from either kind of tokenizer; None for ids never allowed.

Masks work on bytes, since a byte-level token can hold part of a UTF-8 character. Special and control
tokens (<|im_end|>, HF added tokens marked special, llama.cpp CONTROL / UNKNOWN / UNUSED, and the
stop ids) are never part of the output, so they are None; the constraint allows the stop ids alone.

GGUF (LlamaTokenizer): llama.cpp's own piece of each token (llama_token_to_piece), which is bytes.
HF tokenizer.json (Tokenizer): its decoder works on whole texts, so the mapping is recognised instead:
GPT-2 byte characters (Qwen, SmolLM2, Llama-3) or SentencePiece's "▁" with <0xNN> byte tokens
(Llama-2, Mistral, Gemma); each is checked against the tokenizer's own decode on a sample of tokens
(after a plain token, so that a decoder's strip of the first leading space does not count). When
neither fits, each token's text is decoded after that plain token (slower; tokens that decode to
U+FFFD are left out).
"""

import re

from ..tokenizer import LlamaTokenizer, Tokenizer
from ..tokenizer.byte_level import token_bytes
from .errors import ConstraintError

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
SAMPLE = 1500


def vocab_bytes(tokenizer, vocab_size: int) -> list[bytes | None]:
    if isinstance(tokenizer, LlamaTokenizer):
        pieces = _gguf_pieces(tokenizer)
    elif isinstance(tokenizer, Tokenizer):
        pieces = _hf_pieces(tokenizer)
    else:
        raise ConstraintError(f"no token table for a {type(tokenizer).__name__}")
    for token_id in tokenizer.eos_ids:
        if 0 <= token_id < len(pieces):
            pieces[token_id] = None
    return (pieces + [None] * vocab_size)[:vocab_size]


def _gguf_pieces(tokenizer: LlamaTokenizer) -> list[bytes | None]:
    # piece(special=False) is b"" for control, unknown and unused tokens, and for bytes of a BPE vocabulary.
    piece = tokenizer._detokenize.piece
    return [piece(token_id, False) or None for token_id in range(tokenizer.vocab_size)]


def _byte_level(text: str) -> bytes:
    return token_bytes(text)


def _metaspace(text: str) -> bytes:
    match = _BYTE_TOKEN.fullmatch(text)
    return bytes((int(match.group(1), 16),)) if match else text.replace("\u2581", " ").encode("utf-8")


def _hf_pieces(tokenizer: Tokenizer) -> list[bytes | None]:
    texts = [tokenizer.id_to_token(token_id) for token_id in range(tokenizer.vocab_size)]
    special = tokenizer._special_texts
    usable = [i for i, text in enumerate(texts) if text and text not in special]
    anchor = _anchor(tokenizer, texts, usable)
    prefix = tokenizer.decode([anchor])

    def decoded(token_id: int) -> str:
        return tokenizer.decode([anchor, token_id])[len(prefix) :]

    sample = usable[:: max(1, len(usable) // SAMPLE)]
    sample += [i for i in usable if _BYTE_TOKEN.fullmatch(texts[i]) and int(texts[i][3:5], 16) < 0x80]
    for mapping in (_byte_level, _metaspace):
        if all(_agrees(mapping(texts[i]), decoded(i)) for i in sample):
            pieces: list[bytes | None] = [None] * len(texts)
            for i in usable:
                pieces[i] = mapping(texts[i]) or None
            return pieces
    pieces = [None] * len(texts)
    for i in usable:
        text = decoded(i)
        pieces[i] = text.encode("utf-8") if text and "\ufffd" not in text else None
    return pieces


def _agrees(data: bytes, text: str) -> bool:
    """A mapping's bytes agree with the decoded text (partial characters decode to U+FFFD)."""
    try:
        return data.decode("utf-8") == text
    except UnicodeDecodeError:
        return "\ufffd" in text


def _anchor(tokenizer: Tokenizer, texts: list, usable: list[int]) -> int:
    """A plain token to decode others after: one whose text is a single ASCII letter."""
    for letter in "aeotx":
        for text in (letter, "\u2581" + letter, "\u0120" + letter):
            token_id = tokenizer.token_to_id(text)
            if token_id is not None and tokenizer.decode([token_id]).strip() == letter:
                return token_id
    if not usable:
        raise ConstraintError("the tokenizer has no usable tokens")
    return usable[0]
