"""llama.cpp's WordPiece (llm_tokenizer_wpm, GGUF `bert` vocabularies): text -> token ids.

The GGUF conversion marks word starts instead of continuations: "##ing" is stored as "ing" and
"play" as "▁play". Text is cut into words at white space, punctuation, ASCII symbols and CJK
ideographs (BERT's basic tokenizer, optionally lowercased and stripped of accents); each word,
with "▁" prepended, is covered greedily by the longest tokens, and becomes the unknown token
when that fails anywhere.
"""

import unicodedata

from ..regex.unicode_classes import WHITE_SPACE

_WHITE_SPACE = frozenset(chr(c) for start, end in WHITE_SPACE for c in range(start, end + 1))

# BERT's "Chinese characters" (llama.cpp keeps HF's 0x2B920 where 0x2B820 was meant).
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _stands_alone(char: str) -> bool:
    category = unicodedata.category(char)
    code = ord(char)
    return category[0] == "P" or (code < 0x7F and category[0] == "S") or any(a <= code <= b for a, b in _CJK)


def _base_char(char: str) -> str:
    """llama.cpp's "NFD": a character becomes the first character of its decomposition."""
    return unicodedata.normalize("NFD", char)[0]


def bert_words(text: str, lowercase: bool, strip_accents: bool) -> list[str]:
    words = [""]
    for char in text:
        if strip_accents:
            char = _base_char(char)
        if char in _WHITE_SPACE:
            if words[-1]:
                words.append("")
            continue
        category = unicodedata.category(char)
        if char in "\x00\ufffd" or (category[0] == "C" and category != "Cn"):
            continue  # control characters are dropped
        if strip_accents and category[0] == "M":
            continue
        spelled = char.lower()[0] if lowercase else char
        if _stands_alone(char):
            if words[-1]:
                words.append("")
            words[-1] = spelled
            words.append("")
        else:
            words[-1] += spelled
    return [word for word in words if word]


def wpm_tokenize(words: list[str], ids: dict[str, int], max_token_chars: int, unk_id: int | None) -> list[int]:
    out: list[int] = []
    for word in words:
        word = "\u2581" + word
        start_count = len(out)
        position = 0
        while position < len(word):
            for end in range(min(len(word), position + max_token_chars), position, -1):
                token = ids.get(word[position:end])
                if token is not None:
                    out.append(token)
                    position = end
                    break
            else:
                del out[start_count:]  # one uncovered character spoils the word
                break
        if len(out) == start_count and unk_id is not None:
            out.append(unk_id)
    return out
