"""Token ids -> text as llama.cpp's llama_detokenize does it (remove_special off).

Each token becomes its piece (llama_token_to_piece): control and unknown tokens their text, or
nothing when special tokens are not rendered; user-defined tokens their text; normal tokens their
text with "▁" as a space (SentencePiece-style) or their GPT-2 byte characters as bytes; byte
tokens their byte (Gemma 4's BPE <0xNN> ones too); unused and undefined tokens nothing. Where the
vocabulary prepends a space when encoding, one leading space of the first piece goes. BPE and
WordPiece vocabularies then "clean up" spaces before punctuation and contractions, as llama.cpp
does.
"""

import re

from ..byte_level import CHAR_TO_BYTE
from .vocab import BYTE, CONTROL, NORMAL, UNKNOWN, USER_DEFINED, LlamaVocab

_CLEANUPS = (
    (re.compile(rb" (?=[?!.,])"), b""),  # " ?", " !", " .", " ,"
    (re.compile(rb" ' "), b"'"),  # a lone apostrophe between spaces
    (re.compile(rb" (?='(?:s|m|re|ve))"), b""),  # " 's", " 'm", " 're", " 've"
)


def _byte_level_bytes(token: str) -> bytes:
    """A byte-level token's bytes; llama.cpp writes a character outside GPT-2's alphabet oddly."""
    out = bytearray()
    for char in token:
        byte = CHAR_TO_BYTE.get(char)
        if byte is not None:
            out.append(byte)
        else:
            out += b"[UNK_BYTE_0x" + char.encode("utf-8").hex().encode() + token.encode("utf-8") + b"]"
    return bytes(out)


_STRTOL_HEX = re.compile(r"[ \t\n\v\f\r]*([+-]?)([0-9A-Fa-f]*)")


def _token_byte(text: str) -> int:
    """llama.cpp's token_to_byte for a BPE byte token: strtol(text.substr(3, 2), 16) as a char,
    which is NN for <0xNN> and whatever C makes of other spellings."""
    sign, digits = _STRTOL_HEX.match(text.encode("utf-8")[3:5].decode("latin-1")).groups()
    value = int(digits or "0", 16)
    return (-value if sign == "-" else value) & 0xFF


class Detokenizer:
    def __init__(self, vocab: LlamaVocab):
        self._vocab = vocab
        self._spelled_as_bytes = vocab.kind == "bpe" and not vocab.escape_whitespaces
        self._pieces: dict[int, bytes] = {}

    def piece(self, token_id: int, special: bool) -> bytes:
        attr = self._vocab.attrs[token_id]
        if attr & (UNKNOWN | CONTROL) and not special:
            return b""
        piece = self._pieces.get(token_id)
        if piece is None:
            piece = self._pieces[token_id] = self._piece(token_id, attr)
        return piece

    def _piece(self, token_id: int, attr: int) -> bytes:
        text = self._vocab.tokens[token_id]
        if attr & (UNKNOWN | CONTROL | USER_DEFINED):
            return text.encode("utf-8")
        if attr & NORMAL:
            if self._spelled_as_bytes:
                return _byte_level_bytes(text)
            return text.replace("\u2581", " ").encode("utf-8")
        if attr & BYTE:
            # Spelled <0xNN> (formats/gguf_tokenizer.py refuses other spellings but in BPE
            # vocabularies, which llama.cpp reads as it reads Gemma 4's <0xNN>: see _token_byte).
            return bytes([int(text[3:5], 16) if self._vocab.kind != "bpe" else _token_byte(text)])
        return b""

    def __call__(self, ids: list[int], special: bool) -> str:
        n_tokens = len(self._vocab.tokens)
        # Ids outside the vocabulary are dropped (llama.cpp would fail on them).
        pieces = [self.piece(token_id, special) for token_id in ids if 0 <= token_id < n_tokens]
        if pieces and self._vocab.add_space_prefix and pieces[0].startswith(b" "):
            pieces[0] = pieces[0][1:]
        data = b"".join(pieces)
        if self._vocab.clean_spaces:
            for pattern, replacement in _CLEANUPS:
                data = pattern.sub(replacement, data)
        return data.decode("utf-8", errors="replace")


class LlamaStreamDecoder:
    """Decodes generated tokens one at a time; the pieces add up to the Detokenizer's text.

    Bytes of an unfinished UTF-8 character wait for the rest; where spaces are cleaned up, the
    last few characters wait too, since a space is dropped depending on the three that follow.
    """

    def __init__(self, detokenizer: Detokenizer, vocab: LlamaVocab, special: bool):
        self._detokenizer, self._vocab, self._special = detokenizer, vocab, special
        self._reset()

    def _reset(self) -> None:
        self._first = True
        self._bytes = b""  # pieces not decoded yet: the start of a UTF-8 character
        self._text = ""  # decoded, waiting for the space clean-up

    def push(self, token_id: int) -> str:
        if not 0 <= token_id < len(self._vocab.tokens):
            return ""
        piece = self._detokenizer.piece(token_id, self._special)
        if self._first and self._vocab.add_space_prefix and piece.startswith(b" "):
            piece = piece[1:]
        self._first = False
        data = self._bytes + piece
        complete = _complete_length(data)
        self._bytes = data[complete:]
        self._text += data[:complete].decode("utf-8", errors="replace")
        if not self._vocab.clean_spaces:
            return self._release(len(self._text))
        # No clean-up pattern (a space and at most three characters) may straddle the cut.
        cut = len(self._text) - 3
        while cut > 0 and (space := self._text.rfind(" ", max(0, cut - 3), cut)) >= 0:
            cut = space
        return self._release(cut)

    def flush(self) -> str:
        """Whatever is held back (an unfinished character comes out as U+FFFD), and reset."""
        self._text += self._bytes.decode("utf-8", errors="replace")
        self._bytes = b""
        text = self._release(len(self._text))
        self._reset()
        return text

    def _release(self, cut: int) -> str:
        if cut <= 0:
            return ""
        released, self._text = self._text[:cut].encode("utf-8"), self._text[cut:]
        if self._vocab.clean_spaces:
            for pattern, replacement in _CLEANUPS:
                released = pattern.sub(replacement, released)
        return released.decode("utf-8")


def _complete_length(data: bytes) -> int:
    """len(data) less a trailing start of a UTF-8 character that more bytes could complete."""
    for back in range(1, min(3, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # the lead byte of the last character
            needed = 2 if byte >= 0xC0 else 1
            needed = 3 if byte >= 0xE0 else needed
            needed = 4 if byte >= 0xF0 else needed
            return len(data) - back if byte >= 0xC0 and needed > back else len(data)
    return len(data)
