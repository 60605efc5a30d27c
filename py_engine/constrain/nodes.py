"""The grammar machine: nodes that consume bytes, and parser states made of stacks of them.

A grammar is a graph of immutable nodes. A parser state is a tuple of alternative stacks; a stack is
a linked list `(node, local, parent)` where `local` is the node's own small, hashable progress (a
position, a count, a phase) and `parent` the stack to resume when the node is done (None: the whole
grammar is done). Everything is hashable, so a state can key a cache of token masks, and immutable,
so the mask walk can try a byte on a state without copying it.

A node's `feed(local, byte, parent, out)` appends the stacks that follow from consuming `byte`:
its own frame with a new local, its parent (done), or a child's frame pushed on top of its own
continuation (a child never matches the empty string, so the byte always goes to the child). A node
that may end but also go on (a number, an enum value that prefixes another) hands the byte to its
parent as well: that is the only place where alternatives appear besides anyOf. Nodes also know the
bytes that can start them (`first`, to prune unions) and whether they match nothing at all (`empty`,
worked out at build time, so that the parser never enters a branch it cannot finish).
"""

from .errors import ConstraintError

BYTE = [bytes((value,)) for value in range(256)]


class Node:
    init = 0
    first: frozenset = frozenset()
    empty = False

    def feed(self, local, byte: int, parent, out: list) -> None:
        raise NotImplementedError

    def final(self, local) -> bool:
        """Whether the node may end here (without consuming more)."""
        return False

    def more(self, local) -> bool:
        """Whether the node may consume another byte here."""
        return True


def start(grammar: Node) -> tuple:
    """The parser state before any byte."""
    if grammar.empty:
        raise ConstraintError("the grammar matches nothing")
    return ((grammar, grammar.init, None),)


def advance(state: tuple, byte: int) -> tuple:
    """The state after `byte`; empty where no stack can take it."""
    out: list = []
    for stack in state:
        if stack is not None:
            stack[0].feed(stack[1], byte, stack[2], out)
    if len(out) > 1:
        out = list(dict.fromkeys(out))
    return tuple(out)


def advance_bytes(state: tuple, data: bytes) -> tuple:
    for byte in data:
        state = advance(state, byte)
        if not state:
            break
    return state


def feed_parent(parent, byte: int, out: list) -> None:
    """A node that may end here lets its parent try the byte."""
    if parent is not None:
        parent[0].feed(parent[1], byte, parent[2], out)


def accepting(state: tuple) -> bool:
    """Whether some stack may end here: the grammar has matched a whole value."""
    return any(_stack_may_end(stack) for stack in state)


def can_continue(state: tuple) -> bool:
    """Whether some stack may take another byte."""
    return any(_stack_may_continue(stack) for stack in state)


def _stack_may_end(stack) -> bool:
    while stack is not None:
        node, local, stack = stack
        if not node.final(local):
            return False
    return True


def _stack_may_continue(stack) -> bool:
    while stack is not None:
        node, local, stack = stack
        if node.more(local):
            return True
        if not node.final(local):
            return False
    return False


class Never(Node):
    """Matches nothing: a recursion cut off at its depth limit, or `false` as a schema."""

    empty = True

    def feed(self, local, byte, parent, out):
        pass


NEVER = Never()


class Literal(Node):
    """Exactly these bytes (str is encoded as UTF-8)."""

    def __init__(self, text: str | bytes):
        self.data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        if not self.data:
            raise ConstraintError("a Literal must not be empty")
        self.first = frozenset(self.data[:1])

    def feed(self, pos, byte, parent, out):
        if byte == self.data[pos]:
            out.append(parent if pos + 1 == len(self.data) else (self, pos + 1, parent))

    def __repr__(self):
        return f"Literal({self.data!r})"


class LiteralSet(Node):
    """One of several byte strings (enum and const values, true/false/null). local: the bytes so far."""

    init = b""

    def __init__(self, options):
        options = {o.encode("utf-8") if isinstance(o, str) else bytes(o) for o in options}
        if b"" in options:
            raise ConstraintError("an empty literal")
        self.empty = not options
        self.first = frozenset(o[0] for o in options)
        # prefix -> (is a whole option, some option is longer)
        self._prefixes: dict[bytes, tuple[bool, bool]] = {}
        for option in options:
            for end in range(1, len(option) + 1):
                whole, longer = self._prefixes.get(option[:end], (False, False))
                self._prefixes[option[:end]] = (whole or end == len(option), longer or end < len(option))

    def feed(self, local, byte, parent, out):
        if local and self._prefixes[local][0]:
            feed_parent(parent, byte, out)
        prefix = local + BYTE[byte]
        found = self._prefixes.get(prefix)
        if found is not None:
            out.append(parent if not found[1] else (self, prefix, parent))

    def final(self, local):
        return bool(local) and self._prefixes[local][0]

    def more(self, local):
        return not local or self._prefixes[local][1]


class Union(Node):
    """Any one of the branches (anyOf, a list of types). Never on a stack: it becomes its branch."""

    def __init__(self, branches):
        self.branches = [branch for branch in branches if not branch.empty]
        self.empty = not self.branches
        self.first = frozenset().union(*(branch.first for branch in self.branches))

    def feed(self, local, byte, parent, out):
        for branch in self.branches:
            if byte in branch.first:
                branch.feed(branch.init, byte, parent, out)


class Sequence(Node):
    """The parts one after another (e.g. a tool call's tags around its JSON). local: the next part."""

    def __init__(self, parts):
        self.parts = [Literal(part) if isinstance(part, str | bytes) else part for part in parts]
        if not self.parts:
            raise ConstraintError("a Sequence needs at least one part")
        self.empty = any(part.empty for part in self.parts)
        self.first = self.parts[0].first

    def feed(self, index, byte, parent, out):
        part = self.parts[index]
        if index + 1 < len(self.parts):
            parent = (self, index + 1, parent)
        part.feed(part.init, byte, parent, out)
