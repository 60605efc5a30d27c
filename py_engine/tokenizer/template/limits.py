"""The budget one chat template rendering may spend (issue 16): a chat template is a program from
the model's files, and Jinja's sandbox stops it from reaching Python's internals but not from
running forever or filling memory (`{{ 'a' * 10**9 }}`, `range` in `range`, a macro calling itself
twice). Neither host can interrupt Python code (no signals or threads in Pyodide), so every
operation that can take more than constant time is charged before it runs, and a rendering that
goes over any limit stops with a ChatTemplateError:
- steps: loop iterations and calls (sandbox.py counts them);
- call depth: macros calling macros;
- value size: characters and items of any one value, nested containers counted each time they are
  referenced (a list holding itself twice, twenty deep, prints as a million items);
- work: characters and items that operations produce or walk through, summed over the rendering;
- output: the rendered text.
The limits grow with the size of the conversation, which templates copy into the prompt.
"""

from __future__ import annotations

import operator
import re

from jinja2.utils import Namespace

from ...errors import WispError

MAX_STEPS = 200_000  # plus 16 per item of the conversation (messages, their fields, tools...)
CALL_STEPS = 8  # a macro call costs as much as this many loop iterations
MAX_CALL_DEPTH = 32
MAX_VALUE = 1_000_000  # plus twice the conversation's size
MAX_WORK = 20_000_000  # plus 32 times the conversation's size
MAX_OUTPUT = 2_000_000  # plus 4 times the conversation's size
MAX_INT_BITS = 4096
MAX_FORMAT_WIDTH = 10_000
REPR_GROWTH = 12  # str() of a value is at most this many characters per unit of size

_BINOPS = {"+": operator.add, "*": operator.mul, "%": operator.mod, "**": operator.pow}
_SPEC_CHARACTERS = frozenset("#0- +*0123456789.")
_DIGITS = re.compile(r"\d+")
_CHARGED_LENGTH = (str, bytes, list, tuple, dict)
_SEQUENCES = (str, bytes, list, tuple)  # what `+` joins and `*` repeats


class ChatTemplateError(WispError):
    """A chat template failed: it does not compile, it raised, or it went over a limit."""


