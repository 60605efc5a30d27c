"""Random-weight GGUF pairs in the layouts llama.cpp's users get for two vision-language models: a text GGUF
and its `mmproj` GGUF each, for benchmarks/vision_versus.py (speed does not depend on the values).

    python tools/vision_layouts.py tokenizer GEMMA3.gguf [--bench .gpu-bench]   # here, once
    python tools/vision_layouts.py write OUT_DIR [--scale full|tiny] [--models smolvlm,gemma3] [--bench DIR]
                                         [--layouts-only]

- smolvlm: SmolVLM-256M-Instruct. Text: its SmolLM2-135M-shaped Llama (30 layers, 576 wide, 9 heads of 64, 3 KV
  heads, 1536 FFN, untied head, vocabulary 49,280: SmolLM2's 49,152 and SmolVLM's 128 added tokens) in Q4_0, as
  llama-quantize writes it (Q4_0 matrices and embedding; the head's Q6_K falls back to Q8_0: 576 is no multiple of
  256). mmproj: SigLIP 512 px / patch 16, 12 layers, 768 wide, 12 heads, 3072 FFN, the pixel-shuffle connector
  (scale factor 4, 64 tokens a tile), preprocessing longest edge 2048, in f16 as the converter writes it.
- gemma3: Gemma-3-4B-it. Text: 34 layers, 2560 wide, 8 heads and 4 KV heads of 256, 10240 FFN, vocabulary 262,208
  (tied), sliding window 1024 with Gemma 3's every-6th-layer-full pattern (no per-layer key, as the converter
  writes none), linear RoPE scaling 8, in Q4_K_M as llama-quantize writes it (Q4_K matrices, Q6_K for attn_v and
  ffn_down in its use_more_bits layers and for the tied embedding). mmproj: SigLIP so400m 896 px / patch 14, 27
  layers, 1152 wide, 16 heads, 4304 FFN, the 4 x 4 average pool to 256 tokens, f16.

Metadata keys, their types and the tensor names are those llama.cpp's converter (convert_hf_to_gguf.py,
conversion/smolvlm.py and gemma.py of llama-cpp-python 0.3.36's vendored llama.cpp) wrote into the fixtures
tests/fixtures/smolvlm-gguf and gemma3vl-gguf, with the real models' values; the float types follow the
converter's rules (norms, biases and the `.embeddings.` tensors f32, mm.input_projection f16) and the quant mixes
llama-quantize's llama_tensor_get_type (src/llama-quant.cpp). Chat templates come from those fixtures (the real
models'). The tokenizers are real: SmolLM2's from .gpu-bench/layouts/smollm2.json (prepare.sh) with SmolVLM's
added tokens in its order (<global-img>, the 36 <row_R_col_C>, <fake_token_around_image> 49189, <image> 49190, 88
reserved ones named here as placeholders, <end_of_utterance> 49279), and Gemma 3's from any Gemma 3 GGUF
(`tokenizer` extracts it into .gpu-bench/layouts/gemma3-tokenizer.json.gz; the catalog's Gemma-3-270M has the
same 262,144 tokens) with <image_soft_token> and the converter's [PAD] tokens up to 262,208.

--scale tiny shrinks every width, layer count and picture size (the vocabularies stay real, so both engines
tokenize the same prompt as at full scale) for a run on a CPU; the pictures still split into SmolVLM's 4 x 4 tiles
and a global view, and Gemma 3 still pools 4 x 4. Weights are random and small (|w| below ~0.05: block scales
set so, norm weights near 1, biases near 0) so that logits stay finite in both engines.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from vision_random import write_gguf  # noqa: E402

F32, F16, Q4_0, Q8_0, Q4_K, Q6_K = 0, 1, 2, 8, 12, 14  # GGMLQuantizationType
UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9  # GGUFValueType
UNUSED, CONTROL = 5, 3  # llama.cpp's token types

SPECS = {
    "smolvlm": {
        "full": {
            "text": dict(layers=30, hidden=576, ff=1536, heads=9, kv=3, head_dim=64),
            "vision": dict(image=512, patch=16, hidden=768, ff=3072, layers=12, heads=12, scale=4),
        },
        "tiny": {  # 128 px tiles of 8 x 8 patches, 4 tokens a tile; the longest edge 4 tiles as at full scale
            "text": dict(layers=2, hidden=64, ff=128, heads=2, kv=1, head_dim=32),
            "vision": dict(image=128, patch=16, hidden=64, ff=128, layers=2, heads=2, scale=4),
        },
    },
    "gemma3": {
        "full": {
            "text": dict(layers=34, hidden=2560, ff=10240, heads=8, kv=4, head_dim=256),
            "vision": dict(image=896, patch=14, hidden=1152, ff=4304, layers=27, heads=16, scale=4),
        },
        "tiny": {  # widths multiples of 256 (Q4_K rows); 6 layers: five sliding, one full; 16 picture tokens
            "text": dict(layers=6, hidden=256, ff=512, heads=2, kv=1, head_dim=128),
            "vision": dict(image=224, patch=14, hidden=64, ff=128, layers=2, heads=2, scale=4),
        },
    },
}
NAMES = {"smolvlm": "smolvlm-256m", "gemma3": "gemma3-4b"}
FIXTURES = {
    "smolvlm": ROOT / "tests/fixtures/smolvlm-gguf/smolvlm-tiny-f32.gguf",
    "gemma3": ROOT / "tests/fixtures/gemma3vl-gguf/gemma3vl-tiny-f32.gguf",
}
ROW_COL = [f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)]


def kv(kind: int, value) -> dict:
    return {"type": kind, "value": value}


def array(sub: int, value: list) -> dict:
    return {"type": "array", "sub": sub, "value": value}


def tensor(name: str, shape: list[int], kind: int) -> dict:
    return {"name": name, "shape": shape, "type": kind}  # shape in ggml order: ne0 (the row) first


def paths(out: Path, model: str, scale: str) -> tuple[Path, Path]:
    stem = NAMES[model] + ("" if scale == "full" else f"-{scale}")
    return out / f"{stem}.gguf", out / f"mmproj-{stem}.gguf"


# ---- tokenizers ----


def chat_template(model: str) -> str:
    from gguf import GGUFReader

    field = GGUFReader(FIXTURES[model]).fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode()


def smolvlm_tokenizer(bench: Path) -> dict:
    """SmolLM2's vocabulary and merges with SmolVLM-256M's 128 added tokens (control tokens, as the
    converter typed them in the fixture); bos <|im_start|>, eos <end_of_utterance>, as the fixture's."""
    smollm2 = json.loads((bench / "layouts" / "smollm2.json").read_text())["kv"]
    added = ["<global-img>", *ROW_COL, "<fake_token_around_image>", "<image>"]
    added += [f"<|reserved_special_token_{i}|>" for i in range(128 - len(added) - 1)] + ["<end_of_utterance>"]
    tokens = smollm2["tokenizer.ggml.tokens"]["value"] + added
    types = smollm2["tokenizer.ggml.token_type"]["value"] + [CONTROL] * len(added)
    return {
        "tokenizer.ggml.model": kv(STRING, "gpt2"),
        "tokenizer.ggml.pre": kv(STRING, "smollm"),
        "tokenizer.ggml.tokens": array(STRING, tokens),
        "tokenizer.ggml.token_type": array(INT32, types),
        "tokenizer.ggml.merges": array(STRING, smollm2["tokenizer.ggml.merges"]["value"]),
        "tokenizer.ggml.bos_token_id": kv(UINT32, 1),
        "tokenizer.ggml.eos_token_id": kv(UINT32, len(tokens) - 1),
        "tokenizer.ggml.unknown_token_id": kv(UINT32, 0),
        "tokenizer.ggml.padding_token_id": kv(UINT32, 2),
        "tokenizer.chat_template": kv(STRING, chat_template("smolvlm")),
    }


