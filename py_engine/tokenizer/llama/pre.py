"""llama.cpp's pre-tokenizers for GGUF byte-level BPE vocabularies (`tokenizer.ggml.pre`).

Copied from llama.cpp's src/llama-vocab.cpp: the regexes each pre-tokenizer type splits text with,
applied in turn, each splitting every piece the previous one produced (see split.py), and the
`tokenizer.ggml.pre` names that select each type with the flags they change. The regex strings
are llama.cpp's own, character for character (llama.cpp recognises some of them by their text to
run hand-written splitters); tools/make_gguf_tokenizer_refs.py checks these tables against
llama.cpp's source and records them in the test fixtures.
"""

from dataclasses import dataclass

_CONTRACTIONS = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_CONTRACTIONS_OPTIONAL = _CONTRACTIONS + "?"
GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
LLAMA3 = (
    _CONTRACTIONS
    + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)
QWEN2 = (
    _CONTRACTIONS
    + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)
QWEN35 = (
    _CONTRACTIONS
    + "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
)
NEWLINE_RUNS = "[^\\n]+|[\\n]+"
KIMI_K2 = "\\p{Han}+"  # stands for Kimi-K2's whole split, which llama.cpp hand-codes
AFMOE_DIGITS = "\\p{AFMoE_digits}"  # digit runs cut into threes, the first group shorter
TINY_AYA_DIGITS = "\\d{1,3}(?=(?:\\d{3})*\\b)"  # llama.cpp runs AFMOE_DIGITS' splitter for it

_DEEPSEEK3 = (
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)
_CJK_KANA = "[一-龥぀-ゟ゠-ヿ]+"
_CASED_WORDS = (
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    + _CONTRACTIONS_OPTIONAL
    + "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    + _CONTRACTIONS_OPTIONAL
)
_TAIL_SLASH = "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"


def _case_lookahead(letter: str) -> str:
    """Tekken's and GPT-4o's cased words, rewritten by llama.cpp with lookaheads."""
    upper, lower = f"((?=[{letter}])([^a-z]))", f"((?=[{letter}])([^A-Z]))"
    return f"[^\\r\\n\\p{{L}}\\p{{N}}]?{upper}*{lower}+", f"[^\\r\\n\\p{{L}}\\p{{N}}]?{upper}+{lower}*"


def _gpt4o(letter: str) -> str:
    first, second = _case_lookahead(letter)
    return first + _CONTRACTIONS_OPTIONAL + "|" + second + _CONTRACTIONS_OPTIONAL + "|\\p{N}{1,3}" + _TAIL_SLASH


_TEKKEN_WORDS = _case_lookahead("\\p{L}")
_BLOOM = " ?[^(\\s|.,!?…。，、।۔،)]+"
_DEEPSEEK_HAN_HANGUL = "[一-龥ࠀ-一가-퟿]+"

# pre-tokenizer type -> (regexes applied in turn, whether pieces are then spelled as GPT-2 bytes)
SPLITS: dict[str, tuple[tuple[str, ...], bool]] = {
    "default": (("[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"), True),
    "gpt2": ((GPT2,), True),
    "starcoder": (("\\p{N}", GPT2), True),
    "falcon": (("[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"), True),
    "llama3": ((LLAMA3,), True),
    "jais2": (
        (
            _CONTRACTIONS + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
            "|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)"
            "|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
        ),
        True,
    ),
    "qwen2": ((QWEN2,), True),
    "qwen35": ((QWEN35,), True),
    "deepseek-llm": (
        (
            "[\r\n]",
            # \u escapes: these characters change under NFC, which editors apply.
            "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅ"
            "ὐ-ὗὙὛὝὟ-\u1f7dᾀ-ᾴᾶ-ᾼ\u1fbeῂ-ῄῆ-ῌῐ-\u1fd3ῖ-\u1fdbῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212a-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻ"
            "Ȿ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
            "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
            "\\s+$",
            _DEEPSEEK_HAN_HANGUL,
            "\\p{N}+",
        ),
        True,
    ),
    "deepseek-coder": (("[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", _DEEPSEEK_HAN_HANGUL, "\\p{N}"), True),
    "deepseek3-llm": (("\\p{N}{1,3}", _CJK_KANA, _DEEPSEEK3), True),
    "spark2-5": (
        (
            "\\p{N}{1,3}",
            _CJK_KANA,
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
            "| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
            "\\p{N}",
        ),
        True,
    ),
    "youtu": (
        (
            "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|" + _CJK_KANA,
            _CASED_WORDS + "|\\p{N}" + _TAIL_SLASH,
        ),
        True,
    ),
    "bloom": ((_BLOOM,), True),
    "viking": ((_BLOOM, "\\p{N}"), True),
    "tekken": ((_TEKKEN_WORDS[0] + "|" + _TEKKEN_WORDS[1] + "|\\p{N}" + _TAIL_SLASH,), True),
    "chameleon": (
        (
            "<sentinel:[0-9]+>",
            "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
            "([\\t\\n]|    |  )",
            "\\p{N}",
            "[\\p{P}!-/:-@\\[-`{-~]",
            GPT2,
        ),
        True,
    ),
    "gpt4o": ((_gpt4o("\\p{L}"),), True),
    "granite-emb-multi": ((_gpt4o("\\p{L}\\p{M}"),), True),
    "tiny-aya": ((TINY_AYA_DIGITS, _CASED_WORDS + "|\\p{N}{1,3}" + _TAIL_SLASH), True),
    "kimi-k2": ((KIMI_K2,), True),
    "superbpe": (("\\p{N}+", "(?=(\\d{3})+(?!\\d))"), True),
    "bailingmoe": (
        (
            "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
            "|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
        ),
        True,
    ),
    "seed-coder": (
        (
            _CONTRACTIONS
            + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)"
            "|\\s+",
        ),
        True,
    ),
    "ufakzeka": (
        ("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",),
        True,
    ),
    "afmoe": (
        (
            AFMOE_DIGITS,
            "[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
            "| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        ),
        True,
    ),
    "laguna": ((NEWLINE_RUNS, QWEN2), True),
    "exaone-moe": (
        (
            _CONTRACTIONS
            + "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?"
            "|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
        ),
        True,
    ),
    # SentencePiece-style BPE over raw UTF-8 (spaces already "▁"): only newlines split.
    "gemma4": ((NEWLINE_RUNS,), False),
    "minicpm5": (
        (
            "\\p{N}{1,3}",
            _CONTRACTIONS
            + "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
        ),
        True,
    ),
    "whitespace": (("\\S+",), False),
}


