"""Generate tests/fixtures/qwen3_5vl-gguf/: the Qwen3.5 vision test model (tests/fixtures/qwen3_5vl-f32) as
llama.cpp users have such models, a text GGUF and its vision tower's `mmproj` GGUF, made by llama.cpp's own
converter.

    /work/refenv/bin/python tools/make_qwen3_5_vision_gguf.py --llama-cpp DIR [--out tests/fixtures/qwen3_5vl-gguf]

DIR is a llama.cpp source tree, as for tools/make_gemma3_vision_gguf.py (llama-cpp-python 0.3.36's sdist's
vendor/llama.cpp); the converter runs under this Python with DIR's gguf-py ahead of any installed `gguf`.
Offline and deterministic, a few seconds. It writes, with `--outtype f32`:

- qwen3_5vl-tiny-f32.gguf: `convert_hf_to_gguf.py DIR --outtype f32 --no-mtp` (the fixture has no
  multi-token-prediction layers, and the converter asks for them unless told): architecture `qwen35`, the
  text tower (Qwen3_5TextModel: value heads in ggml's tiled order, A as -exp(A_log), the 1 of the (1 + w)
  norms added), `qwen35.rope.dimension_sections` [3, 3, 2, 0], the tokenizer (BPE with pre-tokenizer
  `qwen35`) and the chat template;
- mmproj-qwen3_5vl-tiny-f32.gguf: the same with `--mmproj`: architecture `clip`, projector `qwen3vl_merger`
  (Qwen3VLVisionModel: the Conv3d patch embedding split into v.patch_embd.weight and .weight.1, a frame
  each; the merger as v.post_ln, mm.0 and mm.2).

One adaptation: the tokenizer's unrecognised pre-tokenizer hash is named `qwen35`, its pipeline being
Qwen3.5's (tools/make_qwen3_5_vision_fixture.py); the converter knows a pre-tokenizer by the ids a test
string encodes to, which a 306-token vocabulary makes differently.
"""

from pathlib import Path

import vision_gguf_common

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "qwen3_5vl-f32"
OUT = ROOT / "tests" / "fixtures" / "qwen3_5vl-gguf"
NAME = "qwen3_5vl-tiny"  # the converter's general.name comes from the folder's name: a fixed one
COPIED = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "model.safetensors",
]


def main() -> None:
    vision_gguf_common.main(
        __doc__,
        NAME,
        OUT,
        "qwen35",
        lambda tmp: vision_gguf_common.copy_fixture(SOURCE, tmp, NAME, COPIED),
        text_flags=["--no-mtp"],
    )


if __name__ == "__main__":
    main()