def gemma3_tokenizer(bench: Path, vocab: int) -> dict:
    """A Gemma 3 GGUF's tokenizer keys as `tokenizer` saved them, grown as the converter grows Gemma-3-4B's
    262,144 SentencePiece tokens: <image_soft_token> (262144, its added_tokens_decoder's special token), then
    [PAD<id>] tokens of type unused and score -1000 up to the config's vocab_size."""
    path = bench / "layouts" / "gemma3-tokenizer.json.gz"
    if not path.exists():
        sys.exit(
            f"{path}: missing; make it once on a machine with a Gemma 3 GGUF: python tools/vision_layouts.py "
            'tokenizer "$(.venv/bin/python -m py_engine fetch gemma-3-270m | tail -1)"'
        )
    saved = json.loads(gzip.decompress(path.read_bytes()))
    tokens, scores, types = (saved[f"tokenizer.ggml.{k}"]["value"] for k in ("tokens", "scores", "token_type"))
    extra = ["<image_soft_token>"] + [f"[PAD{i}]" for i in range(len(tokens) + 1, vocab)]
    grown = {
        "tokenizer.ggml.tokens": array(STRING, tokens + extra),
        "tokenizer.ggml.scores": array(FLOAT32, scores + [-1000.0] * len(extra)),
        "tokenizer.ggml.token_type": array(INT32, types + [CONTROL] + [UNUSED] * (len(extra) - 1)),
    }
    return {**saved, **grown, "tokenizer.chat_template": kv(STRING, chat_template("gemma3"))}


