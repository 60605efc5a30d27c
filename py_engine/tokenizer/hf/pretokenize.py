"""Pre-tokenizers: split normalized text into the words that BPE encodes (HF `pre_tokenizer`).

Each step maps one piece of text to its sub-pieces. `at_start` tells whether the piece begins
the whole input (HF's "original offset 0"), which Metaspace's prepend_scheme "first" needs.
"""

import re

from ..byte_level import text_to_byte_chars
from ..regex.compat import class_body, compile_pattern
from ..regex.unicode_classes import category_ranges, merge_ranges
from ..spec_error import SpecError

# The split pattern HF's ByteLevel pre-tokenizer applies when use_regex is true (GPT-2's).
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

_BEHAVIORS = ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous")


def split_on_pattern(text: str, regex: re.Pattern, behavior: str, invert: bool = False) -> list[str]:
    """Split `text` on the matches of `regex` the way HF's NormalizedString::split does."""
    if not invert and regex.search(text) is None:  # most words of a text: one piece, whatever the behavior
        return [text] if text else []
    # Segments covering the text in order, each flagged as a match or as text between matches.
    segments: list[tuple[int, int, bool]] = []
    previous_end = 0
    for match in regex.finditer(text):
        start, end = match.span()
        if start > previous_end:
            segments.append((previous_end, start, invert))
        segments.append((start, end, not invert))
        previous_end = end
    if previous_end < len(text):
        segments.append((previous_end, len(text), invert))

    if behavior == "Removed":
        spans = [(start, end) for start, end, is_match in segments if not is_match]
    elif behavior == "Isolated":
        spans = [(start, end) for start, end, _ in segments]
    else:
        spans = _merge_segments(segments, behavior)
    return [text[start:end] for start, end in spans if end > start]


def _merge_segments(segments: list[tuple[int, int, bool]], behavior: str) -> list[tuple[int, int]]:
    if behavior == "MergedWithNext":
        # Same rule as MergedWithPrevious, read right to left.
        mirrored = [(-end, -start, is_match) for start, end, is_match in reversed(segments)]
        return [(-end, -start) for start, end in reversed(_merge_segments(mirrored, "MergedWithPrevious"))]
    spans: list[list[int]] = []
    previous_match = False
    for start, end, is_match in segments:
        if behavior == "Contiguous":
            join = is_match == previous_match
        else:  # MergedWithPrevious: a match is glued to the text before it
            join = is_match and not previous_match
        if join and spans:
            spans[-1][1] = end
        else:
            spans.append([start, end])
        previous_match = is_match
    return [(start, end) for start, end in spans]


class Split:
    def __init__(self, regex: re.Pattern, behavior: str, invert: bool):
        if behavior not in _BEHAVIORS:
            raise SpecError(f"unsupported split behavior {behavior!r}")
        self.regex, self.behavior, self.invert = regex, behavior, invert

    def split(self, text: str, at_start: bool) -> list[str]:
        return split_on_pattern(text, self.regex, self.behavior, self.invert)


class ByteLevel:
    """Optionally split GPT-2 style, then spell each piece as byte characters."""

    def __init__(self, add_prefix_space: bool, use_regex: bool):
        self.add_prefix_space = add_prefix_space
        self.regex = compile_pattern(GPT2_PATTERN) if use_regex else None

    def split(self, text: str, at_start: bool) -> list[str]:
        if self.add_prefix_space and not text.startswith(" "):
            text = " " + text
        pieces = split_on_pattern(text, self.regex, "Isolated") if self.regex else [text]
        return [text_to_byte_chars(piece) for piece in pieces]


class Metaspace:
    """SentencePiece style: spaces become `replacement`, which may also be prepended."""

    def __init__(self, replacement: str, prepend_scheme: str, split: bool):
        if prepend_scheme not in ("always", "first", "never"):
            raise SpecError(f"unsupported Metaspace prepend_scheme {prepend_scheme!r}")
        self.replacement, self.prepend_scheme = replacement, prepend_scheme
        self.regex = re.compile(re.escape(replacement)) if split else None

    def split(self, text: str, at_start: bool) -> list[str]:
        text = text.replace(" ", self.replacement)
        wants_prefix = self.prepend_scheme == "always" or (self.prepend_scheme == "first" and at_start)
        if wants_prefix and not text.startswith(self.replacement):
            text = self.replacement + text
        return split_on_pattern(text, self.regex, "MergedWithNext") if self.regex else [text]


class PreTokenizer:
    """A chain of steps; each step splits every piece the previous step produced."""

    def __init__(self, steps: list):
        self.steps = steps

    def __call__(self, text: str, at_start: bool) -> list[str]:
        pieces = [(text, at_start)]
        for step in self.steps:
            pieces = [
                (sub_piece, piece_at_start and index == 0)
                for piece, piece_at_start in pieces
                for index, sub_piece in enumerate(step.split(piece, piece_at_start))
                if sub_piece
            ]
        return [piece for piece, _ in pieces]


def _punctuation_ranges() -> list:
    # HF's BERT punctuation: ASCII punctuation (which includes symbols such as $ + < = > ^ ` | ~)
    # and every Unicode punctuation character.
    ascii_punctuation = [(c, c) for c in range(0x21, 0x7F) if not chr(c).isalnum()]
    return merge_ranges(ascii_punctuation + category_ranges("P"))


def _bert_steps() -> list:
    """HF's BertPreTokenizer: split at white space (dropped), then isolate each punctuation mark."""
    return [
        Split(compile_pattern(r"\s+"), "Removed", False),
        Split(re.compile(f"[{class_body(_punctuation_ranges())}]"), "Isolated", False),
    ]


def _steps(config: dict) -> list:
    kind = config.get("type")
    if kind == "Sequence":
        return [step for sub_config in config["pretokenizers"] for step in _steps(sub_config)]
    if kind == "Split":
        pattern = config["pattern"]
        if "Regex" in pattern:
            regex = compile_pattern(pattern["Regex"])
        elif "String" in pattern:
            regex = re.compile(re.escape(pattern["String"]))
        else:
            raise SpecError(f"Split pattern needs 'String' or 'Regex', got {pattern!r}")
        return [Split(regex, config["behavior"], config.get("invert", False))]
    if kind == "ByteLevel":
        return [ByteLevel(config.get("add_prefix_space", False), config.get("use_regex", True))]
    if kind == "Digits":
        # HF tests char::is_numeric, i.e. any \p{N}; runs are kept together unless individual.
        behavior = "Isolated" if config.get("individual_digits", False) else "Contiguous"
        return [Split(compile_pattern(r"\p{N}"), behavior, False)]
    if kind == "BertPreTokenizer":
        return _bert_steps()
    if kind == "WhitespaceSplit":
        return [Split(compile_pattern(r"\s+"), "Removed", False)]
    if kind == "Whitespace":
        return [Split(compile_pattern(r"\w+|[^\w\s]+"), "Removed", True)]
    if kind == "Metaspace":
        scheme = config.get("prepend_scheme")
        if scheme is None:  # files written before prepend_scheme existed
            scheme = "always" if config.get("add_prefix_space", True) else "never"
        return [Metaspace(config.get("replacement", "\u2581"), scheme, config.get("split", True))]
    raise SpecError(f"unsupported pre-tokenizer type {kind!r}")


def build_pre_tokenizer(config: dict | None) -> PreTokenizer | None:
    return None if config is None else PreTokenizer(_steps(config))
