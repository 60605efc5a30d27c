"""The mask of a parser state: the tokens whose bytes the grammar accepts from there.

The walk follows the implicit trie of the sorted vocabulary (token_table.py) and feeds each byte of a
shared prefix to the parser once, so a range of tokens dies with its first refused byte (between
JSON tokens, the 54k whitespace-led tokens of Qwen's 152k die at their second or third byte: the
whitespace grammar is tight, json_containers.next_ws). Inside a JSON string a state takes a shortcut
through token classes (token_classes.py): the plain tokens' bitset plus the tokens whose rest after
the closing quote the parent accepts. Masks are cached by state
(LRU, shared by every request on the table): states repeat across tokens (a long string is one
state) and across requests with the same schema.
"""

from .json_strings import CONTENT, String
from .nodes import advance, advance_bytes
from .token_table import MASK_CACHE, TokenTable, children


def state_mask(table: TokenTable, state: tuple) -> bytes:
    """The allowed tokens after `state` (stop ids not included), as the mask's bytes."""
    cache = table.masks
    mask = cache.pop(state, None)
    if mask is None:
        mask = _compute(table, state)
        if len(cache) >= MASK_CACHE:
            del cache[next(iter(cache))]
    cache[state] = mask
    return mask


def _compute(table: TokenTable, state: tuple) -> bytes:
    if len(state) > 1:  # a token is allowed where some stack takes it: each stack's mask, cached alone
        bits = 0
        for stack in state:
            bits |= int.from_bytes(state_mask(table, (stack,)), "little")
        return bits.to_bytes(table.mask_bytes, "little")
    ids: list[int] = []
    inside = _inside_string(state)
    if inside is not None:
        bits = _string_tokens(table.classes, *inside, ids)
    else:
        bits = 0
        walk(table.sorted_pieces, table.sorted_ids, state, ids, table.marks)
    mask = bytearray(bits.to_bytes(table.mask_bytes, "little"))
    for token_id in ids:
        mask[token_id >> 3] |= 1 << (token_id & 7)
    return bytes(mask)


def _inside_string(state: tuple):
    """(string node, count, UTF-8 state, parent) where the only stack is between a string's escapes."""
    if state[0] is None:
        return None
    node, local, parent = state[0]
    if type(node) is not String or local[0] != CONTENT:
        return None
    return node, local[2], local[1], parent


def _string_tokens(classes, node: String, count: int, utf8_state: int, parent, ids: list) -> int:
    """Inside a string: returns the plain tokens' bitset, appends the others allowed to `ids`."""
    low, high = node.min_length, node.max_length
    room = None if high is None else high - count
    accepted: list[int] = []
    walk(classes.close_rests, classes.indexes, (parent,), accepted)
    groups = [classes.close_members[index] for index in accepted]
    for close, members in [(False, classes.inside)] + [(True, group) for group in groups]:
        for token_id, states, chars in members:
            if states >> utf8_state & 1 and (room is None or chars <= room) and (not close or count + chars >= low):
                ids.append(token_id)
    return classes.plain[utf8_state] if room is None else classes.plain_upto(utf8_state, room)


def walk(pieces: list, ids: list, state: tuple, out: list, marks=None) -> None:
    """Append ids[k] for each pieces[k] (sorted bytes) that `state` accepts whole. marks:
    `string_marks(pieces)`, for the string shortcut."""
    todo = [(0, len(pieces), 0, state)]
    while todo:
        lo, hi, depth, state = todo.pop()
        if marks is not None and _free_string(state):
            _free_string_range(pieces, ids, marks, lo, hi, depth, state, out)
            continue
        i = lo
        while i < hi and len(pieces[i]) == depth:
            out.append(ids[i])
            i += 1
        for byte, start, end in children(pieces, i, hi, depth):
            after = advance(state, byte)
            if after:
                todo.append((start, end, depth + 1, after))


def _free_string(state: tuple) -> bool:
    """Inside an unlimited string between characters: every plain ASCII byte leads back to `state`."""
    if len(state) != 1 or state[0] is None:
        return False
    node, local, _ = state[0]
    return type(node) is String and local[0] == CONTENT and not local[1] and not node.limited


def _free_string_range(pieces, ids, marks, lo, hi, depth, state, out) -> None:
    """The walk below a prefix that leaves an unlimited string open: each piece's bytes up to its
    first mark (a byte other than plain ASCII) keep the state, so only its tail from there is fed."""
    tails: dict[bytes, bool] = {}
    for k in range(lo, hi):
        piece = pieces[k]
        for at in marks[k]:  # noqa: B007 (the mark found is used below)
            if at >= depth:
                break
        else:
            out.append(ids[k])
            continue
        tail = piece[at:]
        accepted = tails.get(tail)
        if accepted is None:
            accepted = tails[tail] = bool(advance_bytes(state, tail))
        if accepted:
            out.append(ids[k])
