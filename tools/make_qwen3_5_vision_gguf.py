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

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

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

# Runs convert_hf_to_gguf.py as its own __main__ with the adaptation (module docstring) in place.
CONVERT = """
import runpy, sys
llama_cpp = sys.argv[1]
sys.path[:0] = [llama_cpp, llama_cpp + "/gguf-py"]
from conversion import base
recognised = base.TextModel.get_vocab_base_pre
def pre_tokenizer(self, tokenizer):
    try:
        return recognised(self, tokenizer)
    except NotImplementedError:
        return "qwen35"
base.TextModel.get_vocab_base_pre = pre_tokenizer
sys.argv = [llama_cpp + "/convert_hf_to_gguf.py", *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def convert(llama_cpp: Path, model: Path, out: Path, *flags: str) -> None:
    command = [sys.executable, "-c", CONVERT, str(llama_cpp), str(model), "--outtype", "f32", "--outfile", str(out)]
    result = subprocess.run([*command, *flags], capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"convert_hf_to_gguf.py {' '.join(flags)} failed:\n{result.stderr[-4000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="a llama.cpp source tree")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if not (args.llama_cpp / "convert_hf_to_gguf.py").is_file():
        sys.exit(f"{args.llama_cpp}: no convert_hf_to_gguf.py (see this script's docstring)")
    args.out.mkdir(parents=True, exist_ok=True)
    files = {"text": f"{NAME}-f32.gguf", "mmproj": f"mmproj-{NAME}-f32.gguf"}
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / NAME
        model.mkdir()
        for name in COPIED:
            shutil.copy(SOURCE / name, model / name)
        convert(args.llama_cpp, model, args.out / files["text"], "--no-mtp")
        convert(args.llama_cpp, model, args.out / files["mmproj"], "--mmproj")
    for name in files.values():
        digest = hashlib.sha256((args.out / name).read_bytes()).hexdigest()
        print(f"{name}: {(args.out / name).stat().st_size} bytes, sha256 {digest}")


if __name__ == "__main__":
    main()