class Budget:
    def __init__(self, conversation_size: int = 0, conversation_items: int = 0):
        self.max_steps = MAX_STEPS + 16 * conversation_items
        self.max_value = MAX_VALUE + 2 * conversation_size
        self.max_work = MAX_WORK + 32 * conversation_size
        self.max_output = MAX_OUTPUT + 4 * conversation_size
        self.steps = self.work = self.depth = self.output = 0
        # id -> (value, size) for containers the template cannot change (the sandbox forbids
        # mutating lists and dicts); the value is kept so its id is not reused.
        self._sizes: dict[int, tuple[object, int]] = {}

    def _over(self, what: str, limit: int) -> ChatTemplateError:
        return ChatTemplateError(f"chat template went over its limit of {limit:,} {what}")

    # --- counters -------------------------------------------------------------------------

    def step(self, count: int = 1) -> None:
        self.steps += count
        if self.steps > self.max_steps:
            raise self._over("steps (loop iterations and calls)", self.max_steps)

    def spend(self, units: int) -> None:
        self.work += units
        if self.work > self.max_work:
            raise self._over("characters and items processed", self.max_work)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_CALL_DEPTH:
            self.depth -= 1
            raise self._over("nested calls", MAX_CALL_DEPTH)

    def leave(self) -> None:
        self.depth -= 1

    def emit(self, piece: str) -> str:
        self.output += len(piece)
        if self.output > self.max_output:
            raise self._over("characters of output", self.max_output)
        return piece

    # --- sizes ----------------------------------------------------------------------------

    def fits(self, size: int, what: str = "a value") -> None:
        if size > self.max_value:
            raise ChatTemplateError(f"chat template made {what} of {size:,} characters or items, over its limit")

    def size(self, value) -> int:
        """Characters and items in `value`, nested containers included."""
        return self._measure(value)[0]

    def _measure(self, value) -> tuple[int, bool]:
        """(size, whether it may be remembered): a namespace can change, and so can a container
        that holds one."""
        if isinstance(value, (str, bytes)):
            return len(value), True
        if isinstance(value, int):
            return 1 + value.bit_length() // 64, True
        if isinstance(value, range):
            try:
                return len(value), True
            except OverflowError:
                raise self._over("range items", self.max_value) from None
        if isinstance(value, (list, tuple)):
            children = value
        elif isinstance(value, dict):
            children = [*value.keys(), *value.values()]
        elif isinstance(value, Namespace):
            attributes = object.__getattribute__(value, "_Namespace__attrs")
            children = [*attributes.keys(), *attributes.values()]
        else:
            return 1, True  # numbers, None, Undefined, macros, loop objects, iterators
        known = self._sizes.get(id(value))
        if known is not None and known[0] is value:
            return known[1], True
        self.spend(1 + len(children))  # measuring is work too
        total, constant = 1, not isinstance(value, Namespace)
        for child in children:
            size, child_constant = self._measure(child)
            total += size
            constant = constant and child_constant
            self.fits(total)
        if constant:
            self._sizes[id(value)] = (value, total)
        return total, constant

    def produced(self, value):
        """`value`, made by the template: checked against the size limit, its length charged."""
        self.fits(len(value) if type(value) is str else self.size(value))
        if isinstance(value, _CHARGED_LENGTH):
            self.spend(len(value))
        return value

    def text(self, value) -> str:
        """str(value) as Jinja prints it, charged."""
        if type(value) is not str:
            self.fits(self.size(value))
            value = str(value)
        self.spend(len(value))
        return value

    # --- operators ------------------------------------------------------------------------

    def binop(self, symbol: str, left, right):
        if symbol == "*":
            self._check_repeat(left, right)
            self._check_repeat(right, left)
            if _is_int(left) and _is_int(right):
                self._check_bits(left.bit_length() + right.bit_length())
        elif symbol == "+" and isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
            self.fits(self.size(left) + self.size(right))
        elif symbol == "**" and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
            self._check_bits(left.bit_length() * right)
        elif symbol == "%" and isinstance(left, str):
            self.check_percent_format(left)
        return self.produced(_BINOPS[symbol](left, right))

    def _check_repeat(self, sequence, times) -> None:
        if isinstance(sequence, _SEQUENCES) and _is_int(times) and times > 0:
            self.fits(max(len(sequence), self.size(sequence)) * times)

    def _check_bits(self, bits: int) -> None:
        if bits > MAX_INT_BITS:
            raise ChatTemplateError(f"chat template made a number of about {bits:,} bits, over {MAX_INT_BITS}")

    def check_width(self, width) -> None:
        if _is_int(width) and width > self.max_value:
            raise ChatTemplateError(f"chat template asked for a width of {width:,} characters, over its limit")

    def check_percent_format(self, template: str) -> None:
        """printf-style formatting allocates each field's width before we see the result."""
        self.spend(len(template))
        position = template.find("%")
        while position >= 0:
            position += 1
            if template.startswith("(", position):  # %(name)s
                close = template.find(")", position)
                if close < 0:
                    return  # `%` itself rejects it
                position = close + 1
            end = position
            while end < len(template) and template[end] in _SPEC_CHARACTERS:
                end += 1
            spec = template[position:end]
            self._check_spec(spec, starred="*" in spec)
            position = template.find("%", end + 1)

    def check_format_spec(self, spec: str) -> None:
        """str.format's `{:>1000000}`: the same, for one field's format spec."""
        self._check_spec(spec, starred="{" in spec)

    def _check_spec(self, spec: str, starred: bool) -> None:
        if starred:
            raise ChatTemplateError("chat template uses a computed field width, which is not supported")
        for digits in _DIGITS.findall(spec):
            if len(digits) > 6 or int(digits) > MAX_FORMAT_WIDTH:
                raise ChatTemplateError(f"chat template formats a field {digits[:12]} characters wide, over its limit")


def _is_int(value) -> bool:
    return isinstance(value, int)


def conversation_size(value) -> tuple[int, int]:
    """(characters and items, items) of the arguments a template is rendered with (JSON-like)."""
    size, items, stack = 0, 0, [value]
    while stack:
        item = stack.pop()
        items += 1
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return size + items, items
