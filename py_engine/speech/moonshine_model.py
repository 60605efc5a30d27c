"""A Moonshine checkpoint on a device: its files read and checked (read_moonshine_files), its two graphs
planned (models/moonshine.py, through seq2seq.plan_seq2seq) and uploaded (load_moonshine: a Seq2Seq),
and a window of PCM written for the encoder (encode_window).

A window is at most `window` seconds of 16 kHz audio (the encoder graph is sized for it; a shorter one
runs the same graph with its own lengths: moonshine_config.front_end_lengths). The decoder's KV cache
holds the most tokens a window may produce (moonshine_generation.max_new_tokens) and the start token."""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from ..formats.hf_dir import read_tensor_index
from ..formats.json_file import read_json
from ..formats.model_files import tensor_info
from ..formats.source import ModelSource, open_source
from ..models.graph_options import GraphOptions, device_options
from ..models.moonshine import build_decoder, build_encoder, decoder_tensors
from .moonshine_config import MIN_SAMPLES, MoonshineConfig, check_tensors, front_end_lengths, read_moonshine_config
from .moonshine_generation import RATE, max_new_tokens
from .seq2seq import Seq2Seq, Seq2SeqPlan, load_seq2seq, plan_seq2seq

WINDOW_SECONDS = 30.0  # the longest window the encoder graph takes (Moonshine was trained on up to 30 s)


@dataclass
class MoonshineFiles:
    source: ModelSource
    config: MoonshineConfig
    tensors: dict
    tokenizer: object | None


def read_moonshine_files(model) -> MoonshineFiles:
    """An HF folder of MoonshineForConditionalGeneration (or its ModelSource), read and checked: a
    ModelFileError names the file and what is wrong."""
    source = open_source(model)
    config_path = source.small_dir() / "config.json"
    config = read_moonshine_config(read_json(config_path), config_path)
    tensors = decoder_tensors(read_tensor_index(source), config.cfg.num_layers)
    check_tensors(config, tensors, config_path)
    tokenizer = None
    if source.exists("tokenizer.json"):
        from ..tokenizer import Tokenizer

        tokenizer = Tokenizer.from_model_dir(source.small_dir())
    return MoonshineFiles(source, config, tensors, tokenizer)


def window_samples(window: float) -> int:
    """A window of `window` seconds in samples (ValueError where it holds no encoder frame)."""
    samples = int(window * RATE)
    if samples < MIN_SAMPLES:
        raise ValueError(f"a window of {window} s holds no encoder frame (at least {MIN_SAMPLES} samples)")
    return samples


def plan_moonshine(files: MoonshineFiles, window: float = WINDOW_SECONDS, **device) -> Seq2SeqPlan:
    """Both graphs for windows of at most `window` seconds. device: GraphOptions' half, cpu,
    subgroup_min_size, max_binding (none: as with no device). Precision exact: f32 arithmetic."""
    samples = window_samples(window)
    frames = front_end_lengths(samples)[-1]
    config = files.config
    options = dict(precision="exact", **device)

    def build(encoder_builder, decoder_builder):
        encoder, cross = build_encoder(encoder_builder, samples, config.encoder_layers, config.encoder_act)
        return encoder, build_decoder(decoder_builder, cross, frames, encoder.inputs["lengths"])

    return plan_seq2seq(
        build,
        config.cfg,
        config.cfg,
        lambda name: tensor_info(files.tensors, name, files.source.label),
        GraphOptions(max_rows=frames, kv_capacity=frames, **options),
        GraphOptions(max_rows=1, kv_capacity=max_new_tokens(samples) + 1, **options),  # and the start token
    )


async def load_moonshine(
    files: MoonshineFiles,
    device,
    *,
    window: float = WINDOW_SECONDS,
    f32: bool = False,
    max_binding: int = 0,
    progress=None,
    gpu_budget: int | None = None,
) -> Seq2Seq:
    """read_moonshine_files' model on `device`: a Seq2Seq whose encoder takes encode_window's inputs.
    f32: no f16 weights even with shader-f16; max_binding, progress, gpu_budget: as Engine.load's
    (ModelTooLargeError where both graphs need more than gpu_budget bytes)."""
    planned = plan_moonshine(
        files,
        window,
        **device_options(device, half=device.caps.shader_f16 and not f32, max_binding=max_binding),
    )
    return await load_seq2seq(device, planned, files.tensors, files.source, progress, gpu_budget)


def encode_window(model: Seq2Seq, pcm) -> int:
    """Submit the encoder's forward over a window of PCM (floats; from MIN_SAMPLES to the graph's
    window): its input audio, lengths, spans and RoPE table. Returns its encoder frames."""
    most = model.encoder.graph.inputs["audio"].nbytes // 4
    if not MIN_SAMPLES <= len(pcm) <= most:
        raise ValueError(f"a window of {len(pcm)} samples: from {MIN_SAMPLES} to {most}")
    lengths = front_end_lengths(len(pcm))
    frames = lengths[-1]
    rotary = model.encoder.graph.rotary["cos_sin"]
    inputs = {
        "audio": array("f", pcm).tobytes(),
        "lengths": array("I", lengths).tobytes(),
        "spans": array("I", [0, frames] * frames).tobytes(),
        "cos_sin": rotary.table(0, frames),
    }
    model.encode(inputs, frames)
    return frames
