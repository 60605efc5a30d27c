"""A Whisper checkpoint on a device: its files read and checked (read_whisper_files: config.json,
generation_config.json, the tensors, tokenizer.json), its three graphs planned (models/whisper.py:
the log-mel front-end, the encoder, the decoder, through seq2seq.plan_seq2seq) and uploaded
(load_whisper: a Seq2Seq whose front-end takes a window's PCM)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from ..errors import UnsupportedArchitectureError
from ..formats.hf_dir import read_tensor_index
from ..formats.json_file import read_json
from ..formats.model_files import tensor_info
from ..formats.source import ModelSource, open_source
from ..models.config import architecture_of
from ..models.graph_options import GraphOptions, device_options
from ..models.log_mel import FRAMES
from ..models.whisper import build_decoder, build_encoder, build_front, check_shapes, whisper_configs
from ..runtime.kv_cache import kv_formats
from .log_mel import write_tables
from .seq2seq import Seq2Seq, Seq2SeqPlan, load_seq2seq, plan_seq2seq
from .whisper_generation import WhisperSettings, read_settings

ARCHITECTURE = "WhisperForConditionalGeneration"
DECODER_ROWS = 64  # a decoder forward's most tokens: a prompt's longer prefix goes in several


@dataclass
class WhisperFiles:
    source: ModelSource
    encoder: object  # ModelConfig of the encoder
    decoder: object  # ModelConfig of the decoder
    geometry: dict  # models/whisper.py whisper_configs'
    tensors: dict
    tokenizer: object | None
    settings: WhisperSettings


def read_whisper_files(model) -> WhisperFiles:
    """An HF folder of WhisperForConditionalGeneration (or its ModelSource), read and checked: a
    ModelFileError names the file and what is wrong."""
    source = open_source(model)
    config_path = source.small_dir() / "config.json"
    raw = read_json(config_path)
    if architecture_of(raw, config_path) != ARCHITECTURE:
        raise UnsupportedArchitectureError(f"{config_path}: not a {ARCHITECTURE}")
    encoder, decoder, geometry = whisper_configs(raw, config_path)
    tensors = read_tensor_index(source)
    check_shapes(tensors, encoder, decoder, geometry, config_path)
    settings = read_settings(source, geometry["positions"], geometry["vocab_size"])
    tokenizer = None
    if source.exists("tokenizer.json"):
        from ..tokenizer import Tokenizer

        tokenizer = Tokenizer.from_model_dir(source.small_dir())
    return WhisperFiles(source, encoder, decoder, geometry, tensors, tokenizer, settings)


def plan_whisper(files: WhisperFiles, **device) -> Seq2SeqPlan:
    """The front-end, encoder and decoder graphs. device: GraphOptions' half, cpu, subgroup_min_size,
    kv_formats, max_binding (none: as with no device). Precision exact: f32 arithmetic."""
    geometry, frames = files.geometry, files.geometry["frames"]
    options = dict(precision="exact", **device)

    def build(front_builder, encoder_builder, decoder_builder):
        front, features = build_front(front_builder, geometry)
        encoder = build_encoder(encoder_builder, geometry, files.decoder.num_layers, features)
        cross = [
            (encoder.outputs[f"cross.{i}.k"], encoder.outputs[f"cross.{i}.v"]) for i in range(files.decoder.num_layers)
        ]
        return front, encoder, build_decoder(decoder_builder, geometry, cross)

    return plan_seq2seq(
        build,
        files.encoder,
        files.decoder,
        lambda name: tensor_info(files.tensors, name, files.source.label),
        GraphOptions(max_rows=frames, kv_capacity=frames, **options),
        GraphOptions(max_rows=DECODER_ROWS, kv_capacity=geometry["positions"], **options),
        front=GraphOptions(max_rows=FRAMES, kv_capacity=FRAMES, **options),
    )


async def load_whisper(
    files: WhisperFiles,
    device,
    *,
    f32: bool = False,
    max_binding: int = 0,
    progress=None,
    gpu_budget: int | None = None,
) -> Seq2Seq:
    """read_whisper_files' model on `device`: a Seq2Seq whose front-end takes a window's "pcm" (its
    constants written). f32: no f16 weights even with shader-f16; max_binding, progress, gpu_budget:
    as Engine.load's."""
    half = device.caps.shader_f16 and not f32
    planned = plan_whisper(
        files,
        kv_formats=kv_formats(files.tensors, half, False),
        **device_options(device, half=half, max_binding=max_binding),
    )
    model = await load_seq2seq(device, planned, files.tensors, files.source, progress, gpu_budget)
    write_tables(device, model.front)
    frames = files.geometry["frames"]  # every frame's attention sees the window's frames
    device.write_buffer(model.encoder.buffer("spans"), 0, array("I", [0, frames] * frames).tobytes())
    model.footprint = planned.footprint
    return model
