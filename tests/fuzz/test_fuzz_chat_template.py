"""Fuzz chat templates (issue 16): real templates, text- and byte-mutated, with hostile snippets
spliced in (allocation bombs, loops in loops, runaway recursion, huge formats and widths), compiled
and rendered with a small conversation as tok.apply_chat_template does. Allowed: a ChatTemplateError
(a WispError). Not allowed: any other exception, a MemoryError, or a rendering slower than
SLOW_SECONDS: every operation a template can repeat is charged to a budget, so one that runs long
has found a path the budget does not see. The limits are scaled down for the run (each input then
stops in milliseconds, and an unbudgeted path stands out all the more).

Seeds: the ChatML template of the chat tests, the GGUF tests' template, compact templates in the
shapes real ones have (namespace flags, macros, tools, tojson, loop.last, {% generation %}), and the
real Llama 3, Qwen3 and Gemma 3 templates of the test vocabularies where they are present.
"""

import json
import random
import time

import pytest
from harness import fuzz, mutate_bytes
from tokenizer_vocab import CACHE_DIR

from py_engine.tokenizer.template import chat, limits

SLOW_SECONDS = 4.0
SCALED_LIMITS = {"MAX_STEPS": 5_000, "MAX_VALUE": 50_000, "MAX_WORK": 500_000, "MAX_OUTPUT": 100_000}

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
GGUF_SYNTHETIC = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}{{ eos_token }}{% endfor %}"
TOOLS_AND_THINKING = """{%- set ns = namespace(last_user=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}
{%- macro text(content) %}{% if content is string %}{{ content | trim }}{% else %}{% for p in content %}{{ p.text }}{% endfor %}{% endif %}{% endmacro %}
{%- if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools>{% endif %}
{%- for m in messages %}{% if m.reasoning_content is defined and loop.index0 > ns.last_user %}<think>{{ m.reasoning_content.strip() }}</think>{% endif %}
<|{{ m.role }}|>{{ text(m.content) }}{% for call in m.tool_calls or [] %}<call>{{ call.function | tojson }}</call>{% endfor %}
{%- if not loop.last %}{{ eos_token }}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% generation %}{% endgeneration %}{% endif %}"""
TURNS = """{{ bos_token }}{% set rest = messages[1:] if messages[0]['role'] == 'system' else messages %}
{%- for message in rest %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('roles must alternate') }}{% endif %}
{{- '<start_of_turn>' ~ ('model' if message['role'] == 'assistant' else message['role']) ~ '\n' ~ message['content'] | trim ~ '<end_of_turn>\n' }}
{%- endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}{{ strftime_now('%Y') | length }}"""
HOSTILE = [
    "{{ 'a' * 10**9 }}", "{{ [1] * 100000000 }}", "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{{ 10**10**8 }}",
    "{{ '%999999999d' % 1 }}", "{{ '{:>999999999}'.format(1) }}", "{{ 'a'.ljust(10**9) }}",
    "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(30) }}",
    "{% set a = [1] %}" + "{% set a = [a, a] %}" * 24 + "{{ a }}",
    "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "{{ ('x' * 900000).replace('', 'yy') }}", "{{ 'a' | center(10**9) }}", "{{ lipsum(10**9) }}",
    "{% set s = 'a' * 900000 %}{% for i in range(100000) %}{% if s == s ~ '' %}{% endif %}{% endfor %}",
    "{% for c in 'x' * 100000 %}{% for d in 'y' * 100000 %}{% endfor %}{% endfor %}",
    "{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns }}", "{{ " + "(" * 300 + "1" + ")" * 300 + " }}",
    "{% for x in range(10) recursive %}{{ loop(range(10)) }}{% endfor %}", "{{ range(10**5) | join('x' * 100000) }}",
    "{{ [1] | batch(10**9, 0) | list }}", "{{ [1] | slice(10**9) | list }}", "{{ [[1]] | sum(start=[]) }}",
    "{{ ('<!--' * 100000) | striptags }}", "{{ {'a': 1} | tojson(indent=10**8) }}", "{{ 'x' | indent(10**9, true) }}",
    "{{ 'a\\tb'.expandtabs(10**9) }}", "{{ 'ab'.translate({97: 'x' * 10**6}) }}", "{{ (10**4000) * (10**4000) }}",
    "{% filter upper %}{% for i in range(10**5) %}{{ 'x' * 10**4 }}{% endfor %}{% endfilter %}",
    "{{ '{0:{1}}'.format(1, 10**9) }}", "{% set s %}{% for i in range(100000) %}{{ messages }}{% endfor %}{% endset %}",
    "{% for m in messages * 100000 %}{{ m }}{% endfor %}", "{{ messages | map('tojson') | join * 10**6 }}",
    "{% for i in range(10**5) %}{{ 'x' in ('y' * 10**5) }}{% endfor %}", "{{ self.__init__ }}", "{{ ''.__class__ }}",
    "{% block b %}{{ self.b() }}{% endblock %}", "{{ cycler(*range(10**5)).next() * 10**5 }}", "{{ dict(a=1) | items | list }}",
    "{% set x = namespace(l=[]) %}{% for i in range(10**5) %}{% set x.l = x.l + [x.l] %}{% endfor %}{{ x.l | length }}",
    "{{ 1/0 }}", "{{ messages[10**9] }}", "{{ 'a'.encode() * 10**9 }}", "{% include 'x' %}", "{% extends 'x' %}", "{{ raise_exception('no') }}",
]  # fmt: skip
CONVERSATION = [
    {"role": "system", "content": "Be terse."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
     "tool_calls": [{"type": "function", "function": {"name": "weather", "arguments": {"city": "Zürich"}}}]},
    {"role": "user", "content": "Thanks 👍"},
]  # fmt: skip
VARIABLES = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "tools": [{"type": "function", "function": {"name": "weather", "parameters": {"city": {"type": "string"}}}}],
}