def save_tokenizer(src: Path, bench: Path) -> Path:
    """The tokenizer.* keys of a GGUF (gguf_shape.py's JSON form), gzipped into bench/layouts/."""
    from gguf import GGUFReader, GGUFValueType

    reader, saved = GGUFReader(src), {}
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer.") or field.name == "tokenizer.chat_template":
            continue
        kind = field.types[0]
        if kind == GGUFValueType.ARRAY:
            sub = field.types[-1]
            parts = [field.parts[i] for i in field.data]
            values = (
                [bytes(p).decode("utf-8") for p in parts]
                if sub == GGUFValueType.STRING
                else [p[0].item() for p in parts]
            )
            saved[field.name] = array(int(sub), values)
        elif kind == GGUFValueType.STRING:
            saved[field.name] = kv(int(kind), bytes(field.parts[field.data[0]]).decode("utf-8"))
        else:
            saved[field.name] = kv(int(kind), field.parts[field.data[0]][0].item())
    if len(saved.get("tokenizer.ggml.tokens", {}).get("value", [])) != 262144:
        sys.exit(f"{src}: not a Gemma 3 vocabulary (262,144 tokens)")
    out = bench / "layouts" / "gemma3-tokenizer.json.gz"
    out.write_bytes(gzip.compress(json.dumps(saved).encode(), 6))
    return out


# ---- layouts: {"kv": ..., "tensors": [...]}, gguf_shape.py's form ----


