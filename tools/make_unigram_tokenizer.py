"""Make tests/fixtures/tokenizer_unigram/tokenizer.json: a small SentencePiece Unigram tokenizer.

No T5-style tokenizer is small enough to commit, so we train one: a 600-piece Unigram model on the
Python standard library's source (plus a few lines of other scripts), with a handful of custom
normalization rules (full-width letters, "ﬁ", no-break and ideographic spaces, "…", "e" + combining
acute, half-width katakana) so that its precompiled charsmap is small but exercised. transformers'
T5Converter turns it into tokenizer.json, as for T5. Tests read it as HF tokenizer.json and, as a
GGUF `t5` vocabulary (tests/tokenizer_vocab.py), against llama.cpp.

    /path/to/python tools/make_unigram_tokenizer.py   # needs sentencepiece, transformers, protobuf
"""

import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tests" / "fixtures" / "tokenizer_unigram"

OTHER_SCRIPTS = [
    "Ångström naïve café façade résumé",
    "日本語のテキストと中文混在",
    "한국어 텍스트",
    "Привет, мир! Ελληνικά",
    "ＡＢＣ ｶﾀｶﾅ ﬁle",
    "e\u0301cole",
]

# (source code points, target code points) in SentencePiece's normalization_rule_tsv form.
RULES = (
    [(f"{c:X}", f"{c - 0xFF21 + 0x41:X}") for c in range(0xFF21, 0xFF3B)]
    + [(f"{c:X}", f"{c - 0xFF41 + 0x61:X}") for c in range(0xFF41, 0xFF5B)]
    + [
        ("FB01", "66 69"),
        ("A0", "20"),
        ("9", "20"),
        ("3000", "20"),
        ("2026", "2E 2E 2E"),
        ("65 301", "E9"),
        ("FF76 FF9E", "30AC"),
        ("FF76", "30AB"),
        ("FF80", "30BF"),
        ("FF85", "30CA"),
        ("2460", "31"),
    ]
)


def main() -> int:
    import sentencepiece
    from transformers.convert_slow_tokenizer import T5Converter

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sources = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
        corpus = "\n".join(path.read_text(encoding="utf-8", errors="ignore") for path in sources)
        (tmp / "corpus.txt").write_text(corpus[:3_000_000] + "\n" + "\n".join(OTHER_SCRIPTS * 50), encoding="utf-8")
        (tmp / "rules.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in RULES), encoding="utf-8")
        sentencepiece.SentencePieceTrainer.train(
            input=str(tmp / "corpus.txt"),
            model_prefix=str(tmp / "unigram"),
            vocab_size=600,
            model_type="unigram",
            normalization_rule_tsv=str(tmp / "rules.tsv"),
            user_defined_symbols=["<sep>"],
            character_coverage=0.9995,
            pad_id=0,
            eos_id=1,
            unk_id=2,
            bos_id=-1,
            num_threads=2,
            minloglevel=2,
        )

        class Slow:  # what T5Converter reads of a slow T5Tokenizer
            vocab_file = str(tmp / "unigram.model")
            _extra_ids = 0
            add_prefix_space = True
            legacy = True

            def convert_tokens_to_ids(self, token):
                return 1  # </s>

        OUT_DIR.mkdir(parents=True, exist_ok=True)
        T5Converter(Slow()).converted().save(str(OUT_DIR / "tokenizer.json"))
    (OUT_DIR / "tokenizer_config.json").write_text(
        '{"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}\n'
    )
    print(f"wrote {OUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
