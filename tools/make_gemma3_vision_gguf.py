"""Generate tests/fixtures/gemma3vl-gguf/: the Gemma 3 vision test model (tests/fixtures/gemma3vl-f32) as
llama.cpp users have such models, a text GGUF and its vision tower's `mmproj` GGUF, made by llama.cpp's own
converter.

    /work/refenv/bin/python tools/make_gemma3_vision_gguf.py --llama-cpp DIR [--out tests/fixtures/gemma3vl-gguf]

DIR is a llama.cpp source tree, as for tools/make_vision_gguf.py (llama-cpp-python 0.3.36's sdist's
vendor/llama.cpp); the converter runs under this Python with DIR's gguf-py ahead of any installed `gguf`.
Offline and deterministic, a few seconds. It writes, with `--outtype f32` (the converter keeps the
projector's mm.input_projection.weight f16 whatever the outtype: tensor_force_quant):

- gemma3vl-tiny-f32.gguf: `convert_hf_to_gguf.py DIR --outtype f32`: the Gemma 3 text tower (norm weights with
  Gemma's 1 added) and the tokenizer (BPE with pre-tokenizer `gpt-2`, the chat template, bos/eos/unk/pad);
- mmproj-gemma3vl-tiny-f32.gguf: the same with `--mmproj`: architecture `clip`, projector `gemma3`.

The converter is run on a copy of the fixture changed where it refuses or misreads the tiny model:

1. model.safetensors' vision tower is renamed to the hub's layout (vision_tower.vision_model.*): transformers
   5.24 saved it without `vision_model.`, which the converter cannot map.
2. The tokenizer's unrecognised pre-tokenizer hash is named `gpt-2`: its pipeline is plain ByteLevel, GPT-2's
   regex (tools/make_gemma3_vision_fixture.py); the converter knows a pre-tokenizer by the ids a test string
   encodes to, which a 335-token vocabulary makes differently.
3. The text GGUF gets `gemma3.attention.sliding_window_pattern`, one flag per layer from config.json's
   layer_types, as the converter writes it for Cohere 2 and EXAONE 4: for Gemma 3 it writes none, and
   llama.cpp's loader then takes Gemma 3's every 6th layer full, which makes this 2-layer model's full layer
   sliding. llama.cpp reads the flags (llama_model_base::load_swa_pattern), as Wisp does.
"""

from pathlib import Path

import vision_gguf_common

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "fixtures" / "gemma3vl-f32"
OUT = ROOT / "tests" / "fixtures" / "gemma3vl-gguf"
NAME = "gemma3vl-tiny"  # the converter's general.name comes from the folder's name: a fixed one
COPIED = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "preprocessor_config.json",
    "processor_config.json",
]

# Adaptation 3 (module docstring), run in the converter's process after adaptation 2.
SLIDING_PATTERN = """from conversion import gemma
parameters = gemma.Gemma3Model.set_gguf_parameters
def with_pattern(self):
    parameters(self)
    if self.hparams.get("layer_types"):
        self.gguf_writer.add_sliding_window_pattern([t == "sliding_attention" for t in self.hparams["layer_types"]])
gemma.Gemma3Model.set_gguf_parameters = with_pattern
"""


def adapted_copy(folder: Path) -> Path:
    """The fixture's files the converter reads, with adaptation 1 (module docstring)."""
    from safetensors.numpy import load_file, save_file

    model = vision_gguf_common.copy_fixture(SOURCE, folder, NAME, COPIED)
    tensors = load_file(SOURCE / "model.safetensors")
    tower = "vision_tower."
    hub = {(f"{tower}vision_model.{k[len(tower) :]}" if k.startswith(tower) else k): v for k, v in tensors.items()}
    save_file(hub, model / "model.safetensors", metadata={"format": "pt"})
    return model


def main() -> None:
    vision_gguf_common.main(__doc__, NAME, OUT, "gpt-2", adapted_copy, patch=SLIDING_PATTERN)


if __name__ == "__main__":
    main()
