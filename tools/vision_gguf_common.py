"""What the vision GGUF tools share (tools/make_vision_gguf.py for SmolVLM, make_gemma3_vision_gguf.py,
make_qwen3_5_vision_gguf.py): llama.cpp's convert_hf_to_gguf.py run under this Python on a copy of a vision
fixture, once for the text GGUF and once with --mmproj, both in f32, with the tiny tokenizer's unrecognised
pre-tokenizer hash given a name (the converter knows a pre-tokenizer by the ids a test string encodes to, and
a tiny vocabulary's ids are not the real one's)."""

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Runs convert_hf_to_gguf.py as its own __main__, an unrecognised pre-tokenizer named {pre!r}, {patch} in place.
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
        return {pre!r}
base.TextModel.get_vocab_base_pre = pre_tokenizer
{patch}sys.argv = [llama_cpp + "/convert_hf_to_gguf.py", *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def copy_fixture(source: Path, folder: Path, name: str, copied: list[str]) -> Path:
    """The files `copied` of the fixture `source` in folder/name (the converter's general.name comes from the
    folder's name: a fixed one, not a temp dir's)."""
    model = folder / name
    model.mkdir()
    for file in copied:
        shutil.copy(source / file, model / file)
    return model


def convert(script: str, llama_cpp: Path, model: Path, out: Path, *flags: str) -> None:
    command = [sys.executable, "-c", script, str(llama_cpp), str(model), "--outtype", "f32", "--outfile", str(out)]
    result = subprocess.run([*command, *flags], capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"convert_hf_to_gguf.py {' '.join(flags)} failed:\n{result.stderr[-4000:]}")


def main(doc: str, name: str, out: Path, pre: str, adapted_copy, patch: str = "", text_flags=()) -> None:
    """The command line: --llama-cpp DIR [--out OUT]; writes {name}-f32.gguf and mmproj-{name}-f32.gguf from
    the folder `adapted_copy(tmp)` makes, and prints their sizes and sha256."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--llama-cpp", type=Path, required=True, help="a llama.cpp source tree")
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args()
    if not (args.llama_cpp / "convert_hf_to_gguf.py").is_file():
        sys.exit(f"{args.llama_cpp}: no convert_hf_to_gguf.py (see this script's docstring)")
    args.out.mkdir(parents=True, exist_ok=True)
    script = CONVERT.format(pre=pre, patch=patch)
    files = {"text": f"{name}-f32.gguf", "mmproj": f"mmproj-{name}-f32.gguf"}
    with tempfile.TemporaryDirectory() as tmp:
        model = adapted_copy(Path(tmp))
        convert(script, args.llama_cpp, model, args.out / files["text"], *text_flags)
        convert(script, args.llama_cpp, model, args.out / files["mmproj"], "--mmproj")
    for file in files.values():
        digest = hashlib.sha256((args.out / file).read_bytes()).hexdigest()
        print(f"{file}: {(args.out / file).stat().st_size} bytes, sha256 {digest}")
