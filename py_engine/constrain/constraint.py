"""One request's constrained decoding: the mask before each token, and the parser moved by each token.

The decode loop calls mask() (apply it to the logits: a set bit allows the token), samples, then
advance(token). `complete` says a whole value has been produced: the stop ids are allowed from then
on. `finished` says nothing but a stop id can follow (the loop may stop there); a top-level number
is complete after its first digit but finished only when the model picks a stop id or the digits run
out. After a stop id, only stop ids are allowed.
"""

from .errors import ConstraintError
from .masks import state_mask
from .nodes import Node, accepting, advance_bytes, can_continue, start
from .token_table import TokenTable


class Constraint:
    def __init__(self, grammar: Node, table: TokenTable, eos_ids=()):
        """eos_ids: the stop ids allowed once the value is complete (ids outside the table are dropped)."""
        self.grammar, self.table = grammar, table
        self.eos_ids = frozenset(i for i in eos_ids if 0 <= i < table.vocab_size)
        self._eos_mask = table.bits(self.eos_ids).to_bytes(table.mask_bytes, "little")
        self._state = start(grammar)
        self._data = bytearray()
        self._stopped = False
        self._complete = False

    @property
    def complete(self) -> bool:
        """A whole value has been produced (stop ids are allowed)."""
        return self._stopped or self._complete

    @property
    def finished(self) -> bool:
        """Only a stop id may follow (or one has been taken)."""
        return self._stopped or (self._complete and not can_continue(self._state))

    @property
    def text(self) -> str:
        """The output so far (an unfinished character at the end shows as U+FFFD)."""
        return self._data.decode("utf-8", errors="replace")

    @property
    def data(self) -> bytes:
        return bytes(self._data)

    def mask(self) -> bytes:
        """ceil(vocab_size / 32) little-endian u32 words; bit i % 32 of word i // 32 set: token i allowed."""
        if self.finished:
            return self._eos_mask
        mask = state_mask(self.table, self._state)
        if not self._complete:
            return mask
        return (int.from_bytes(mask, "little") | int.from_bytes(self._eos_mask, "little")).to_bytes(
            self.table.mask_bytes, "little"
        )

    def allows(self, token_id: int) -> bool:
        if token_id in self.eos_ids:
            return self.complete
        if self._stopped or not 0 <= token_id < self.table.vocab_size:
            return False
        piece = self.table.pieces[token_id]
        if piece is None:
            return False
        cached = self.table.masks.get(self._state)
        if cached is not None:
            return bool(cached[token_id >> 3] >> (token_id & 7) & 1)
        return bool(advance_bytes(self._state, piece))

    def advance(self, token_id: int) -> None:
        """Take `token_id`; raises ConstraintError if the grammar does not allow it."""
        if not self.allows(token_id):
            piece = self.table.pieces[token_id] if 0 <= token_id < self.table.vocab_size else None
            raise ConstraintError(
                f"token {token_id} ({piece!r:.40}) is not allowed after {self.text[-60:]!r} "
                f"({'a stop id was taken' if self._stopped else 'the grammar refuses it'})"
            )
        if token_id in self.eos_ids:
            self._stopped = True
            return
        piece = self.table.pieces[token_id]
        self._state = advance_bytes(self._state, piece)
        self._data += piece
        self._complete = accepting(self._state)
