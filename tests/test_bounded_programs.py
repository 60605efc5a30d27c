"""Bounded work for the programs in a model's files (issue 16): a tokenizer regex that could
backtrack without bound is refused when the tokenizer loads (tokenizer/regex/guard.py), and a chat template runs
within limits on its steps, call depth, value sizes, work and output (tokenizer/template/limits.py). Either way
the failure is a typed error, and real models' regexes and templates work as before.

Speed is only checked as a hang bound (HANG_SECONDS); each refusal here takes milliseconds.
"""

import json
import time

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizer_vocab import CACHE_DIR

from py_engine.errors import ModelFileError, WispError
from py_engine.tokenizer import Tokenizer
from py_engine.tokenizer.hf.pretokenize import GPT2_PATTERN, split_on_pattern
from py_engine.tokenizer.llama.pre import AFMOE_DIGITS, KIMI_K2, SPLITS
from py_engine.tokenizer.regex.compat import compile_pattern
from py_engine.tokenizer.spec_error import SpecError
from py_engine.tokenizer.template import chat

HANG_SECONDS = 5.0

LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
O200K = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
R50K = r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"
# llama.cpp's table of pre-tokenizer regexes is a catalogue of what real models ship (Jais 2,
# DeepSeek, Tekken, GPT-4o, Tiny Aya, K-EXAONE, ...); two entries stand for hand-written code.
CATALOGUE = sorted({regex for regexes, _ in SPLITS.values() for regex in regexes} - {KIMI_K2, AFMOE_DIGITS})

CATASTROPHIC = {
    "nested plus": r"(a+)+!",
    "overlapping alternatives": r"(a|a)*b",
    "alternatives sharing a prefix": r"(a|aa)+b",
    "word-space loop": r"(\w+\s?)*$",
    "digits": r"(\d+)+$",
    "three adjacent loops": r"a*a*a*b",
    "two adjacent space loops": r"\s*\s*x",
    "loop in a loop": r"(x+x+)+y",
    "counted optional": r"(?:a?){30}a{30}",
    "counted dot-star": r"(.*a){20}",
    "empty alternatives": r"(?:|)" * 12 + "x",
    "inside a lookahead": r"(?=(a+)+b)",
    "loop in a lookahead after a loop": r"\s+(?=\s*$)x",
    "repeated lookbehind": r"(a(?<=a)+)+!",
    "case-insensitive overlap": r"(?i:(s|ſ)+)+x",
    "backreference": r"(a+)\1",
}


@pytest.mark.parametrize("pattern", [GPT2_PATTERN, LLAMA3, QWEN2, O200K, R50K, *CATALOGUE])
def test_real_models_regexes_are_accepted(pattern):
    compile_pattern(pattern)


@pytest.mark.parametrize("pattern", CATASTROPHIC.values(), ids=CATASTROPHIC.keys())
def test_catastrophic_regexes_are_refused_when_compiled(pattern):
    start = time.perf_counter()
    with pytest.raises(SpecError, match="regex"):
        compile_pattern(pattern)
    assert time.perf_counter() - start < HANG_SECONDS


def test_quadratic_is_the_most_a_regex_may_cost():
    compile_pattern(r"a*b")  # a failed attempt per start: quadratic, as Llama 3's own \s*[\r\n]+
    for pattern in (r"a*a*b", r"\s+(?=\s*x)"):  # cubic
        with pytest.raises(SpecError):
            compile_pattern(pattern)


def test_an_accepted_regex_splits_adversarial_text_promptly():
    regex = compile_pattern(LLAMA3)
    start = time.perf_counter()
    for text in (" " * 5000 + "x", "\n" * 5000 + "x", "a" * 5000 + "!", "'" * 5000):
        assert "".join(split_on_pattern(text, regex, "Isolated")) == text
    assert time.perf_counter() - start < HANG_SECONDS


