"""GPT-2's byte <-> printable character mapping, used by byte-level BPE vocabularies.

Byte-level BPE works on UTF-8 bytes, but its vocabulary is stored as text, so each byte is
shown as a printable character: printable Latin-1 bytes stand for themselves and the others
(space, control bytes, ...) are moved to U+0100 and up, e.g. space -> 'Ġ', newline -> 'Ċ'.
"""


def _byte_to_char_table() -> list[str]:
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = [""] * 256
    next_free = 256
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(next_free)
            next_free += 1
    return table


BYTE_TO_CHAR: list[str] = _byte_to_char_table()
CHAR_TO_BYTE: dict[str, int] = {char: byte for byte, char in enumerate(BYTE_TO_CHAR)}

# str.translate tables: Latin-1 decoding turns each byte into the code point of the same value.
_ENCODE_TABLE = {byte: char for byte, char in enumerate(BYTE_TO_CHAR)}
_DECODE_TABLE = {ord(char): byte for char, byte in CHAR_TO_BYTE.items()}


def text_to_byte_chars(text: str) -> str:
    """'héllo' -> 'hÃ©llo': the UTF-8 bytes of `text`, one mapped character each."""
    return text.encode("utf-8").decode("latin-1").translate(_ENCODE_TABLE)


def token_bytes(token: str) -> bytes:
    """The bytes a byte-level token stands for.

    Like HF, a token with a character outside the mapping (an added token such as
    "<|im_start|>\\n") stands for its own UTF-8 text."""
    if all(char in CHAR_TO_BYTE for char in token):
        return token.translate(_DECODE_TABLE).encode("latin-1")
    return token.encode("utf-8")
