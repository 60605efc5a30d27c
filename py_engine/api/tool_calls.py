"""Tool calls for any model whose chat template knows tools: the tools go into the prompt through
the model's own template, and the answer's calls come back out in the format that template taught
the model. The format is read from the template's text:

- hermes: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`, one block per call
  (Qwen2.5/Qwen3, Hermes, SmolLM3 and most templates that speak of tool calls);
- llama3: the whole answer is one JSON object `{"name": ..., "parameters": {...}}` (Llama 3.1+,
  optionally after <|python_tag|>);
- mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`.

ToolCallStream separates streamed text from calls: text is released until a call may be starting
(its marker, or an answer that opens with "{"), the rest is held and parsed at the end; what does
not parse as calls is released as text after all. Small models often drop the markers and answer
with the call's bare JSON: an answer that is one JSON object naming a declared function is taken
as that call, in every format. forced_grammar builds the constraint for
tool_choice "required" or a named function: the answer is then a call of a declared function whose
arguments match its parameters' schema."""

from __future__ import annotations

import json
import re

from .request import RequestError

MARKERS = {"hermes": "<tool_call>", "mistral": "[TOOL_CALLS]", "llama3": "{"}
_HERMES_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


def template_format(template: str | None) -> str | None:
    """The tool-call format a chat template teaches, or None: the template takes no tools."""
    if not template or not re.search(r"\btools\b", template):
        return None
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<tool_call>" in template:
        return "hermes"
    if "<|python_tag|>" in template or ("parameters" in template and "<|eot_id|>" in template):
        return "llama3"
    return "hermes"  # the most common format; a template that names none gets what most models know


def require_format(tok) -> str:
    fmt = template_format(getattr(tok, "chat_template", None))
    if fmt is None:
        raise RequestError("this model's chat template does not take tools", "tools")
    return fmt


def parse_calls(fmt: str, text: str) -> tuple[str, list[dict]]:
    """(the text that is not a call, the calls as {name, arguments: JSON text}); calls that do not
    parse stay in the text."""
    if fmt == "hermes":
        calls, kept, at = [], [], 0
        for match in _HERMES_BLOCK.finditer(text):
            call = _call(match.group(1), "arguments")
            if call is not None:
                kept.append(text[at : match.start()])
                calls.append(call)
                at = match.end()
        kept.append(text[at:])
        return ("".join(kept).strip() if calls else text), calls
    if fmt == "mistral":
        head, marker, rest = text.partition("[TOOL_CALLS]")
        items = _json(rest) if marker else None
        items = [items] if isinstance(items, dict) else items
        calls = [c for c in (_call(json.dumps(i), "arguments") for i in items or []) if c]
        return (head.strip(), calls) if calls and len(calls) == len(items) else (text, [])
    body = text.strip().removeprefix("<|python_tag|>")
    call = _call(body, "parameters") or _call(body, "arguments")
    return ("", [call]) if call else (text, [])


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def _call(text: str, arguments_key: str) -> dict | None:
    value = _json(text)
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get(arguments_key, {})
    if not isinstance(arguments, dict):
        return None
    return {"name": value["name"], "arguments": json.dumps(arguments, ensure_ascii=False)}


class ToolCallStream:
    """The answer's text as it streams, calls held back (see the module's docstring). names: the
    declared functions (a bare JSON call must name one)."""

    def __init__(self, fmt: str, names=()):
        self.fmt, self.marker, self.names = fmt, MARKERS[fmt], set(names)
        self.pending, self.holding, self.started = "", False, False

    def push(self, text: str) -> str:
        if self.holding:
            self.pending += text
            return ""
        text = self.pending + text
        if not self.started:  # a bare call is the whole answer: decided by its first visible character
            if not text.strip():
                self.pending = text
                return ""
            self.started, self.pending = True, ""
            if text.lstrip().startswith(("{", "<|python_tag|>")):
                self.holding, self.pending = True, text
                return ""
        if self.fmt == "llama3":
            return text
        at = text.find(self.marker)
        if at >= 0:
            self.holding, self.pending = True, text[at:]
            return text[:at]
        keep = next((n for n in range(len(self.marker) - 1, 0, -1) if text.endswith(self.marker[:n])), 0)
        self.pending = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def finish(self) -> tuple[str, list[dict]]:
        """(text still to send, the calls)."""
        text, self.pending = self.pending, ""
        if not self.holding:
            return text, []
        kept, calls = parse_calls(self.fmt, text)
        if calls:
            return kept, calls
        body = text.strip().removeprefix("<|python_tag|>")
        bare = _call(body, "arguments") or _call(body, "parameters")
        return ("", [bare]) if bare and bare["name"] in self.names else (text, [])


def call_schema(tools: list[dict], name: str | None, arguments_key: str) -> dict:
    """A JSON schema of one call: of the function `name`, or of any declared function."""
    chosen = [t["function"] for t in tools if name is None or t["function"]["name"] == name]
    branches = [
        {
            "type": "object",
            "properties": {
                "name": {"const": f["name"]},
                arguments_key: f.get("parameters") or {"type": "object", "properties": {}},
            },
            "required": ["name", arguments_key],
            "additionalProperties": False,
        }
        for f in chosen
    ]
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def forced_grammar(fmt: str, tools: list[dict], name: str | None):
    """The constraint's grammar for tool_choice "required" (name None) or a named function."""
    from ..constrain import Literal, Sequence, json_schema_grammar

    if fmt == "hermes":
        schema = call_schema(tools, name, "arguments")
        return Sequence([Literal("<tool_call>\n"), json_schema_grammar(schema), Literal("\n</tool_call>")])
    if fmt == "llama3":
        return json_schema_grammar(call_schema(tools, name, "parameters"))
    raise RequestError(f"a forced tool call is not supported for the {fmt} format (tool_choice auto is)", "tool_choice")
