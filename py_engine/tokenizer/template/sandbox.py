"""The Jinja environment chat templates run in: the immutable sandbox, with every operation that can
take more than constant time charged to a limits.Budget before it runs.

Jinja's sandbox has hooks for operators (`call_binop`), calls (`call`, which macros, methods and
`loop()` go through) and printing (`finalize`); filters and tests are our wrappers around Jinja's.
What has no hook is rewritten in the parsed template: each `for` counts the items it draws, each
loop, macro and call block body charges the text it outputs, and list, tuple and dict displays,
`~` and comparisons go through the budget. Rendering then makes the same text as plain Jinja.
"""

from __future__ import annotations

import operator
import string
import types
import warnings

import jinja2
from jinja2 import nodes, pass_context
from jinja2.runtime import LoopContext, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range
from jinja2.visitor import NodeTransformer

from .filters import LIMITED_FILTERS, LIMITED_TESTS, replaced_length
from .limits import CALL_STEPS, Budget, ChatTemplateError

MAX_SOURCE_CHARS = 128_000  # real templates are under 20,000; this one compiles in about a second
_COMPARE = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "lteq": operator.le,
    "gt": operator.gt,
    "gteq": operator.ge,
    "in": lambda item, container: item in container,
    "notin": lambda item, container: item not in container,
}


# The functions the rewritten template calls, as filters under names no template can write (so
# they compile to direct calls). pass_context keeps Jinja from running them at compile time.


@pass_context
def _iterate(context, iterable):
    return _Counted(iterable, context.environment.budget)


@pass_context
def _spend(context, text_chars):
    budget = context.environment.budget
    budget.step()
    budget.spend(text_chars)
    return ""


@pass_context
def _literal(context, value):
    return context.environment.budget.produced(value)


@pass_context
def _concat(context, *parts):
    budget = context.environment.budget
    return budget.produced("".join([budget.text(part) for part in parts]))


@pass_context
def _compare(context, first, operators, *operands):
    budget, left = context.environment.budget, first
    for name, right in zip(operators, operands, strict=True):
        # What the comparison may walk through, charged before it runs. The operands of a chain
        # (a < b < c) are all evaluated first, unlike Python's; templates do not chain side effects.
        left_size = len(left) if type(left) is str else budget.size(left)
        right_size = len(right) if type(right) is str else budget.size(right)
        if name in ("in", "notin"):  # hashing the item, or comparing it with each element
            budget.spend(left_size + right_size)
        else:
            budget.spend(min(left_size, right_size))
        if not _COMPARE[name](left, right):
            return False
        left = right
    return True


_HOOKS = {"wisp:" + f.__name__[1:]: f for f in (_iterate, _spend, _literal, _concat, _compare)}


class _Counted:
    """An iterable whose items each cost a step; keeps len() for `loop.length`."""

    def __init__(self, iterable, budget: Budget):
        self._iterable, self._budget = iterable, budget

    def __iter__(self):
        for item in self._iterable:
            self._budget.step()
            yield item

    def __len__(self):
        return len(self._iterable)


class _Instrument(NodeTransformer):
    """Rewrites a parsed template so the operations with no sandbox hook reach the budget."""

    def _hook(self, name: str, value, args: list, lineno) -> nodes.Filter:
        return nodes.Filter(value, "wisp:" + name, args, [], None, None).set_lineno(lineno)

    def _charge_body(self, node):
        charge = nodes.ExprStmt(self._hook("spend", nodes.Const(_own_text(node.body)), [], node.lineno))
        node.body.insert(0, charge.set_lineno(node.lineno))
        return node

    def visit_For(self, node):
        node = self.generic_visit(node)
        node.iter = self._hook("iterate", node.iter, [], node.lineno)
        return self._charge_body(node)

    def visit_Macro(self, node):
        return self._charge_body(self.generic_visit(node))

    visit_CallBlock = visit_Block = visit_Macro

    def visit_List(self, node):
        return self._hook("literal", self.generic_visit(node), [], node.lineno)

    visit_Dict = visit_List

    def visit_Tuple(self, node):
        node = self.generic_visit(node)
        return self._hook("literal", node, [], node.lineno) if node.ctx == "load" else node

    def visit_Concat(self, node):
        first, *rest = self.generic_visit(node).nodes
        return self._hook("concat", first, rest, node.lineno)

    def visit_Compare(self, node):
        node = self.generic_visit(node)
        names = nodes.Const(tuple(operand.op for operand in node.ops))
        return self._hook("compare", node.expr, [names, *(operand.expr for operand in node.ops)], node.lineno)


