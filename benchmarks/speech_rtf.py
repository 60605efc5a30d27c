"""Real-time factors of Wisp's speech on one GPU: text to speech (Kani-TTS-2's codec-LM + NanoCodec's
decoder, streamed as the Speaker streams) and Moonshine base's transcription of the speech clips.
Prints one JSON object.

Here, once (fills the ignored folder .speech-bench/ with Moonshine base's tokenizer.json, from the
catalog's moonshine-base; the loader debs and wgpu-py wheels come from .whisper-bench/, which
benchmarks/versus_whispercpp.py --prepare makes):

    .venv/bin/python benchmarks/speech_rtf.py --prepare

On the GPU machine, from the project root, with .whisper-bench and .speech-bench carried:

    python3 benchmarks/speech_rtf.py [--seconds 10]

and here on lavapipe with tiny shapes (the same code paths, to check the script):

    .venv/bin/python benchmarks/speech_rtf.py --tiny

The weights are random in the real layouts (the real ones cannot travel: Kani-TTS-2 is ~740 MB,
the converted Moonshine base 246 MB; speed does not depend on the values), written on the GPU machine:
- Kani-TTS-2 (kani-tts-2-en): its LFM2-350M backbone (hidden 1024, 16 layers of which 6 attention,
  16 heads / 8 KV heads of 64, feed-forward 4608: LFM2's auto-adjusted 6656, vocabulary 80,538 = the
  text's 64,400 + 10 specials + 4 codebooks x 4,032 codes), bf16, learnable RoPE, speaker projection
  128 -> 1024; NanoCodec 22 kHz 0.6 kbps 12.5 fps's decoder (864 base channels, upsampling
  [7, 7, 6, 3, 2]: 1,764 samples a frame), f32 as tools/nanocodec_to_safetensors.py writes it. The
  text's tokens come from tests/fixtures/kani-f32's small tokenizer (the prompt is a few dozen tokens
  either way). Random weights may never write END_OF_SPEECH (its embedding row is zero, the head
  tied: its logit is 0 among 4,032 codes'): speech is bounded by max_frames (--seconds x 12.5 frames).
  Sampling is kani-tts-2's (temperature 1, top-p 0.95, repetition penalty 1.1), on the GPU.
- Moonshine base: the catalog's config.json (hidden 416, 8 + 8 layers, 8 heads of 52, vocabulary
  32,768), f32 like the catalog's conversion, its tokenizer; the end-of-text row zero (tied), so each
  clip decodes as many tokens as transformers' transcript of the real model has
  (tests/fixtures/moonshine-base/reference.json).

Speech: audio seconds / wall seconds of a whole speak() (prompt, frames, codec windows, PCM read
back), the time to its first PCM chunk, and the wall split into the codec's decode calls and the
rest (the codec-LM's frames: 4 tokens a frame, each drawn under the frame mask); the codec alone on
one full window (its 28 context frames + 32 new). Transcription: a clip's transcribe() wall, its
window's encode, the first token (encode included) and ms a later token. Medians of warm runs (the
first run compiles the pipelines).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import struct
import sys
import time
import wave
from array import array
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
BENCH = ROOT / ".speech-bench"
FIXTURES = ROOT / "tests" / "fixtures"
CLIPS = FIXTURES / "speech"
TEXT = "Speech starts before the sentence ends, because every frame is decoded as soon as it is written."

# LiquidAI/LFM2-350M's config.json, with Kani-TTS-2's vocabulary and keys (kani-tts-2's TTSConfig).
LFM2_350M = dict(
    model_type="lfm2",
    hidden_size=1024,
    intermediate_size=6656,
    block_auto_adjust_ff_dim=True,
    block_ffn_dim_multiplier=1.0,
    block_multiple_of=256,
    num_hidden_layers=16,
    num_attention_heads=16,
    num_key_value_heads=8,
    layer_types=["conv", "conv", "full_attention"] * 2 + ["conv", "conv"] + ["full_attention", "conv"] * 4,
    conv_L_cache=3,
    conv_bias=False,
    norm_eps=1e-5,
    max_position_embeddings=128000,
    rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"},
    tie_word_embeddings=True,
    bos_token_id=1,
    pad_token_id=0,
)
KANI = dict(
    architectures=["KaniTTS2ForCausalLM"],
    vocab_size=80538,
    eos_token_id=64402,
    text_vocab_size=64400,
    audio_tokens_start=64410,
    tokens_per_frame=4,
    audio_step=1.0,
    use_learnable_rope=True,
    alpha_min=0.1,
    alpha_max=2.0,
    speaker_emb_dim=128,
)
# Tiny (--tiny, lavapipe): the same layout scaled down; the vocabulary stays real.
TINY_LFM2 = dict(
    LFM2_350M, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2
)
TINY_LFM2["layer_types"] = ["conv", "full_attention", "conv", "full_attention"]
NANOCODEC = dict(
    json.loads((FIXTURES / "nanocodec-f32" / "config.json").read_text()),
    base_channels=864,
    up_sample_rates=[7, 7, 6, 3, 2],
    samples_per_frame=1764,
)
MOONSHINE_BASE = dict(
    architectures=["MoonshineForConditionalGeneration"],
    model_type="moonshine",
    attention_bias=False,
    bos_token_id=1,
    decoder_start_token_id=1,
    eos_token_id=2,
    decoder_hidden_act="silu",
    encoder_hidden_act="gelu",
    decoder_num_attention_heads=8,
    decoder_num_hidden_layers=8,
    decoder_num_key_value_heads=8,
    encoder_num_attention_heads=8,
    encoder_num_hidden_layers=8,
    encoder_num_key_value_heads=8,
    hidden_size=416,
    intermediate_size=1664,
    max_position_embeddings=512,
    rope_parameters={"partial_rotary_factor": 0.62, "rope_theta": 10000.0, "rope_type": "default"},
    tie_word_embeddings=True,
    vocab_size=32768,
)


def prepare() -> None:
    from py_engine.model_cache import ensure_model

    exclude = ROOT / ".git" / "info" / "exclude"
    if "/.speech-bench/" not in exclude.read_text():
        exclude.write_text(exclude.read_text() + "/.speech-bench/\n")
    BENCH.mkdir(exist_ok=True)
    shutil.copy(ensure_model("moonshine-base") / "tokenizer.json", BENCH / "moonshine-base-tokenizer.json")


def write_random(path: Path, shapes: dict, dtype: str, zero_rows: dict | None = None, fill: dict | None = None):
    """A safetensors file of `shapes` (name -> shape), normal(0, 0.02) values (norm weights 1 +),
    in F32 or BF16; zero_rows: name -> rows set to zero; fill: name -> a constant."""
    rng = np.random.default_rng(0)
    size = 4 if dtype == "F32" else 2
    header, offset = {}, 0
    for name, shape in shapes.items():
        nbytes = int(np.prod(shape)) * size
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(raw)) + raw)
        for name, shape in shapes.items():
            values = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
            if name.endswith("norm.weight"):
                values += 1.0
            if fill and name in fill:
                values = np.full(shape, fill[name], np.float32)
            for row in (zero_rows or {}).get(name, ()):
                values[row] = 0.0
            file.write(
                values.tobytes() if dtype == "F32" else (values.view(np.uint32) >> 16).astype(np.uint16).tobytes()
            )


def lfm2_shapes(config: dict) -> dict:
    """Kani-TTS-2's tensors: LFM2's (HF names; the feed-forward width auto-adjusted as LFM2 does)
    with Kani's speaker projection and per-attention-layer alpha."""
    from py_engine.models.kani_tts import ALPHA

    h, heads, kv = config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"]
    hd = h // heads
    ffn = int(2 * config["intermediate_size"] / 3 * config["block_ffn_dim_multiplier"])
    ffn = -(-ffn // config["block_multiple_of"]) * config["block_multiple_of"]
    shapes = {
        "model.embed_tokens.weight": (config["vocab_size"], h),
        "model.embedding_norm.weight": (h,),
        "model.speaker_emb_projection.weight": (h, config["speaker_emb_dim"]),
    }
    for i, kind in enumerate(config["layer_types"]):
        p = f"model.layers.{i}."
        shapes |= {p + "operator_norm.weight": (h,), p + "ffn_norm.weight": (h,)}
        shapes |= {p + "feed_forward.w1.weight": (ffn, h), p + "feed_forward.w3.weight": (ffn, h)}
        shapes[p + "feed_forward.w2.weight"] = (h, ffn)
        if kind == "conv":
            shapes |= {p + "conv.conv.weight": (h, 1, config["conv_L_cache"]), p + "conv.in_proj.weight": (3 * h, h)}
            shapes[p + "conv.out_proj.weight"] = (h, h)
        else:
            a = p + "self_attn."
            shapes |= {a + "q_proj.weight": (heads * hd, h), a + "k_proj.weight": (kv * hd, h)}
            shapes |= {a + "v_proj.weight": (kv * hd, h), a + "out_proj.weight": (h, heads * hd)}
            shapes |= {a + "q_layernorm.weight": (hd,), a + "k_layernorm.weight": (hd,), ALPHA.format(i): ()}
    return shapes


def codec_shapes(config: dict) -> dict:
    """NanoCodec's decoder tensors as tools/nanocodec_to_safetensors.py names them (weight norm folded)."""
    channels = config["base_channels"]
    shapes = {"pre_conv.conv.weight": (channels, config["input_dim"], config["in_kernel_size"])}
    shapes["pre_conv.conv.bias"] = (channels,)
    for stage, rate in enumerate(config["up_sample_rates"]):
        shapes[f"activations.{stage}.activation.snake_act.alpha"] = (1, channels // 2, 1)
        up = f"up_sample_conv_layers.{stage}.conv."
        shapes |= {up + "weight": (channels, 1, 2 * rate), up + "bias": (channels // 2,)}
        channels //= 2
        for i, kernel in enumerate(config["resblock_kernel_sizes"]):
            for d in range(len(config["resblock_dilation_sizes"])):
                for part in ("input", "skip"):
                    p = f"res_layers.{stage}.res_blocks.{i}.res_blocks.{d}.{part}_"
                    shapes[p + "activation.activation.snake_act.alpha"] = (1, channels // 2, 1)
                    shapes |= {p + "conv.conv.weight": (channels, channels, kernel), p + "conv.conv.bias": (channels,)}
    shapes["post_activation.activation.snake_act.alpha"] = (1, channels // 2, 1)
    shapes |= {"post_conv.conv.weight": (1, channels, config["out_kernel_size"]), "post_conv.conv.bias": (1,)}
    return shapes


def kani_folder(folder: Path, tiny: bool) -> Path:
    config = dict(TINY_LFM2 if tiny else LFM2_350M, **KANI)
    codec = json.loads((FIXTURES / "nanocodec-f32" / "config.json").read_text()) if tiny else NANOCODEC
    (folder / "nanocodec").mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "nanocodec" / "config.json").write_text(json.dumps(codec))
    shutil.copy(FIXTURES / "kani-f32" / "tokenizer.json", folder / "tokenizer.json")
    shapes = lfm2_shapes(config)
    alphas = {name: 1.0 for name, shape in shapes.items() if shape == ()}
    zero = {"model.embed_tokens.weight": [KANI["text_vocab_size"] + 2]}  # END_OF_SPEECH
    write_random(folder / "model.safetensors", shapes, "BF16", zero, alphas)
    alphas = {name: 0.5 for name in codec_shapes(codec) if name.endswith("alpha")}
    write_random(folder / "nanocodec" / "model.safetensors", codec_shapes(codec), "F32", fill=alphas)
    return folder


def moonshine_folder(folder: Path, tiny: bool) -> Path:
    from py_engine.speech.moonshine_config import read_moonshine_config, tensor_shapes

    folder.mkdir(parents=True, exist_ok=True)
    tiny_dir = FIXTURES / "moonshine-f32"
    config = json.loads((tiny_dir / "config.json").read_text()) if tiny else MOONSHINE_BASE
    tokenizer = tiny_dir / "tokenizer.json" if tiny else BENCH / "moonshine-base-tokenizer.json"
    (folder / "config.json").write_text(json.dumps(config))
    shutil.copy(tokenizer, folder / "tokenizer.json")
    shapes = tensor_shapes(read_moonshine_config(config, folder / "config.json"))
    zero = {"model.decoder.embed_tokens.weight": [config["eos_token_id"]]}
    write_random(folder / "model.safetensors", shapes, "F32", zero)
    return folder


async def speech(device, folder: Path, seconds: float, runs: int) -> dict:
    from py_engine.speech import load_speaker

    started = time.perf_counter()
    speaker = await load_speaker(str(folder), device)
    load = time.perf_counter() - started
    codec, decode = speaker.codec, speaker.codec.decode
    spent = {"codec": 0.0, "calls": 0}

    async def timed_decode(frames, first=0):
        start = time.perf_counter()
        pcm = await decode(frames, first)
        spent["codec"] += time.perf_counter() - start
        spent["calls"] += 1
        return pcm

    codec.decode = timed_decode
    rate = codec.sample_rate / codec.hop  # frames a second: 12.5
    frames = round(seconds * rate)
    results = []
    for _ in range(1 + runs):
        spent.update(codec=0.0, calls=0)
        start, first, samples = time.perf_counter(), None, 0
        async for pcm in speaker.speak(TEXT, max_frames=frames):
            first = first if first is not None else time.perf_counter() - start
            samples += len(pcm)
        wall = time.perf_counter() - start
        made = samples // codec.hop
        results.append(dict(wall=wall, first=first, frames=made, **spent))
    warm = results[1:]
    wall, codec_s = median(r["wall"] for r in warm), median(r["codec"] for r in warm)
    made = median(r["frames"] for r in warm)
    audio = made / rate
    stats = speaker.engine.stats
    # The codec alone: one full window (context + its most new frames), waited for.
    window = [[i % codec.cfg.codebook_size] * codec.cfg.groups for i in range(codec.max_rows)]
    alone = []
    for _ in range(1 + runs):
        start = time.perf_counter()
        await decode(window, codec.context_frames)
        alone.append(time.perf_counter() - start)
    new = codec.max_rows - codec.context_frames
    ms = lambda t: round(1000 * t, 2)  # noqa: E731
    return {
        "prompt_tokens": len(speaker.prompt(TEXT)),
        "max_frames": frames,
        "frames": [r["frames"] for r in results],
        "audio_seconds": round(audio, 3),
        "wall_seconds": round(wall, 3),
        "rtf (wall / audio)": round(wall / audio, 4),
        "x real time (audio / wall)": round(audio / wall, 2),
        "first_pcm_ms": ms(median(r["first"] for r in warm)),
        "codec_lm_ms_per_frame (wall less the codec's calls)": round(1000 * (wall - codec_s) / made, 3),
        "codec_lm_last_run (tokens, host s, constraint s)": [
            stats.tokens,
            round(stats.host_seconds, 3),
            round(stats.constraint_seconds, 3),
        ],
        "codec_ms_per_frame (its calls while streaming)": round(1000 * codec_s / made, 3),
        "codec_calls": warm[-1]["calls"],
        f"codec window alone ({codec.context_frames} context + {new} new frames)": {
            "ms": ms(median(alone[1:])),
            "ms_per_new_frame": round(1000 * median(alone[1:]) / new, 3),
        },
        "runs_seconds": [round(r["wall"], 3) for r in results],
        "load_seconds (random weights, pipelines)": round(load, 2),
    }


async def transcription(device, folder: Path, runs: int, clips: list[Path]) -> dict:
    from py_engine.speech import load_transcriber
    from py_engine.speech.moonshine_model import encode_window

    reference = json.loads((FIXTURES / "moonshine-base" / "reference.json").read_text())["clips"]
    transcriber = await load_transcriber(str(folder), device)
    model = transcriber.model
    out = {}
    for clip in clips:
        with wave.open(str(clip)) as w:
            count = w.getnframes()
            pcm = array("f", (s / 32768 for s in struct.unpack(f"<{count}h", w.readframes(count))))
            seconds = count / w.getframerate()
        tokens = len(reference[clip.name]["ids"]) - 1  # after the start id, the end id included
        times, first, per_token, decoded = [], [], [], []
        for _ in range(1 + runs):
            start = time.perf_counter()
            segments = [s async for s in transcriber.transcribe(pcm, max_tokens=tokens)]
            times.append(time.perf_counter() - start)
            decoded.append(sum(len(s.tokens) for s in segments))
            first.append(model.stats.first_token_seconds)
            per_token.append(model.stats.seconds_per_token or 0.0)
        encodes = []
        for _ in range(runs):
            start = time.perf_counter()
            encode_window(model, pcm)
            await model.sync()
            encodes.append(time.perf_counter() - start)
        wall = median(times[1:])
        out[clip.name] = {
            "seconds": round(seconds, 3),
            "decoded_tokens": decoded[-1],
            "clip_ms": round(1000 * wall, 2),
            "rtf": round(wall / seconds, 4),
            "encode_ms": round(1000 * median(encodes), 2),
            "first_token_ms (encode included)": round(1000 * median(first[1:]), 2),
            "ms_per_token (after the first)": round(1000 * median(per_token[1:]), 3),
            "runs_seconds": [round(t, 4) for t in times],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare", action="store_true", help="fill .speech-bench/ here (CPU machine)")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes on this machine's GPU (a check)")
    parser.add_argument("--seconds", type=float, default=10.0, help="speech to make: max_frames / 12.5")
    parser.add_argument("--runs", type=int, default=3, help="warm runs (after one that compiles)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    args = parser.parse_args()
    if args.prepare:
        return prepare()
    if not args.tiny:
        from versus_whispercpp import setup_device

        setup_device()
    from py_engine.gpu import open_device

    work = Path("/tmp/speech-rtf-tiny" if args.tiny else "/tmp/speech-rtf")
    clips = sorted(CLIPS.glob("*.wav"))[: 1 if args.tiny else None]
    started = time.perf_counter()
    kani, moonshine = kani_folder(work / "kani", args.tiny), moonshine_folder(work / "moonshine", args.tiny)
    result = {"weights_written_seconds": round(time.perf_counter() - started, 1)}

    async def run() -> None:
        device = await open_device()
        result["adapter"] = device.caps.adapter
        for name, work in (
            ("text to speech (Kani-TTS-2 + NanoCodec)", lambda: speech(device, kani, args.seconds, args.runs)),
            ("transcription (Moonshine base)", lambda: transcription(device, moonshine, args.runs, clips)),
        ):
            try:
                result[name] = await work()
            except Exception as exc:  # the other half still runs
                result[name] = {"error": f"{type(exc).__name__}: {exc}"}

    asyncio.run(run())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "speech_rtf.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