def _real_templates() -> list[str]:
    found = []
    for name in ("llama3", "qwen3", "gemma3"):
        path = CACHE_DIR / name / "tokenizer_config.json"
        if path.is_file():
            found.append(json.loads(path.read_text(encoding="utf-8"))["chat_template"])
    return found


SEEDS = [t.encode() for t in (CHATML, GGUF_SYNTHETIC, TOOLS_AND_THINKING, TURNS)]
BIG_SEEDS = [t.encode() for t in _real_templates()]  # 1 to 4 KB: compiled in tens of ms, so drawn rarely


HOSTILE_EXPRESSIONS = [
    h[2:-2].strip() for h in HOSTILE if h.startswith("{{") and h.endswith("}}") and h.count("{{") == 1
]


def _tag_boundaries(text: str) -> list[int]:
    """Where a whole statement or expression can go without breaking the template's syntax."""
    cuts = [0, len(text)]
    for opener in ("{{", "{%"):
        cuts += [i for i in range(len(text)) if text.startswith(opener, i)]
    for closer in ("}}", "%}"):
        cuts += [i + 2 for i in range(len(text)) if text.startswith(closer, i)]
    return cuts


def mutate(seed: bytes, rng: random.Random) -> bytes:
    if BIG_SEEDS and rng.random() < 0.02:
        seed = rng.choice(BIG_SEEDS)
    if rng.random() < 0.1:
        return mutate_bytes(seed, rng, SEEDS)
    text = seed.decode("utf-8", "replace")
    for _ in range(rng.randint(1, 2)):
        kind = rng.randrange(10)
        if kind <= 5:
            pos = rng.choice(_tag_boundaries(text))
            text = text[:pos] + rng.choice(HOSTILE) + text[pos:]
        elif kind <= 8:  # a hostile expression joined to one of the template's own
            start = text.find("{{", rng.randrange(len(text) + 1))
            if start >= 0:
                text = text[: start + 2] + " (" + rng.choice(HOSTILE_EXPRESSIONS) + ") ~ " + text[start + 2 :]
        else:
            pos = rng.randrange(len(text) + 1)
            text = text[:pos] + text[pos + rng.randint(1, 40) :]
    return text.encode("utf-8", "surrogatepass")


def target(data: bytes) -> None:
    start = time.perf_counter()
    template = chat.compile_template(data.decode("utf-8", "replace"))
    chat.render(template, CONVERSATION, True, VARIABLES)
    elapsed = time.perf_counter() - start
    if elapsed > SLOW_SECONDS:
        raise AssertionError(f"a template took {elapsed:.1f} s, past its budget")


def test_fuzz_chat_template(monkeypatch: pytest.MonkeyPatch):
    for name, value in SCALED_LIMITS.items():
        monkeypatch.setattr(limits, name, value)
    # Each input is compiled by Jinja (parsing, code generation, Python's compile(): 2 to 5 ms even
    # for these small templates), so this is the longest of the readers' runs.
    fuzz("chat_template", SEEDS, mutate, target)
