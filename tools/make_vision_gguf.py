"""Generate tests/fixtures/smolvlm-gguf/: the SmolVLM test model (tests/fixtures/smolvlm-f32) as llama.cpp
users have such models, a text GGUF and its vision tower's `mmproj` GGUF, made by llama.cpp's own converter.

    /work/refenv/bin/python tools/make_vision_gguf.py --llama-cpp DIR [--out tests/fixtures/smolvlm-gguf]

DIR is a llama.cpp source tree (convert_hf_to_gguf.py, conversion/, gguf-py/): the one the fixture was made
with is llama-cpp-python 0.3.36's sdist's vendor/llama.cpp (`pip download --no-deps --no-binary :all:
llama-cpp-python==0.3.36`, then unpack it). The converter runs under this Python, with DIR's gguf-py ahead of
any installed `gguf`; it imports torch, numpy, safetensors and sentencepiece (the last even for a model without
a tokenizer.model). Offline and deterministic (the same bytes each run), about 10 s on CPU. It writes, in f32
(the fixture's own dtype, so Wisp must answer as the safetensors folder does, logits within 1e-3):

- smolvlm-tiny-f32.gguf: `convert_hf_to_gguf.py DIR --outtype f32`: the Llama text tower and the tokenizer
  (BPE with pre-tokenizer `smollm`, the chat template, bos/eos/unk/pad ids);
- mmproj-smolvlm-tiny-f32.gguf: the same with `--mmproj`: architecture `clip`, projector `idefics3`.

The converter is run on a copy of the fixture changed in two places, where it refuses the tiny model:

1. config.json's text_config gets `"architectures": ["VLlama3ForCausalLM"]`, as the hub's SmolVLM files have
   it: the converter picks the text model's class from there, and transformers 5's save_pretrained (which wrote
   the fixture) does not write it (without it: "Model SmolVLMForConditionalGeneration is not supported").
2. The tokenizer's pre-tokenizer is named `smollm`: the converter recognises a pre-tokenizer by the sha256 of
   the ids a test string encodes to, and the tiny vocabulary's ids are not SmolLM's ("BPE pre-tokenizer was not
   recognized"); its pipeline is SmolLM2's (Digits, then ByteLevel: tools/make_vision_fixtures.py), which is
   what SmolVLM's real files convert to. Only an unrecognised hash is named so; a recognised one stands.
"""

import json
from pathlib import Path

import vision_gguf_common

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "smolvlm-f32"
OUT = ROOT / "tests" / "fixtures" / "smolvlm-gguf"
NAME = "smolvlm-tiny"  # the converter's general.name comes from the folder's name: a fixed one, not a temp dir's
COPIED = [  # what the converter reads; the pictures and references stay in smolvlm-f32
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
]


def adapted_copy(folder: Path) -> Path:
    """The fixture's files the converter reads, with adaptation 1 (module docstring)."""
    model = vision_gguf_common.copy_fixture(SOURCE, folder, NAME, COPIED)
    config = json.loads((model / "config.json").read_text())
    config["text_config"]["architectures"] = ["VLlama3ForCausalLM"]
    (model / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return model


def main() -> None:
    vision_gguf_common.main(__doc__, NAME, OUT, "smollm", adapted_copy)


if __name__ == "__main__":
    main()
