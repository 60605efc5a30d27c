"""A CTranslate2 Whisper folder (faster-whisper's model.bin, config.json, tokenizer.json) -> an HF
folder transformers loads, through the engine's own converter (py_engine/formats/ct2_whisper.py,
pure Python: what `python -m py_engine fetch whisper-base` runs after download).

    python tools/ct2_to_safetensors.py CT2_DIR OUT_DIR            # convert
    /work/refenv/bin/python tools/ct2_to_safetensors.py CT2_DIR OUT_DIR --check CLIP.wav

--check (needs torch + transformers) validates the result as transformers sees it: config.json is
what WhisperConfig writes for it (save_pretrained of the loaded config, transformers_version aside),
WhisperForConditionalGeneration loads every weight (none missing, none unexpected), the processor
loads, and a 16 kHz mono 16-bit WAV is transcribed greedily (printed, with and without timestamps).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import wave
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from py_engine.formats.ct2_whisper import convert_whisper  # noqa: E402


def read_wav_16k(path: Path):
    import numpy as np

    with wave.open(str(path)) as clip:
        if (clip.getnchannels(), clip.getsampwidth(), clip.getframerate()) != (1, 2, 16000):
            raise SystemExit(f"{path}: expected 16 kHz mono 16-bit PCM")
        return np.frombuffer(clip.readframes(clip.getnframes()), dtype="<i2").astype(np.float32) / 32768


def check(folder: Path, clip: Path) -> None:
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration, WhisperProcessor

    with tempfile.TemporaryDirectory() as tmp:
        WhisperConfig.from_pretrained(folder).save_pretrained(tmp)
        theirs = json.loads((Path(tmp) / "config.json").read_text())
    ours = json.loads((folder / "config.json").read_text())
    theirs.pop("transformers_version", None)
    assert ours == theirs, {
        k: (ours.get(k), theirs.get(k)) for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k)
    }
    model, info = WhisperForConditionalGeneration.from_pretrained(folder, dtype=torch.float32, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    assert not problems, problems
    processor = WhisperProcessor.from_pretrained(folder)
    features = processor(read_wav_16k(clip), sampling_rate=16000, return_tensors="pt").input_features
    english = {"language": "en", "task": "transcribe"} if model.generation_config.is_multilingual else {}
    with torch.no_grad():  # (an English-only model takes no language)
        plain = model.eval().generate(features, **english)
        timed = model.generate(features, return_timestamps=True, **english)
    print("transcript:", processor.batch_decode(plain, skip_special_tokens=True)[0])
    print("timestamps:", processor.batch_decode(timed, decode_with_timestamps=True, skip_special_tokens=True)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="the CTranslate2 folder (model.bin, config.json, tokenizer.json)")
    parser.add_argument("out", type=Path, help="the HF folder to write")
    parser.add_argument("--check", type=Path, metavar="CLIP.wav", help="validate with transformers on this clip")
    args = parser.parse_args()
    convert_whisper(args.source, args.out)
    print(f"wrote {args.out}: {', '.join(sorted(p.name for p in args.out.iterdir()))}")
    if args.check:
        check(args.out, args.check)


if __name__ == "__main__":
    main()
