"""Chat templates: render a conversation to the prompt text the model was trained on.

Templates are Jinja2 code from model repositories, so they run sandboxed, with the same
environment transformers gives them (trim_blocks, lstrip_blocks, loop controls, its `tojson`,
`raise_exception`, `strftime_now` and the `{% generation %}` tag); a template written for
transformers then renders the same text here. A template is a program from the model's files, so
it also runs with limits on its time and memory (sandbox.py, limits.py); every way it
can fail is a ChatTemplateError.
"""

import json
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes

from .filters import limited_filter
from .limits import ChatTemplateError, conversation_size
from .sandbox import LimitedEnvironment

__all__ = ["ChatTemplateError", "compile_template", "render"]

# Names transformers also passes a message's reasoning under; templates read the first.
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class _GenerationTag(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` marks assistant text for training masks;
    rendering just outputs the body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # Jinja's own tojson escapes HTML characters; transformers' does not, and templates expect that.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(date_format):
    return datetime.now().strftime(date_format)


def compile_template(source: str) -> jinja2.Template:
    env = LimitedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = limited_filter("tojson", _tojson)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.compile_source(source)
    except (ChatTemplateError, MemoryError):  # a MemoryError would be a limit missing: let it show
        raise
    except Exception as err:  # noqa: BLE001 - the template's own code: syntax, nesting, size
        raise ChatTemplateError(f"chat template does not compile: {err}") from None


def _prepare_message(message: dict) -> dict:
    # Like transformers: drop None values (templates print them as "None") and copy the
    # reasoning under each name templates look for.
    message = {key: value for key, value in message.items() if value is not None}
    reasoning = next((message[key] for key in _REASONING_FIELDS if key in message), None)
    if reasoning is not None:
        message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
    return message


def render(template: jinja2.Template, messages: list[dict], add_generation_prompt: bool, variables: dict) -> str:
    """`variables` holds the special token strings and any extra template arguments."""
    try:
        arguments = {
            "messages": [_prepare_message(message) for message in messages],
            "add_generation_prompt": add_generation_prompt,
            # Defined even when unused: templates test `tools is not none`, which an
            # undefined variable would pass.
            **{"tools": None, "documents": None, **variables},
        }
        return template.environment.render_limited(template, arguments, conversation_size(arguments))
    except (ChatTemplateError, MemoryError):
        raise
    except Exception as err:  # noqa: BLE001 - whatever the template's code raised
        # Template code fails on conversations it does not accept, e.g. a message without content.
        raise ChatTemplateError(f"chat template failed: {err}") from None
