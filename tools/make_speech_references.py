"""Real speech for the real-model tests: public-domain clips cut from a LibriVox reading of
A Tale of Two Cities (as the moonshine-voice wheel carries it), with transformers' Whisper base
transcripts. Writes tests/fixtures/speech/ (see its README.md):

- CLIPS' WAVs: 16 kHz mono 16-bit PCM, cut at pauses of the 48 kHz original and resampled by
  scipy's polyphase filter (resample_poly 1:3, its default Kaiser window);
- whisper_base.json: for each clip, WhisperForConditionalGeneration.generate (greedy: one beam, no
  sampling, no temperature fallback) of the catalog's whisper-base folder in float32 on the
  features of WhisperProcessor, fed int16 / 32768: the decoder's prompt ids, the generated ids and
  the text, without timestamps and with them (the ids, the text with <|t|> marks and the offsets
  transformers' tokenizer reads off the ids), both with language "en" given; and the language
  transformers detects when none is given.

    /work/refenv/bin/python tools/make_speech_references.py [--wheel moonshine_voice-0.1.5-*.whl] [--model DIR]

Without --wheel it runs `pip download moonshine-voice==0.1.5 --no-deps`; without --model it fetches
the catalog's whisper-base (py_engine.model_cache).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import subprocess
import sys
import tempfile
import wave
import zipfile
from pathlib import Path

import numpy as np
import torch
from scipy.signal import resample_poly

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "tests" / "fixtures" / "speech"
SOURCE_PACKAGE = "moonshine-voice==0.1.5"
SOURCE_MEMBER = "moonshine_voice/assets/two_cities.wav"
# name -> (start, end) in seconds of the original, each at a pause (RMS over 50 ms below 0.003).
CLIPS = {"two_cities_best_of_times.wav": (0.70, 6.62), "two_cities_other_way.wav": (26.30, 32.50)}
RATE = 16000


def source_wav(wheel: Path | None) -> tuple[np.ndarray, int]:
    if wheel is None:
        folder = Path(tempfile.mkdtemp(prefix="moonshine-"))
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(folder)]
        subprocess.run([*pip, SOURCE_PACKAGE], check=True, stdout=subprocess.DEVNULL)
        (wheel,) = folder.glob("moonshine_voice-*.whl")
    with zipfile.ZipFile(wheel) as archive, wave.open(io.BytesIO(archive.read(SOURCE_MEMBER))) as clip:
        assert (clip.getnchannels(), clip.getsampwidth()) == (1, 2), "mono 16-bit expected"
        pcm = np.frombuffer(clip.readframes(clip.getnframes()), dtype="<i2").astype(np.float64) / 32768
        return pcm, clip.getframerate()


def write_clip(path: Path, samples: np.ndarray) -> np.ndarray:
    pcm = np.clip(np.round(samples * 32768), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes(pcm.tobytes())
    return pcm.astype(np.float32) / 32768


def generate(model, features, **kwargs) -> list[int]:
    with torch.no_grad():
        out = model.generate(features, num_beams=1, do_sample=False, **kwargs)
    return [int(i) for i in out[0]]


def transcripts(model, processor, audio: np.ndarray) -> dict:
    tokenizer = processor.tokenizer
    features = processor(audio, sampling_rate=RATE, return_tensors="pt").input_features
    prompt = tokenizer.convert_tokens_to_ids(["<|startoftranscript|>", "<|en|>", "<|transcribe|>"])
    plain = generate(model, features, language="en", task="transcribe")
    timed = generate(model, features, language="en", task="transcribe", return_timestamps=True)
    with torch.no_grad():
        detected = int(model.detect_language(input_features=features)[0])
    offsets = tokenizer.decode(timed, output_offsets=True)["offsets"]
    return {
        "prompt_ids": prompt + tokenizer.convert_tokens_to_ids(["<|notimestamps|>"]),
        "ids": plain,
        "text": tokenizer.decode(plain, skip_special_tokens=True),
        "timestamps": {
            "prompt_ids": prompt,
            "ids": timed,
            "text": tokenizer.decode(timed, skip_special_tokens=True, decode_with_timestamps=True),
            "segments": [{"start": o["timestamp"][0], "end": o["timestamp"][1], "text": o["text"]} for o in offsets],
        },
        "detected_language": tokenizer.convert_ids_to_tokens(detected),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, help=f"the {SOURCE_PACKAGE} wheel (else pip downloads it)")
    parser.add_argument("--model", type=Path, help="an HF Whisper base folder (else the catalog's whisper-base)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    import transformers
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    if args.model is None:
        from py_engine.model_cache import ensure_model

        args.model = ensure_model("whisper-base")
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration.from_pretrained(args.model, dtype=torch.float32).eval()
    processor = WhisperProcessor.from_pretrained(args.model)
    source, rate = source_wav(args.wheel)
    assert rate == 3 * RATE, rate
    args.out.mkdir(parents=True, exist_ok=True)
    reference = {
        "model": "whisper-base (the catalog's folder, converted from CTranslate2's float16, run in float32)",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "source": f"{SOURCE_PACKAGE} {SOURCE_MEMBER}, 48 kHz",
        "clips": {},
    }
    for name, (start, end) in CLIPS.items():
        cut = resample_poly(source[round(start * rate) : round(end * rate)], 1, 3)
        audio = write_clip(args.out / name, cut)
        digest = hashlib.sha256((args.out / name).read_bytes()).hexdigest()
        entry = {"source_seconds": [start, end], "samples": len(audio), "sha256": digest}
        reference["clips"][name] = {**entry, **transcripts(model, processor, audio)}
        print(name, json.dumps(reference["clips"][name]["text"]))
    text = re.sub(r"\[[\d,\s.]*\]", lambda m: json.dumps(json.loads(m.group())), json.dumps(reference, indent=1))
    (args.out / "whisper_base.json").write_text(text + "\n")  # each list of numbers on one line


if __name__ == "__main__":
    main()