def use_more_bits(i: int, n: int) -> bool:
    """llama-quantize's choice of the layers whose attn_v and ffn_down Q4_K_M keeps in Q6_K."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def smolvlm_text(t: dict, bench: Path, scale: str) -> dict:
    tok = smolvlm_tokenizer(bench)
    vocab, h = len(tok["tokenizer.ggml.tokens"]["value"]), t["hidden"]
    meta = {
        "general.architecture": kv(STRING, "llama"),
        "general.type": kv(STRING, "model"),
        "general.name": kv(STRING, f"SmolVLM 256M Instruct ({scale}, random weights)"),
        "llama.block_count": kv(UINT32, t["layers"]),
        "llama.context_length": kv(UINT32, 8192),
        "llama.embedding_length": kv(UINT32, h),
        "llama.feed_forward_length": kv(UINT32, t["ff"]),
        "llama.attention.head_count": kv(UINT32, t["heads"]),
        "llama.attention.head_count_kv": kv(UINT32, t["kv"]),
        "llama.rope.freq_base": kv(FLOAT32, 100000.0),
        "llama.attention.layer_norm_rms_epsilon": kv(FLOAT32, 1e-5),
        "llama.attention.key_length": kv(UINT32, t["head_dim"]),
        "llama.attention.value_length": kv(UINT32, t["head_dim"]),
        "general.file_type": kv(UINT32, 2),  # LLAMA_FTYPE_MOSTLY_Q4_0
        "llama.vocab_size": kv(UINT32, vocab),
        "llama.rope.dimension_count": kv(UINT32, t["head_dim"]),
        "general.quantization_version": kv(UINT32, 2),
        **tok,
    }
    q, kvw = t["heads"] * t["head_dim"], t["kv"] * t["head_dim"]
    # The head: Q6_K unless its rows are no multiple of 256, then Q8_0 (llama-quantize's fallback).
    tensors = [tensor("token_embd.weight", [h, vocab], Q4_0), tensor("output_norm.weight", [h], F32)]
    tensors.append(tensor("output.weight", [h, vocab], Q6_K if h % 256 == 0 else Q8_0))
    for i in range(t["layers"]):
        b = f"blk.{i}."
        tensors += [
            tensor(b + "attn_norm.weight", [h], F32),
            tensor(b + "attn_q.weight", [h, q], Q4_0),
            tensor(b + "attn_k.weight", [h, kvw], Q4_0),
            tensor(b + "attn_v.weight", [h, kvw], Q4_0),
            tensor(b + "attn_output.weight", [q, h], Q4_0),
            tensor(b + "ffn_norm.weight", [h], F32),
            tensor(b + "ffn_gate.weight", [h, t["ff"]], Q4_0),
            tensor(b + "ffn_up.weight", [h, t["ff"]], Q4_0),
            tensor(b + "ffn_down.weight", [t["ff"], h], Q4_0),
        ]
    return {"kv": meta, "tensors": tensors}


def gemma3_text(t: dict, bench: Path, scale: str) -> dict:
    tok = gemma3_tokenizer(bench, 262208)
    vocab, h, n = len(tok["tokenizer.ggml.tokens"]["value"]), t["hidden"], t["layers"]
    meta = {
        "general.architecture": kv(STRING, "gemma3"),
        "general.type": kv(STRING, "model"),
        "general.name": kv(STRING, f"Gemma 3 4B It ({scale}, random weights)"),
        "gemma3.block_count": kv(UINT32, n),
        "gemma3.context_length": kv(UINT32, 131072),
        "gemma3.embedding_length": kv(UINT32, h),
        "gemma3.feed_forward_length": kv(UINT32, t["ff"]),
        "gemma3.attention.head_count": kv(UINT32, t["heads"]),
        "gemma3.attention.head_count_kv": kv(UINT32, t["kv"]),
        "gemma3.rope.scaling.type": kv(STRING, "linear"),
        "gemma3.rope.scaling.factor": kv(FLOAT32, 8.0),
        "gemma3.rope.freq_base": kv(FLOAT32, 1000000.0),
        "gemma3.rope.freq_base_swa": kv(FLOAT32, 10000.0),
        "gemma3.attention.layer_norm_rms_epsilon": kv(FLOAT32, 1e-6),
        "gemma3.attention.key_length": kv(UINT32, t["head_dim"]),
        "gemma3.attention.value_length": kv(UINT32, t["head_dim"]),
        "general.file_type": kv(UINT32, 15),  # LLAMA_FTYPE_MOSTLY_Q4_K_M
        "gemma3.attention.sliding_window": kv(UINT32, 1024),
        "general.quantization_version": kv(UINT32, 2),
        **tok,
    }
    q, kvw, d = t["heads"] * t["head_dim"], t["kv"] * t["head_dim"], t["head_dim"]
    tensors = [tensor("token_embd.weight", [h, vocab], Q6_K), tensor("output_norm.weight", [h], F32)]
    for i in range(n):
        b, more = f"blk.{i}.", Q6_K if use_more_bits(i, n) else Q4_K
        tensors += [
            tensor(b + "attn_norm.weight", [h], F32),
            tensor(b + "attn_q.weight", [h, q], Q4_K),
            tensor(b + "attn_k.weight", [h, kvw], Q4_K),
            tensor(b + "attn_v.weight", [h, kvw], more),
            tensor(b + "attn_q_norm.weight", [d], F32),
            tensor(b + "attn_k_norm.weight", [d], F32),
            tensor(b + "attn_output.weight", [q, h], Q4_K),
            tensor(b + "post_attention_norm.weight", [h], F32),
            tensor(b + "ffn_norm.weight", [h], F32),
            tensor(b + "ffn_gate.weight", [h, t["ff"]], Q4_K),
            tensor(b + "ffn_up.weight", [h, t["ff"]], Q4_K),
            tensor(b + "ffn_down.weight", [t["ff"], h], more),
            tensor(b + "post_ffw_norm.weight", [h], F32),
        ]
    return {"kv": meta, "tensors": tensors}


def mmproj(model: str, v: dict, text_width: int, scale: str) -> dict:
    """The clip file: SigLIP's tensors (f16 matrices; f32 norms, biases and embeddings) and the projector."""
    h, p, side = v["hidden"], v["patch"], v["image"] // v["patch"]
    meta = {
        "general.architecture": kv(STRING, "clip"),
        "general.type": kv(STRING, "mmproj"),
        "general.name": kv(STRING, f"{NAMES[model]} mmproj ({scale}, random weights)"),
        "general.file_type": kv(UINT32, 1),  # LLAMA_FTYPE_MOSTLY_F16
        "clip.has_vision_encoder": kv(BOOL, True),
        "clip.vision.projection_dim": kv(UINT32, text_width),
        "clip.vision.image_size": kv(UINT32, v["image"]),
        "clip.vision.patch_size": kv(UINT32, p),
        "clip.vision.embedding_length": kv(UINT32, h),
        "clip.vision.feed_forward_length": kv(UINT32, v["ff"]),
        "clip.vision.block_count": kv(UINT32, v["layers"]),
        "clip.vision.attention.head_count": kv(UINT32, v["heads"]),
        "clip.vision.image_mean": array(FLOAT32, [0.5, 0.5, 0.5]),
        "clip.vision.image_std": array(FLOAT32, [0.5, 0.5, 0.5]),
        "clip.projector_type": kv(STRING, "idefics3" if model == "smolvlm" else "gemma3"),
        "clip.vision.attention.layer_norm_epsilon": kv(FLOAT32, 1e-6),
        "clip.use_gelu": kv(BOOL, True),
    }
    if model == "smolvlm":  # the converter writes the scale factor and the processor's longest edge
        meta["clip.vision.projector.scale_factor"] = kv(UINT32, v["scale"])
        meta["clip.vision.preproc_image_size"] = kv(UINT32, 4 * v["image"])
    elif v["scale"] != 4:  # Gemma 3: only where it is not llama.cpp's default 4
        meta["clip.vision.projector.scale_factor"] = kv(UINT32, v["scale"])
    meta["general.quantization_version"] = kv(UINT32, 2)
    if model == "smolvlm":
        tensors = [tensor("mm.model.fc.weight", [h * v["scale"] ** 2, text_width], F16)]
    else:
        tensors = [
            tensor("mm.input_projection.weight", [text_width, h], F16),
            tensor("mm.soft_emb_norm.weight", [h], F32),
        ]
    tensors += [
        tensor("v.patch_embd.bias", [h], F32),
        tensor("v.patch_embd.weight", [p, p, 3, h], F32),
        tensor("v.position_embd.weight", [h, side * side], F32),
    ]
    for i in range(v["layers"]):
        b = f"v.blk.{i}."
        for part in ("ln1", "ln2"):
            tensors += [tensor(b + part + ".bias", [h], F32), tensor(b + part + ".weight", [h], F32)]
        tensors += [
            tensor(b + "ffn_up.bias", [v["ff"]], F32),
            tensor(b + "ffn_up.weight", [h, v["ff"]], F16),
            tensor(b + "ffn_down.bias", [h], F32),
            tensor(b + "ffn_down.weight", [v["ff"], h], F16),
        ]
        for part in ("attn_k", "attn_out", "attn_q", "attn_v"):
            tensors += [tensor(b + part + ".bias", [h], F32), tensor(b + part + ".weight", [h, h], F16)]
    tensors += [tensor("v.post_ln.bias", [h], F32), tensor("v.post_ln.weight", [h], F32)]
    return {"kv": meta, "tensors": tensors}