def _own_text(body: list) -> int:
    """Characters of template text `body` outputs itself (nested loops and macros charge theirs)."""
    total, stack = 0, list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, nodes.TemplateData):
            total += len(node.data)
        elif not isinstance(node, (nodes.For, nodes.Macro, nodes.CallBlock, nodes.Block)):
            stack.extend(node.iter_child_nodes())
    return total


class LimitedEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(("+", "*", "%", "**"))

    def __init__(self, **options):
        super().__init__(**options)
        self.budget = Budget()  # each rendering gets a fresh one; this one serves compile-time folding
        self.filters = {**LIMITED_FILTERS, **_HOOKS}
        self.tests = dict(LIMITED_TESTS)
        self.finalize = self._print
        self.globals["range"] = self._range
        del self.globals["lipsum"]  # lorem ipsum of any length; no chat template wants it

    def compile_source(self, source) -> jinja2.Template:
        """Parse, instrument and compile a template."""
        if not isinstance(source, str):
            raise ChatTemplateError(f"chat template must be text, got {type(source).__name__}")
        if len(source) > MAX_SOURCE_CHARS:
            raise ChatTemplateError(f"chat template of {len(source):,} characters is over {MAX_SOURCE_CHARS:,}")
        with warnings.catch_warnings():  # e.g. an invalid escape in one of its strings: not the user's
            warnings.simplefilter("ignore")
            tree = _Instrument().visit(self.parse(source))
            tree.set_environment(self)
            return self.from_string(tree)

    def render_limited(self, template: jinja2.Template, variables: dict, conversation: tuple[int, int]) -> str:
        """Render with a fresh budget; `conversation`: the size and item count of the variables."""
        self.budget = budget = Budget(*conversation)
        return "".join([budget.emit(piece) for piece in template.generate(**variables)])

    # --- sandbox hooks ----------------------------------------------------------------------

    def _print(self, value):
        return self.budget.text(value)

    def _range(self, *args):
        self.budget.step()
        return safe_range(*args)  # at most 100,000 items; drawing them costs steps

    def getitem(self, obj, argument):
        if type(argument) is tuple:  # hashed each time it is looked up
            self.budget.spend(self.budget.size(argument))
        return super().getitem(obj, argument)

    def call_binop(self, context, operator_symbol, left, right):
        return self.budget.binop(operator_symbol, left, right)

    def call(self, context, function, /, *args, **kwargs):
        budget = self.budget
        if isinstance(function, Macro):  # its arguments are passed along, not walked through
            budget.step(CALL_STEPS)
        else:  # a method may compare, hash or copy its arguments: loop.changed(x), d.get(key)
            budget.step(CALL_STEPS if isinstance(function, LoopContext) else 1)
            budget.spend(sum(map(budget.size, args)) + sum(map(budget.size, kwargs.values())))
        args = self._check_call(function, args, kwargs)
        budget.enter()
        try:
            result = super().call(context, function, *args, **kwargs)
        finally:
            budget.leave()
        return budget.produced(result)

    def _check_call(self, function, args: tuple, kwargs: dict) -> tuple:
        """Charge a method call on a string or container for the work it does, and refuse the
        string methods whose result can be far larger than their arguments."""
        budget = self.budget
        wrapped = getattr(function, "__wrapped__", None)  # the sandbox's str.format
        if isinstance(getattr(wrapped, "__self__", None), str):
            budget.spend(len(wrapped.__self__))
            for _text, _field, spec, _conversion in string.Formatter().parse(wrapped.__self__):
                budget.check_format_spec(spec or "")
            return args
        owner = getattr(function, "__self__", None)
        if not isinstance(function, types.BuiltinMethodType) or owner is None:
            return args
        if not isinstance(owner, str):
            if isinstance(owner, (list, tuple, dict)):
                budget.spend(budget.size(owner))
            return args
        budget.spend(len(owner))
        name = function.__name__
        first = args[0] if args else None
        if name in ("ljust", "rjust", "center", "zfill"):
            budget.check_width(first if args else kwargs.get("width"))
        elif name == "expandtabs":
            tab_size = first if args else kwargs.get("tabsize", 8)
            if isinstance(tab_size, int):
                budget.fits(len(owner) + owner.count("\t") * max(tab_size, 0))
        elif name == "replace" and len(args) >= 2:
            count = args[2] if len(args) > 2 else kwargs.get("count", -1)
            budget.fits(replaced_length(owner, args[0], args[1], count))
        elif name == "join" and args:
            items = list(args[0])
            budget.spend(len(items))
            budget.fits(sum(len(i) for i in items if isinstance(i, str)) + len(owner) * max(len(items) - 1, 0))
            return (items, *args[1:])
        elif name == "translate" and isinstance(first, dict):
            longest = max((len(v) for v in first.values() if isinstance(v, str)), default=1)
            budget.fits(len(owner) * max(longest, 1))
        return args
