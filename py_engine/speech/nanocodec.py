"""NanoCodec's decoder on the GPU (models/nanocodec.py is its graph): codec frames in, PCM out,
streamed. `codec = await load_codec(folder, device)`, then `await codec.decode(frames, first)`: the
PCM of frames[first:], each frame `groups` codes.

Streaming rests on the decoder being causal: the samples of new frames decoded in a window that
starts `context_frames` before them (the receptive field, CodecConfig.context_frames) are the samples
a decode of the whole sequence gives there, so a long utterance is decoded a window at a time as its
frames arrive and never whole on the GPU. A window holds at most max_rows frames: context plus up to
max_rows - context new ones.

The folder is what tools/nanocodec_to_safetensors.py writes from the `.nemo` archive (config.json,
model.safetensors): the engine never reads the archive's pickle. NanoCodec is under the NVIDIA Open
Model License."""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from ..errors import ModelFileError, WispError
from ..formats.hf_dir import read_tensor_index
from ..formats.json_file import read_json
from ..formats.source import ModelSource, open_source
from ..gpu import Read
from ..models.graph_options import DEFAULT_MAX_BINDING, GraphOptions
from ..models.nanocodec import CodecConfig, build_nanocodec, codec_config, codec_model_config
from ..runtime.loader import Plan, built_plan, upload

NEW_FRAMES = 32  # new frames a window decodes at most (plus its context): 2.56 s at 12.5 frames/s


@dataclass
class CodecFiles:
    source: ModelSource
    cfg: CodecConfig
    tensors: dict


def read_codec_files(model) -> CodecFiles:
    """The codec's config.json and safetensors header, checked (ModelFileError naming the file)."""
    source = open_source(model)
    if not source.exists("config.json"):
        raise ModelFileError(source.label, "no config.json: convert the .nemo with tools/nanocodec_to_safetensors.py")
    path = source.small_dir() / "config.json"
    return CodecFiles(source, codec_config(read_json(path), path), read_tensor_index(source))


def codec_plan(files: CodecFiles, max_rows: int, max_binding: int = DEFAULT_MAX_BINDING) -> Plan:
    """The decoder's graph over windows of max_rows frames (every weight's shape checked) and its
    footprint."""
    options = GraphOptions(max_rows=max_rows, kv_capacity=max_rows, max_binding=max_binding, precision="exact")

    def build(builder):
        return build_nanocodec(builder, files.cfg)

    return built_plan(build, codec_model_config(files.cfg), files.tensors, files.source.label, options)


async def load_codec(model, device, *, new_frames: int = NEW_FRAMES, progress=None) -> NanoCodec:
    """The decoder of `model` (a folder, a ModelSource or read_codec_files' CodecFiles) on `device`,
    decoding windows of its context plus up to new_frames frames."""
    files = model if isinstance(model, CodecFiles) else read_codec_files(model)
    if new_frames < 1:
        raise ValueError(f"new_frames must be at least 1, not {new_frames}")
    max_rows = files.cfg.context_frames + new_frames
    graph, need = codec_plan(files, max_rows, device.caps.limits.max_storage_binding)

    def make(executor, kernels, weight_bytes):
        return NanoCodec(device, executor, files.cfg)

    codec = await upload(device, graph, files.tensors, files.source, make, progress)
    codec.footprint = need
    return codec


class NanoCodec:
    def __init__(self, device, executor, cfg: CodecConfig):
        """Use load_codec."""
        self.device, self.executor, self.cfg = device, executor, cfg
        self.sample_rate, self.hop, self.context_frames = cfg.sample_rate, cfg.hop, cfg.context_frames
        self.max_rows = executor.graph.max_rows
        self.footprint = None
        self._codes, self._lengths = executor.buffer("codes"), executor.buffer("lengths")
        self._pcm = executor.buffer("pcm")
        self._per_stage = [1]
        for rate in cfg.rates:
            self._per_stage.append(self._per_stage[-1] * rate)

    def check(self, frames) -> None:
        """Every frame is `groups` codes of the codebook (WispError naming the first bad one)."""
        size, groups = self.cfg.codebook_size, self.cfg.groups
        for index, frame in enumerate(frames):
            if len(frame) != groups or not all(type(c) is int and 0 <= c < size for c in frame):
                raise WispError(f"codec frame {index}: {list(frame)!r} is not {groups} codes in 0..{size - 1}")

    async def decode(self, frames, first: int = 0) -> array:
        """The PCM (array('f') at sample_rate) of frames[first:], decoded with the context before
        `first` that they depend on: exactly those samples of a decode of every frame."""
        frames = list(frames)
        self.check(frames[max(0, first - self.context_frames) :])
        pcm = array("f")
        start = first
        while start < len(frames):
            low = max(0, start - self.context_frames)
            high = min(len(frames), low + self.max_rows)
            pcm.extend(await self._window(frames[low:high], start - low))
            start = high
        if self.cfg.output == "clamp":  # ClampActivation: min(max(x, -1), 1)
            pcm = array("f", [1.0 if v > 1.0 else -1.0 if v < -1.0 else v for v in pcm])
        return pcm

    async def _window(self, frames: list, new_from: int) -> array:
        """One forward over `frames`, the samples of frames[new_from:] read back."""
        rows = len(frames)
        self.device.write_buffer(self._codes, 0, array("I", [c for frame in frames for c in frame]).tobytes())
        self.device.write_buffer(
            self._lengths, 0, array("I", [rows * n for n in self._per_stage for _ in (0, 1)]).tobytes()
        )
        commands = self.executor.commands(rows, 0)
        read = Read(self._pcm, new_from * self.hop * 4, (rows - new_from) * self.hop * 4)
        raw = await self.device.fetch(self.device.submit(commands + [read])[0])
        return array("f", raw)