def layouts(model: str, scale: str, bench: Path) -> tuple[dict, dict]:
    spec = SPECS[model][scale]
    text = (smolvlm_text if model == "smolvlm" else gemma3_text)(spec["text"], bench, scale)
    return text, mmproj(model, spec["vision"], spec["text"]["hidden"], scale)


def gguf_py(bench: Path) -> None:
    """llama.cpp's own gguf-py (the source archive's), ahead of any installed `gguf`."""
    import tarfile

    target = Path("/tmp/wisp-gguf-py")
    if not (target / "gguf-py").is_dir():
        with tarfile.open(bench / "src.tgz") as archive:
            archive.extractall(target, members=[m for m in archive.getmembers() if m.name.startswith("gguf-py")])
    sys.path.insert(0, str(target / "gguf-py"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    tok = sub.add_parser("tokenizer", help="save a Gemma 3 GGUF's tokenizer into BENCH/layouts/")
    tok.add_argument("gguf", type=Path)
    write = sub.add_parser("write", help="write the random GGUF pairs into OUT")
    write.add_argument("out", type=Path)
    write.add_argument("--scale", choices=["full", "tiny"], default="full")
    write.add_argument("--models", default="smolvlm,gemma3")
    write.add_argument("--layouts-only", action="store_true", help="write the layouts as JSON, no GGUFs")
    for p in (tok, write):
        p.add_argument("--bench", type=Path, default=ROOT / ".gpu-bench")
    args = parser.parse_args()
    gguf_py(args.bench)
    if args.command == "tokenizer":
        print(save_tokenizer(args.gguf, args.bench))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    report = {}
    for model in args.models.split(","):
        text_path, mmproj_path = paths(args.out, model, args.scale)
        for layout, path in zip(layouts(model, args.scale, args.bench), (text_path, mmproj_path)):
            if args.layouts_only:
                path.with_suffix(".json").write_text(json.dumps(layout))
            elif not path.exists():  # random weights of one layout are as good as another's: kept
                write_gguf(layout, path)
        report[model] = {"text": str(text_path), "mmproj": str(mmproj_path)}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
