"""Kani-TTS-2 speaker embeddings (torch .pt files, as kani-tts-2's KaniTTS.load_speaker_embedding reads
them) -> the voices.safetensors a Kani-TTS-2 folder gives Wisp's Speaker (py_engine/speech/kani_files.py).

    /work/refenv/bin/python tools/kani_voices_to_safetensors.py MODEL_DIR voice1.pt [voice2.pt ...]

Each voice is named by its file's stem and must hold speaker_emb_dim numbers (config.json's, 128 by
default; shape [dim] or [1, dim]). A .pt file is a pickle: it is read with torch.load's weights_only
mode (torch's restricted unpickler: tensors and plain containers only), here and never by the engine.
Voices already in MODEL_DIR/voices.safetensors are kept unless a file of the same name replaces them.
"""

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="the Kani-TTS-2 folder (its config.json says speaker_emb_dim)")
    parser.add_argument("voices", type=Path, nargs="+", help=".pt files, one speaker embedding each")
    args = parser.parse_args()
    dim = json.loads((args.model / "config.json").read_text()).get("speaker_emb_dim", 128)
    out = args.model / "voices.safetensors"
    voices = load_file(str(out)) if out.exists() else {}
    for path in args.voices:
        tensor = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(tensor, torch.Tensor) or tensor.numel() != dim or tensor.dim() > 2:
            raise SystemExit(f"{path}: not one speaker embedding of {dim} numbers")
        voices[path.stem] = tensor.reshape(dim).float().contiguous()
    save_file(voices, str(out))
    print(f"{out}: {', '.join(sorted(voices))}")


if __name__ == "__main__":
    main()
