"""The constraint a request puts on its answer (constrain/): JSON of a response_format, or a
forced tool call. The token table of a tokenizer is built once and kept with the tokenizer."""

from __future__ import annotations

from .request import RequestError
from .tool_calls import forced_grammar


def token_table(model):
    """The model's constrain.TokenTable (every token's bytes), built on first use."""
    from ..constrain import TokenTable

    tok = model.tok
    table = getattr(tok, "_wisp_token_table", None)
    if table is None:
        table = TokenTable.from_tokenizer(tok, model.engine.cfg.vocab_size)
        tok._wisp_token_table = table
    return table


def _constraint(model, grammar):
    from ..constrain import Constraint

    return Constraint(grammar, token_table(model), sorted(model.stop_ids))


def response_constraint(model, response_format: dict | None):
    """None for free text; else the Constraint that keeps the answer to the JSON asked for."""
    if response_format is None:
        return None
    from ..constrain import ConstraintError, compile_response_format

    try:
        grammar = compile_response_format(response_format)
    except ConstraintError as exc:
        raise RequestError(f"response_format: {exc}", "response_format") from None
    return None if grammar is None else _constraint(model, grammar)


def tool_constraint(model, fmt: str, tools: list[dict], choice):
    """tool_choice "required" (any declared function) or a function's name: the answer is a call."""
    from ..constrain import ConstraintError

    try:
        grammar = forced_grammar(fmt, tools, None if choice == "required" else choice)
    except ConstraintError as exc:
        raise RequestError(f"tools: {exc}", "tools") from None
    return _constraint(model, grammar)
