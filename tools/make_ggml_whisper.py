"""An HF Whisper folder (config.json, model.safetensors, tokenizer.json) -> whisper.cpp's model file
(the legacy ggml format py_engine/formats/ggml_whisper.py reads), written as whisper.cpp's own
models/convert-h5-to-ggml.py writes it: the hyperparameters (n_text_ctx from max_target_positions),
the Slaney mel filters (py_engine/speech/log_mel.py's, as WhisperFeatureExtractor's), the BPE
vocabulary as bytes, then every tensor but proj_out (tied) under whisper.cpp's names, in float16
except the 1-D ones, the conv biases (as [n, 1]) and the positional embeddings, which stay float32.

    python tools/make_ggml_whisper.py HF_DIR out.bin [--f32 | --quantize q8_0|q5_0]

--quantize writes the matrices as whisper.cpp's quantize tool does (its 2-D tensors but the positional
embeddings, in ggml's Q8_0 or Q5_0 blocks as ggml's reference quantize_row_q8_0 / _q5_0 round them;
ftype = 2000 + the type: quantization version 2), the rest in float16 / float32 as above.

For the tests (tests/test_ggml_whisper.py) and the speed comparison with whisper.cpp
(benchmarks/versus_whispercpp.py), where no whisper.cpp model file can be downloaded.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from py_engine.formats.ggml_whisper import HPARAMS, MAGIC, ggml_name  # noqa: E402
from py_engine.formats.safetensors import read_header  # noqa: E402
from py_engine.speech.log_mel import mel_filters  # noqa: E402

NUMPY = {"F32": np.float32, "F16": np.float16}
F32_NAMES = {"encoder.conv1.bias", "encoder.conv2.bias", "encoder.positional_embedding", "decoder.positional_embedding"}


def byte_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in for each byte (tokenizer.json's vocabulary), reversed."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in printable]
    return {chr(b): b for b in printable} | {chr(256 + i): b for i, b in enumerate(extra)}


def read_tensor(info) -> np.ndarray:
    with open(info.path, "rb") as file:
        file.seek(info.start)
        raw = file.read(info.nbytes)
    if info.dtype == "BF16":
        return (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(info.shape)
    return np.frombuffer(raw, NUMPY[info.dtype]).reshape(info.shape)


# --quantize: ggml's type, the file's ftype (whisper.cpp's ggml_ftype) and the block's writer.
QUANTIZED = {"q8_0": (8, 7), "q5_0": (6, 8)}
QNT_VERSION = 2
BLOCK = 32


def quantize(data: np.ndarray, kind: str) -> bytes:
    """Rows of `data` (K a multiple of 32) as ggml's `kind` blocks (ggml's reference rounding)."""
    x = data.astype(np.float32).reshape(-1, BLOCK)
    if kind == "q8_0":
        d = np.abs(x).max(axis=1) / np.float32(127)
        v = x * np.divide(1, d, out=np.zeros(len(x), np.float32), where=d != 0)[:, None]
        blocks = np.empty(len(x), [("d", "<f2"), ("qs", "i1", BLOCK)])
        blocks["d"], blocks["qs"] = d.astype(np.float16), np.sign(v) * np.floor(np.abs(v) + 0.5)  # C's roundf
        return blocks.tobytes()
    signed_max = x[np.arange(len(x)), np.abs(x).argmax(axis=1)]
    d = signed_max / np.float32(-16)
    inv = np.divide(1, d, out=np.zeros(len(x), np.float32), where=d != 0)
    q = np.minimum(31, (x * inv[:, None] + 16.5).astype(np.int8)).astype(np.uint8)
    half = BLOCK // 2
    high = ((q >> 4).astype(np.uint32) << np.arange(BLOCK, dtype=np.uint32)).sum(axis=1, dtype=np.uint32)
    blocks = np.empty(len(x), [("d", "<f2"), ("qh", "<u4"), ("qs", "u1", half)])
    blocks["d"], blocks["qh"], blocks["qs"] = d.astype(np.float16), high, (q[:, :half] & 15) | ((q[:, half:] & 15) << 4)
    return blocks.tobytes()


def dequantize(raw: bytes, kind: str, shape) -> np.ndarray:
    """quantize's inverse: the float32 values ggml's blocks stand for."""
    if kind == "q8_0":
        blocks = np.frombuffer(raw, [("d", "<f2"), ("qs", "i1", BLOCK)])
        q = blocks["qs"].astype(np.float32)
    else:
        blocks = np.frombuffer(raw, [("d", "<f2"), ("qh", "<u4"), ("qs", "u1", BLOCK // 2)])
        low = np.concatenate([blocks["qs"] & 15, blocks["qs"] >> 4], axis=1).astype(np.int32)
        high = (blocks["qh"][:, None] >> np.arange(BLOCK, dtype=np.uint32)) & 1
        q = (low | (high.astype(np.int32) << 4)).astype(np.float32) - 16
    return (blocks["d"].astype(np.float32)[:, None] * q).reshape(shape)


def write_ggml(folder: Path, out: Path, f16: bool = True, quantized: str | None = None) -> None:
    config = json.loads((folder / "config.json").read_text())
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    tensors = read_header(folder / "model.safetensors")
    values = {
        "n_vocab": config["vocab_size"],
        "n_audio_ctx": config["max_source_positions"],
        "n_audio_state": config["d_model"],
        "n_audio_head": config["encoder_attention_heads"],
        "n_audio_layer": config["encoder_layers"],
        "n_text_ctx": config["max_target_positions"],
        "n_text_state": config["d_model"],
        "n_text_head": config["decoder_attention_heads"],
        "n_text_layer": config["decoder_layers"],
        "n_mels": config["num_mel_bins"],
        "ftype": QNT_VERSION * 1000 + QUANTIZED[quantized][1] if quantized else int(f16),
    }
    filters = np.asarray(mel_filters(config["num_mel_bins"]), np.float32)
    decode = byte_decoder()
    tokens = [bytes(decode[c] for c in text) for text, _ in sorted(vocab.items(), key=lambda item: item[1])]
    with open(out, "wb") as file:
        file.write(struct.pack("<I", MAGIC) + struct.pack(f"<{len(HPARAMS)}i", *(values[k] for k in HPARAMS)))
        file.write(struct.pack("<2i", *filters.shape) + filters.tobytes())
        file.write(struct.pack("<i", len(tokens)))
        for token in tokens:
            file.write(struct.pack("<i", len(token)) + token)
        for name, info in tensors.items():
            if name == "proj_out.weight":
                continue
            ggml = ggml_name(name)
            if ggml is None:
                raise SystemExit(f"{info.path}: {name} is none of Whisper's tensors")
            data = read_tensor(info).astype(np.float32)
            if ggml in ("encoder.conv1.bias", "encoder.conv2.bias"):
                data = data.reshape(-1, 1)
            half = (f16 or quantized) and data.ndim > 1 and ggml not in F32_NAMES
            data = data.astype(np.float16 if half else np.float32)
            ggml_type, body = int(half), data.tobytes()
            if quantized and data.ndim == 2 and "positional" not in ggml and data.shape[1] % BLOCK == 0:
                ggml_type, body = QUANTIZED[quantized][0], quantize(data, quantized)
            raw_name = ggml.encode()
            file.write(struct.pack("<3i", data.ndim, len(raw_name), ggml_type))
            file.write(struct.pack(f"<{data.ndim}i", *reversed(data.shape)) + raw_name + body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--f32", action="store_true", help="every tensor in float32")
    parser.add_argument("--quantize", choices=sorted(QUANTIZED), help="the matrices in ggml's blocks")
    args = parser.parse_args()
    write_ggml(args.folder, args.out, f16=not args.f32, quantized=args.quantize)


if __name__ == "__main__":
    main()
