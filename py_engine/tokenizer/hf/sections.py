"""The shape of tokenizer.json's pipeline sections (normalizer, pre_tokenizer, decoder,
post_processor), checked before anything is built from them: every field the builders read must
have the type HF's `tokenizers` gives it, or the description is refused with a SpecError naming the
field ("normalizer.normalizers[1].pattern: expected ..."); `Tokenizer.from_spec` names the file.

A schema maps a section's "type" to its fields: (name, check, required). A check is a function
(value, where) that raises SpecError. Fields we do not read are not checked (HF ignores most
unknown ones too)."""

from __future__ import annotations

from ..spec_error import SpecError

MAX_NESTING = 16  # Sequences of Sequences: real files nest one deep


def fail(where: str, expected: str, value) -> None:
    raise SpecError(f"{where}: expected {expected}, got {_describe(value)}")


def _describe(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})" if len(value) <= 40 else f"a string of {len(value)} characters"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    return "an object" if isinstance(value, dict) else type(value).__name__


# ---- field checks ----


def boolean(value, where):
    if not isinstance(value, bool):
        fail(where, "true or false", value)


def optional_boolean(value, where):
    if value is not None:
        boolean(value, where)


def string(value, where):
    if not isinstance(value, str):
        fail(where, "a string", value)


def char(value, where):
    if not isinstance(value, str) or len(value) != 1:
        fail(where, "a single character", value)


def count(value, where):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        fail(where, "a count (an integer >= 0)", value)


def token_id(value, where):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**31:
        fail(where, "a token id (an integer from 0 to 2**31 - 1)", value)


def one_of(*choices):
    def check(value, where):
        if not isinstance(value, str) or value not in choices:
            fail(where, " or ".join(map(repr, choices)), value)

    return check


def optional(check):
    return lambda value, where: None if value is None else check(value, where)


def pattern(value, where):
    """HF's {"String": text} or {"Regex": expression}."""
    if not isinstance(value, dict) or len(value.keys() & {"String", "Regex"}) != 1:
        fail(where, 'an object with "String" or "Regex"', value)
    key = "String" if "String" in value else "Regex"
    string(value[key], f"{where}.{key}")


def list_of(check):
    def check_list(value, where):
        if not isinstance(value, list):
            fail(where, "a list", value)
        for index, item in enumerate(value):
            check(item, f"{where}[{index}]")

    return check_list


def _token_and_id(value, where):
    """BertProcessing's ["[CLS]", 101]."""
    if not isinstance(value, list) or len(value) != 2:
        fail(where, "a [token, id] pair", value)
    string(value[0], f"{where}[0]")
    token_id(value[1], f"{where}[1]")


def _template_piece(value, where):
    """One item of TemplateProcessing's "single": {"Sequence": {...}} or {"SpecialToken": {"id": ...}}."""
    if not isinstance(value, dict) or len(value) != 1 or not value.keys() <= {"Sequence", "SpecialToken"}:
        fail(where, 'an object with "Sequence" or "SpecialToken"', value)
    if "SpecialToken" in value:
        special = value["SpecialToken"]
        if not isinstance(special, dict):
            fail(f"{where}.SpecialToken", "an object", special)
        string(special.get("id"), f"{where}.SpecialToken.id")


def _special_tokens(value, where):
    """TemplateProcessing's {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}."""
    if not isinstance(value, dict):
        fail(where, "an object", value)
    for name, entry in value.items():
        if not isinstance(entry, dict):
            fail(f"{where}.{name}", "an object", entry)
        list_of(token_id)(entry.get("ids"), f"{where}.{name}.ids")


# ---- the sections ----

REQUIRED = True
NORMALIZERS = {
    **{form: () for form in ("NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents")},
    "Prepend": (("prepend", string, REQUIRED),),
    "Replace": (("pattern", pattern, REQUIRED), ("content", string, REQUIRED)),
    "BertNormalizer": (
        ("clean_text", boolean, False),
        ("handle_chinese_chars", boolean, False),
        ("strip_accents", optional_boolean, False),
        ("lowercase", boolean, False),
    ),
    "Precompiled": (("precompiled_charsmap", string, REQUIRED),),
    "Strip": (("strip_left", boolean, False), ("strip_right", boolean, False)),
    "Sequence": (("normalizers", "sections", REQUIRED),),
}
_METASPACE = (
    ("replacement", char, False),
    ("prepend_scheme", optional(one_of("always", "first", "never")), False),
    ("add_prefix_space", boolean, False),
    ("split", boolean, False),
)
PRE_TOKENIZERS = {
    "Sequence": (("pretokenizers", "sections", REQUIRED),),
    "Split": (("pattern", pattern, REQUIRED), ("behavior", string, REQUIRED), ("invert", boolean, False)),
    "ByteLevel": (("add_prefix_space", boolean, False), ("use_regex", boolean, False)),
    "Digits": (("individual_digits", boolean, False),),
    "BertPreTokenizer": (),
    "WhitespaceSplit": (),
    "Whitespace": (),
    "Metaspace": _METASPACE,
}
DECODERS = {
    "ByteLevel": (),
    "ByteFallback": (),
    "Fuse": (),
    "Strip": (("content", char, REQUIRED), ("start", count, False), ("stop", count, False)),
    "Replace": (("pattern", pattern, REQUIRED), ("content", string, REQUIRED)),
    "WordPiece": (("prefix", string, False), ("cleanup", boolean, False)),
    "Metaspace": _METASPACE,
    "Sequence": (("decoders", "sections", REQUIRED),),
}
POST_PROCESSORS = {
    "ByteLevel": (),
    "Sequence": (("processors", "sections", REQUIRED),),
    "BertProcessing": (("cls", _token_and_id, REQUIRED), ("sep", _token_and_id, REQUIRED)),
    "TemplateProcessing": (
        ("single", list_of(_template_piece), REQUIRED),
        ("special_tokens", _special_tokens, False),
    ),
}
SECTIONS = {
    "normalizer": ("normalizer", NORMALIZERS),
    "pre_tokenizer": ("pre-tokenizer", PRE_TOKENIZERS),
    "decoder": ("decoder", DECODERS),
    "post_processor": ("post_processor", POST_PROCESSORS),
}


def check_section(section: str, config, where: str | None = None, depth: int = 0) -> None:
    """Check one pipeline section (None: absent) against its schema; raises SpecError."""
    where = where or section
    if config is None:
        return
    what, schema = SECTIONS[section]
    if not isinstance(config, dict):
        fail(where, f"a {what} object or null", config)
    kind = config.get("type")
    if not isinstance(kind, str) or kind not in schema:
        raise SpecError(f"{where}: unsupported {what} type {kind!r:.60}")
    if depth > MAX_NESTING:
        raise SpecError(f"{where}: Sequences nested more than {MAX_NESTING} deep")
    for name, check, required in schema[kind]:
        if name not in config:
            if required:
                raise SpecError(f"{where}: a {kind} {what} needs {name!r}")
            continue
        value, field = config[name], f"{where}.{name}"
        if check == "sections":
            if not isinstance(value, list):
                fail(field, f"a list of {what} objects", value)
            for index, step in enumerate(value):
                if step is None:
                    fail(f"{field}[{index}]", f"a {what} object", step)
                check_section(section, step, f"{field}[{index}]", depth + 1)
        else:
            check(value, field)