@dataclass(frozen=True)
class PreTokenizer:
    """What one `tokenizer.ggml.pre` value selects: its split, and the vocabulary flags it sets."""

    split: str  # a key of SPLITS
    ignore_merges: bool = False  # a piece that is itself a token is not merged from characters
    add_bos: bool = False  # the default of tokenizer.ggml.add_bos_token
    clean_spaces: bool = True  # decoding removes the space before punctuation and contractions
    escape_whitespaces: bool = False  # spaces become "▁" before splitting
    no_bos_token: bool = False  # the default BOS id is none (GLM)
    force_bos: bool = False  # BOS is added even where the file says not to (Gemma 4)
    # A piece of newlines alone that is itself a token is that token, whatever the merges make of
    # it (llama.cpp's Gemma 4 special case, llm_tokenizer_bpe_session::tokenize).
    newline_runs_whole: bool = False


def _pre(split: str, **flags) -> PreTokenizer:
    return PreTokenizer(split, **flags)


_KEEP = {"clean_spaces": False}
_LLAMA3 = _pre("llama3", ignore_merges=True, add_bos=True)

# tokenizer.ggml.pre -> what llama.cpp does for it. Missing from a file: "default".
PRE_TOKENIZERS: dict[str, PreTokenizer] = {
    "default": _pre("default"),
    "minicpm5": _pre("minicpm5", ignore_merges=True),
    **dict.fromkeys(
        ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"),
        _LLAMA3,
    ),
    "deepseek-llm": _pre("deepseek-llm", **_KEEP),
    "deepseek-coder": _pre("deepseek-coder", **_KEEP),
    **dict.fromkeys(("deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"), _pre("deepseek3-llm", **_KEEP)),
    "spark2_5": _pre("spark2-5", **_KEEP),
    "youtu": _pre("youtu", ignore_merges=True, **_KEEP),
    "falcon": _pre("falcon"),
    **dict.fromkeys(
        ("mpt", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum"),
        _pre("gpt2"),
    ),
    **dict.fromkeys(("modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "olmo", "jais"), _pre("gpt2")),
    **dict.fromkeys(("exaone4",), _pre("gpt2")),
    **dict.fromkeys(("trillion", "granite-docling"), _pre("gpt2", **_KEEP)),
    **dict.fromkeys(
        ("starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"),
        _pre("starcoder"),
    ),
    **dict.fromkeys(("command-r", "smollm"), _pre("starcoder", **_KEEP)),
    "jais-2": _pre("jais2"),
    **dict.fromkeys(
        ("gemma4", "granite-embed-multi-311m"),
        _pre("gemma4", escape_whitespaces=True, force_bos=True, newline_runs_whole=True),
    ),
    "sarvam-moe": _pre("gemma4", escape_whitespaces=True, **_KEEP),
    "whitespace": _pre("whitespace"),
    **dict.fromkeys(
        ("qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2"), _pre("qwen2", **_KEEP)
    ),
    **dict.fromkeys(("stablelm2", "megrez"), _pre("qwen2")),
    "qwen35": _pre("qwen35", **_KEEP),
    **dict.fromkeys(("dbrx", "smaug-bpe"), _pre("llama3")),
    "poro-chat": _pre("bloom", **_KEEP),
    **dict.fromkeys(("bloom", "gpt3-finnish"), _pre("bloom")),
    "chatglm-bpe": _pre("llama3", no_bos_token=True),
    **dict.fromkeys(("glm4", "glm5"), _pre("llama3", no_bos_token=True, ignore_merges=True)),
    "viking": _pre("viking", **_KEEP),
    "tekken": _pre("tekken", ignore_merges=True, add_bos=True, **_KEEP),
    "chameleon": _pre("chameleon", add_bos=True, **_KEEP),
    **dict.fromkeys(("gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"), _pre("gpt4o", **_KEEP)),
    "granite-embed-multi-97m": _pre("granite-emb-multi", ignore_merges=True, **_KEEP),
    **dict.fromkeys(("tiny_aya", "cohere2moe"), _pre("tiny-aya", **_KEEP)),
    "superbpe": _pre("superbpe", **_KEEP),
    **dict.fromkeys(("bailingmoe", "bailingmoe2", "llada-moe"), _pre("bailingmoe", **_KEEP)),
    "seed-coder": _pre("seed-coder", **_KEEP),
    "kimi-k2": _pre("kimi-k2", **_KEEP),
    "ufakzeka": _pre("ufakzeka", **_KEEP),
    "afmoe": _pre("afmoe", **_KEEP),
    "laguna": _pre("laguna", **_KEEP),
    "exaone-moe": _pre("exaone-moe"),
}
