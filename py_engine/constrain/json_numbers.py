"""The JSON number, with bounded digit counts and optional minimum / maximum.

Digits are bounded (15 before the point, 15 after, 2 in an exponent) so that a model cannot run a
number on forever and every value survives a round trip through a double. With bounds, the exponent
is left out and each byte is allowed only if some completion of the number so far still lies within
the bounds: the completions of a prefix are a few intervals on the grid of 10**-15 (of 1 for an
integer), which Fractions check exactly. A number may end only where its value is within the bounds.

local = (phase, digits in the current part, the text so far where bounds need it, else b"").
"""

from fractions import Fraction
from math import ceil, floor

from .nodes import BYTE, Node, feed_parent

START, MINUS, ZERO, INT, DOT, FRAC, EXP_MARK, EXP_SIGN, EXP = range(9)
INT_DIGITS, FRAC_DIGITS, EXP_DIGITS = 15, 15, 2
_ENDS = frozenset((ZERO, INT, FRAC, EXP))
_DIGITS = frozenset(b"0123456789")


class Number(Node):
    init = (START, 0, b"")
    first = frozenset(b"-0123456789")

    def __init__(self, integer: bool = False, low=None, low_exclusive=False, high=None, high_exclusive=False):
        """low / high: bounds (None: none), each inclusive unless its *_exclusive is set."""
        self.integer = integer
        self.low = None if low is None else Fraction(low)
        self.high = None if high is None else Fraction(high)
        self.low_exclusive, self.high_exclusive = low_exclusive, high_exclusive
        self.bounded = low is not None or high is not None
        self._step = Fraction(1) if integer else Fraction(1, 10**FRAC_DIGITS)
        self._viable: dict[bytes, bool] = {}
        self.empty = self.bounded and not self.viable(b"")

    def feed(self, local, byte, parent, out):
        phase, digits, text = local
        if phase in _ENDS and self.final(local):
            feed_parent(parent, byte, out)
        new = self._next(phase, digits, byte)
        if new is None:
            return
        if self.bounded:
            text += BYTE[byte]
            if not self.viable(text):
                return
        out.append((self, (*new, text), parent))

    def _next(self, phase, digits, byte):
        digit = byte in _DIGITS
        if phase == START or phase == MINUS:
            if byte == 0x2D and phase == START:
                return MINUS, 0
            return (ZERO, 1) if byte == 0x30 else (INT, 1) if digit else None
        if phase == INT and digit and digits < INT_DIGITS:
            return INT, digits + 1
        if phase == FRAC and digit and digits < FRAC_DIGITS:
            return FRAC, digits + 1
        if phase in (ZERO, INT) and byte == 0x2E and not self.integer:
            return DOT, 0
        if phase == DOT and digit:
            return FRAC, 1
        if phase in (ZERO, INT, FRAC) and byte in b"eE" and not self.integer and not self.bounded:
            return EXP_MARK, 0
        if phase == EXP_MARK and byte in b"+-":
            return EXP_SIGN, 0
        if phase in (EXP_MARK, EXP_SIGN, EXP) and digit and digits < EXP_DIGITS:
            return EXP, digits + 1
        return None

    def final(self, local):
        phase, _, text = local
        return phase in _ENDS and (not self.bounded or self._within(Fraction(text.decode())))

    def more(self, local):
        phase, digits, text = local
        return any(
            self._next(phase, digits, byte) is not None and (not self.bounded or self.viable(text + BYTE[byte]))
            for byte in b"-.0123456789eE+"
        )

    def _within(self, value: Fraction) -> bool:
        if self.low is not None and (value < self.low or (self.low_exclusive and value == self.low)):
            return False
        return self.high is None or not (value > self.high or (self.high_exclusive and value == self.high))

    def viable(self, text: bytes) -> bool:
        """Whether some number starting with `text` lies within the bounds."""
        found = self._viable.get(text)
        if found is None:
            if len(self._viable) > 4096:  # a long-lived server sees many numbers: keep the cache small
                self._viable.clear()
            found = self._viable[text] = any(self._hits(low, high) for low, high in self._completions(text))
        return found

    def _completions(self, text: bytes):
        """Intervals (low, high) on the grid that hold every completion of `text`."""
        negative = text.startswith(b"-")
        whole, _, fraction = text.lstrip(b"-").partition(b".")
        top = Fraction(0) if self.integer else Fraction(1, 10**FRAC_DIGITS)  # the grid's last step below an end
        if b"." in text:
            base = Fraction(f"{whole.decode()}.{fraction.decode() or 0}")
            span = Fraction(1, 10 ** len(fraction)) if len(fraction) < FRAC_DIGITS else top
            magnitudes = [(base, base + span - top)]
        elif whole == b"0":
            magnitudes = [(Fraction(0), 1 - top if not self.integer else Fraction(0))]
        elif not whole:
            magnitudes = [(Fraction(0), 10**INT_DIGITS - (top or 1))]
        else:
            value = int(whole)
            magnitudes = [
                (Fraction(value * 10**k), (value + 1) * 10**k - (top or 1)) for k in range(INT_DIGITS - len(whole) + 1)
            ]
        negated = [(-high, -low) for low, high in magnitudes]
        return negated if negative else magnitudes + negated if not text else magnitudes

    def _hits(self, low: Fraction, high: Fraction) -> bool:
        """Whether a grid point within [low, high] lies within the bounds."""
        if self.low is not None:
            low = max(low, self.low)
        if self.high is not None:
            high = min(high, self.high)
        first = ceil(low / self._step) * self._step
        if self.low_exclusive and first == self.low:
            first += self._step
        last = floor(high / self._step) * self._step
        if self.high_exclusive and last == self.high:
            last -= self._step
        return first <= last