def write_tokenizer(tmp_path, **sections):
    data = {"model": {"type": "BPE", "vocab": {"a": 0, "!": 1, " ": 2}, "merges": []}, **sections}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def split(pattern: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


def test_a_tokenizer_with_a_catastrophic_split_fails_to_load_naming_its_file(tmp_path):
    path = write_tokenizer(tmp_path, pre_tokenizer=split(r"(a+)+!"))
    start = time.perf_counter()
    with pytest.raises(ModelFileError, match="backtrack") as caught:
        Tokenizer.from_file(path)
    assert caught.value.path == str(path) and time.perf_counter() - start < HANG_SECONDS
    # The same file with a harmless split loads, and encodes what the bad one would hang on.
    tok = Tokenizer.from_file(write_tokenizer(tmp_path, pre_tokenizer=split(r"a+|!")))
    assert tok.encode("a" * 30 + "!") == [0] * 30 + [1]


def test_a_normalizer_regex_is_checked_too(tmp_path):
    replace = {"type": "Replace", "pattern": {"Regex": r"(a|a)*b"}, "content": "x"}
    with pytest.raises(ModelFileError, match="backtrack"):
        Tokenizer.from_file(write_tokenizer(tmp_path, normalizer=replace))


# ---- chat templates ----

CONVERSATION = [
    {"role": "system", "content": "Be terse."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": "Sunny.", "reasoning_content": "Look it up."},
    {"role": "user", "content": "Thanks 👍"},
]
HOSTILE_TEMPLATES = {
    "string times a billion": "{{ 'a' * 10**9 }}",
    "list times a hundred million": "{{ [1] * 100000000 }}",
    "bytes times a billion": "{{ 'a'.encode() * 10**9 }}",
    "macro calling itself": "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "macro calling itself twice": "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}",
    "range in range": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "loops over a long string": "{% for c in 'x' * 100000 %}{% for d in 'y' * 100000 %}{% endfor %}{% endfor %}",
    "recursive loop": "{% for x in range(10) recursive %}{{ loop(range(10)) }}{% endfor %}",
    "block calling itself": "{% block b %}{{ self.b() }}{% endblock %}",
    "huge power": "{{ 7 ** 10000000 }}",
    "squaring a big number": "{{ (10**4000) * (10**4000) }}",
    "printf width": "{{ '%999999999d' % 1 }}",
    "format width": "{{ '{:>999999999}'.format(1) }}",
    "computed format width": "{{ '{0:{1}}'.format(1, 10**9) }}",
    "ljust": "{{ 'a'.ljust(10**9) }}",
    "replace in every gap": "{{ ('x' * 900000).replace('', 'yy') }}",
    "expandtabs": "{{ 'a\\tb'.expandtabs(10**9) }}",
    "translate to long strings": "{{ 'ab'.translate({97: 'x' * 10**6}) }}",
    "center filter": "{{ 'a' | center(10**9) }}",
    "indent filter": "{{ 'x' | indent(10**9, true) }}",
    "batch filter": "{{ [1] | batch(10**9, 0) | list }}",
    "slice filter": "{{ [1] | slice(10**9) | list }}",
    "join with a long separator": "{{ range(10**5) | join('x' * 100000) }}",
    "tojson indent": "{{ {'a': 1} | tojson(indent=10**8) }}",
    "striptags on a long text": "{{ ('<!--' * 100000) | striptags }}",
    "list doubling": "{% set a = [1] %}" + "{% set a = [a, a] %}" * 40 + "{{ a }}",
    "string doubling": "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "comparing long strings": "{% set s = 'a' * 900000 %}{% for i in range(100000) %}{{ s == s ~ '' }}{% endfor %}",
    "text in a long loop": "{% set s %}{% for i in range(100000) %}" + "x" * 400 + "{% endfor %}{% endset %}",
    "namespace holding itself": "{% set ns = namespace(a=1) %}{% set ns.a = ns %}{{ ns }}",
    "lipsum": "{{ lipsum(10**9) }}",
    "deep parentheses": "{{ " + "(" * 300 + "1" + ")" * 300 + " }}",
    "too long": "x" * 200_000,
}


@pytest.mark.parametrize("source", HOSTILE_TEMPLATES.values(), ids=HOSTILE_TEMPLATES.keys())
def test_hostile_templates_fail_with_a_typed_error(source):
    start = time.perf_counter()
    with pytest.raises(chat.ChatTemplateError):
        chat.render(chat.compile_template(source), CONVERSATION, True, {})
    assert time.perf_counter() - start < HANG_SECONDS


def test_template_errors_are_one_type():
    assert issubclass(chat.ChatTemplateError, WispError)
    with pytest.raises(chat.ChatTemplateError, match="does not compile"):
        chat.compile_template("{% for %}")
    for source, problem in [("{{ raise_exception('user first') }}", "user first"), ("{{ 1 / 0 }}", "division")]:
        with pytest.raises(chat.ChatTemplateError, match=problem):
            chat.render(chat.compile_template(source), CONVERSATION, True, {})


def test_apply_chat_template_reports_a_runaway_template():
    tok = Tokenizer.from_spec(
        model_type="bpe", vocab={"a": 0}, pre_tokenizer=None, chat_template=HOSTILE_TEMPLATES["range in range"]
    )
    with pytest.raises(WispError, match="steps"):
        tok.apply_chat_template(CONVERSATION)


def test_limits_grow_with_the_conversation():
    long_conversation = [{"role": "user", "content": "word " * 600_000}] * 3  # 9 MB of text
    template = chat.compile_template(
        "{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}{{ messages | tojson | length }}"
    )
    assert len(chat.render(template, long_conversation, True, {})) > 9_000_000


CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
EVERY_CONSTRUCT = """{%- set ns = namespace(found=false, count=0) %}
{%- macro show(m) %}[{{ m.role | upper }}{{ ' (' ~ m.reasoning_content ~ ')' if m.reasoning_content }}] {{ m.content }}{% endmacro %}
{%- for m in messages if m.role != 'system' %}{% set ns.count = ns.count + 1 %}{{ show(m) }}{{ '\\n' if not loop.last }}{% endfor %}
{%- for key, value in {'b': 2, 'a': 1} | dictsort %}{{ key }}={{ value * 3 }},{% endfor %}
{{- [3, 1, 2] | sort | join('-') }} {{ (messages | selectattr('role', 'equalto', 'user') | list | length) ~ '/' ~ ns.count }}
{{- ' %s|%5.1f' % ('x', 2.25) }} {{ '{:>6}|{}'.format('ab', [1, 'é']) }} {{ 'a b c'.split() | reverse | list }}
{{- messages[0] | tojson }} {{ 'Zürich' in messages[1].content }} {{ 2 ** 10 }} {{ 'ab' * 3 }} {{ range(3) | list }}
{%- if tools is not none %}{{ raise_exception('no tools here') }}{% endif %}
{%- macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}{{ messages | length }}{% endcall %}"""


def real_templates() -> dict[str, str]:
    found = {"chatml": CHATML, "every construct": EVERY_CONSTRUCT}
    for name in ("llama3", "qwen3", "gemma3"):  # the test vocabularies, once fetched
        path = CACHE_DIR / name / "tokenizer_config.json"
        if path.is_file():
            found[name] = json.loads(path.read_text(encoding="utf-8"))["chat_template"]
    return found


@pytest.mark.parametrize("name", real_templates())
def test_real_templates_render_as_plain_jinja_does(name):
    source = real_templates()[name]
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    plain.filters["tojson"] = chat._tojson
    plain.globals.update(raise_exception=chat._raise_exception, strftime_now=chat._strftime_now)
    variables = {"bos_token": "<s>", "eos_token": "</s>", "tools": None, "documents": None}
    messages = [chat._prepare_message(m) for m in CONVERSATION]
    expected = plain.from_string(source.replace("{% generation %}", "").replace("{% endgeneration %}", ""))
    for add_generation_prompt in (True, False):
        want = expected.render(messages=messages, add_generation_prompt=add_generation_prompt, **variables)
        got = chat.render(chat.compile_template(source), CONVERSATION, add_generation_prompt, variables)
        assert got == want
