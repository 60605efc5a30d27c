"""UTF-8 as a byte automaton, shared by the JSON string grammar and the token table.

Byte-level tokens can end or start in the middle of a character, so a JSON string's grammar tracks
where it is inside the current character. The state is a small int: 0 between characters, else which
continuation bytes may come next (RFC 3629's table: no overlong forms, no surrogates, nothing past
U+10FFFF). `NEXT[state * 256 + byte]` is the state after `byte`, or -1 where `byte` is not allowed.
"""

# state -> (lowest, highest continuation byte allowed, state after it)
_CONTINUATION = {
    1: (0x80, 0xBF, 0),  # last byte of any character
    2: (0x80, 0xBF, 1),  # second of three (E1-EC, EE-EF)
    3: (0xA0, 0xBF, 1),  # second of three after E0 (no overlong)
    4: (0x80, 0x9F, 1),  # second of three after ED (no surrogates)
    5: (0x80, 0xBF, 2),  # second of four (F1-F3)
    6: (0x90, 0xBF, 2),  # second of four after F0 (no overlong)
    7: (0x80, 0x8F, 2),  # second of four after F4 (nothing past U+10FFFF)
}
STATES = 8


def _after_lead(byte: int) -> int:
    if byte < 0x80:
        return 0
    if 0xC2 <= byte <= 0xDF:
        return 1
    if byte == 0xE0:
        return 3
    if byte == 0xED:
        return 4
    if 0xE1 <= byte <= 0xEF:
        return 2
    if byte == 0xF0:
        return 6
    if 0xF1 <= byte <= 0xF3:
        return 5
    if byte == 0xF4:
        return 7
    return -1  # a continuation byte, C0, C1 or F5-FF cannot start a character


def _table() -> list[int]:
    table = [-1] * (STATES * 256)
    for byte in range(256):
        table[byte] = _after_lead(byte)
    for state, (low, high, after) in _CONTINUATION.items():
        for byte in range(low, high + 1):
            table[state * 256 + byte] = after
    return table


NEXT: list[int] = _table()


def run(data: bytes, state: int = 0) -> int:
    """The state after `data` from `state`, or -1 where `data` is not valid UTF-8 from there."""
    for byte in data:
        state = NEXT[state * 256 + byte]
        if state < 0:
            return -1
    return state


def characters(data: bytes) -> int:
    """How many characters `data` starts: its bytes that are not continuation bytes."""
    return sum(1 for byte in data if byte & 0xC0 != 0x80)
