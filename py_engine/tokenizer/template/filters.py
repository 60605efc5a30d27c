"""Jinja's filters and tests for chat templates, each charged to the rendering's budget
(limits.py): a step per use, the size of what it walks through, and the size of what it
makes; the filters whose result can be far larger than their input check their arguments first.
"""

from __future__ import annotations

from jinja2 import pass_context
from jinja2.filters import FILTERS
from jinja2.tests import TESTS

from .limits import REPR_GROWTH, ChatTemplateError

MAX_TEXT_FILTER_CHARS = 4096  # striptags, urlize, wordcount, wordwrap: their regexes can be quadratic
MAX_JSON_INDENT = 16

# Filters that take constant time whatever the size of their input.
_CONSTANT_TIME_FILTERS = frozenset(
    "abs attr count d default filesizeformat first float int items last length random round safe".split()
)
_COMPARING_TESTS = frozenset("!= < <= == > >= eq equalto ge greaterthan gt in le lessthan lt ne sameas".split())
# What a filter or test marked pass_context / pass_eval_context / pass_environment receives first.
_PASSED = {
    "context": lambda context: context,
    "eval_context": lambda context: context.eval_ctx,
    "environment": lambda context: context.environment,
}


def _passed_argument(function):
    return _PASSED.get(getattr(getattr(function, "jinja_pass_arg", None), "name", None))


def limited_filter(name: str, function):
    """`function` as filter `name`, charged to the budget of the rendering that calls it."""
    check = _FILTER_CHECKS.get(name)
    charges_input = name not in _CONSTANT_TIME_FILTERS
    passed = _passed_argument(function)

    @pass_context  # to find the budget; also keeps Jinja from running it at compile time
    def limited(context, *args, **kwargs):
        budget = context.environment.budget
        budget.step()
        if charges_input and args:
            budget.spend(budget.size(args[0]))
        if check is not None:
            args = check(budget, list(args), kwargs)
        if passed is not None:
            args = (passed(context), *args)
        return budget.produced(function(*args, **kwargs))

    limited.__name__ = limited.__qualname__ = f"limited_{name}"
    return limited


def limited_test(name: str, function):
    compares = name in _COMPARING_TESTS
    passed = _passed_argument(function)

    @pass_context
    def limited(context, *args, **kwargs):
        budget = context.environment.budget
        budget.step()
        if compares:
            budget.spend(sum(budget.size(arg) for arg in args))
        if passed is not None:
            args = (passed(context), *args)
        return function(*args, **kwargs)

    limited.__name__ = limited.__qualname__ = f"limited_{name}"
    return limited


def replaced_length(text: str, old, new, count) -> int:
    if not isinstance(old, str) or not isinstance(new, str):
        return len(text)
    found = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * max(len(new) - len(old), 0)


def _argument(args: list, kwargs: dict, index: int, name: str, default=None):
    return args[index] if len(args) > index else kwargs.get(name, default)


def _check_center(budget, args, kwargs):
    budget.check_width(_argument(args, kwargs, 1, "width", 80))
    return args


def _check_indent(budget, args, kwargs):
    text, width = str(args[0]), _argument(args, kwargs, 1, "width", 4)
    step = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    budget.fits(len(text) + (text.count("\n") + 2) * max(step, 0))
    return args


def _check_format(budget, args, kwargs):
    if isinstance(args[0], str):
        budget.check_percent_format(args[0])
    return args


def _check_replace(budget, args, kwargs):
    old, new = _argument(args, kwargs, 1, "old"), _argument(args, kwargs, 2, "new")
    count = _argument(args, kwargs, 3, "count", -1)
    budget.fits(replaced_length(str(args[0]), old, new, -1 if count is None else count))
    return args


def _check_join(budget, args, kwargs):
    items = list(args[0])
    separator = _argument(args, kwargs, 1, "d", "")
    budget.spend(len(items))
    parts = sum(len(i) if isinstance(i, str) else REPR_GROWTH * budget.size(i) for i in items)
    budget.fits(parts + len(str(separator)) * max(len(items) - 1, 0))
    args[0] = items
    return args


def _check_batch(budget, args, kwargs):
    count = _argument(args, kwargs, 1, "linecount")
    if _argument(args, kwargs, 2, "fill_with") is not None:
        budget.check_width(count)
    return args


def _check_slice(budget, args, kwargs):
    slices = _argument(args, kwargs, 1, "slices")
    if isinstance(slices, int):
        budget.step(max(slices, 0))  # it loops once per slice
    return args


def _check_sum(budget, args, kwargs):
    start = _argument(args, kwargs, 2, "start", 0)
    if not isinstance(start, (int, float)):
        raise ChatTemplateError("chat template sums non-numbers (|sum with a start value), which is not supported")
    return args


def _check_text_filter(budget, args, kwargs):
    text = args[0]
    if len(str(text)) > MAX_TEXT_FILTER_CHARS:
        raise ChatTemplateError(f"chat template applies a text filter to over {MAX_TEXT_FILTER_CHARS} characters")
    if len(args) > 3 or "wrapstring" in kwargs:  # wordwrap's wrapstring, once per line
        budget.fits(len(str(text)) * (1 + len(str(_argument(args, kwargs, 3, "wrapstring", "")))))
    return args


def _check_tojson(budget, args, kwargs):
    indent = _argument(args, kwargs, 2, "indent")
    if isinstance(indent, str):
        indent = len(indent)
    if isinstance(indent, int) and indent > MAX_JSON_INDENT:
        raise ChatTemplateError(f"chat template indents JSON by {indent:,}, over {MAX_JSON_INDENT}")
    return args


_FILTER_CHECKS = {
    "batch": _check_batch,
    "center": _check_center,
    "format": _check_format,
    "indent": _check_indent,
    "join": _check_join,
    "replace": _check_replace,
    "slice": _check_slice,
    "striptags": _check_text_filter,
    "sum": _check_sum,
    "tojson": _check_tojson,
    "urlize": _check_text_filter,
    "wordcount": _check_text_filter,
    "wordwrap": _check_text_filter,
}


LIMITED_FILTERS = {name: limited_filter(name, function) for name, function in FILTERS.items()}
LIMITED_TESTS = {name: limited_test(name, function) for name, function in TESTS.items()}
