"""Structured output by constrained decoding: JSON (json_object, or a JSON Schema) and literal text.

Pure Python (it runs in Pyodide), on bytes, for any tokenizer of py_engine.tokenizer:

    table = TokenTable.from_tokenizer(tokenizer, vocab_size)   # once per tokenizer (cached)
    grammar = compile_response_format(response_format)        # None for {"type": "text"}
    constraint = Constraint(grammar, table, eos_ids)            # one per request
    mask = constraint.mask(); ...; constraint.advance(token_id) # per token

Design (each module's docstring says more): a grammar is a graph of immutable byte-level nodes
(nodes.py; JSON in json_strings / json_numbers / json_containers; schema.py compiles JSON Schema);
a parser state is a hashable tuple of stacks; masks.py walks the sorted vocabulary as an implicit trie
with the state, with a shortcut inside strings, and caches masks by state (token_table.py).
"""

from .constraint import Constraint
from .errors import ConstraintError
from .nodes import Literal, Node, Sequence, Union
from .schema import compile_response_format, json_object_grammar, json_schema_grammar
from .token_table import TokenTable

__all__ = [
    "Constraint",
    "ConstraintError",
    "Literal",
    "Node",
    "Sequence",
    "TokenTable",
    "Union",
    "compile_response_format",
    "json_object_grammar",
    "json_schema_grammar",
]
