"""Engine: a loaded model on a device — prefill, decode, sample — async end to end."""
from __future__ import annotations

import logging
import struct
from array import array
from pathlib import Path

from .executor import Executor
from .formats.gguf import read_gguf
from .formats.gguf_model import config_from_gguf, hf_tensors
from .formats.hf_dir import read_json, read_tensor_index
from .formats.mlx import mlx_tensors
from .formats.safetensors import MappedFiles
from .kernels import KernelCache
from .models import graph_generator
from .models.builder import GraphBuilder
from .models.config import ModelConfig, config_from_hf
from .models.rope import cos_sin_table, inv_frequencies
from .sampling import Sampler, SamplingParams
from .weights import WeightUploader
from .errors import ModelFileError

log = logging.getLogger("wisp")


class Engine:
    def __init__(self, device, cfg: ModelConfig, executor: Executor, kernels, weight_bytes: int, context: int):
        self.device = device
        self.cfg = cfg
        self.executor = executor
        self.weight_bytes = weight_bytes
        self.context = context
        self.max_rows = executor.graph.max_rows
        self.inv_freq = inv_frequencies(cfg.rotary_dim, cfg.rope_theta, cfg.rope_scaling)
        self.logits_buffer = executor.buffer("logits")
        self.sampler = Sampler(device, kernels, cfg.vocab_size, self.logits_buffer, max_history=context)
        self.pos = 0  # tokens already in the KV cache

    @classmethod
    async def load(cls, path, device, max_rows: int = 128, context: int = 2048, max_binding: int = 0,
                   progress=None) -> "Engine":
        """A GGUF file or an HF model directory (safetensors, optionally MLX-quantized).
        max_binding: split weights above this many bytes (default: the device's binding limit).
        progress: called with (bytes uploaded, bytes expected) as weights reach the GPU."""
        path = Path(path)
        if path.suffix == ".gguf":
            cfg, tensors = gguf_model(path)
        else:
            cfg, tensors = hf_model(path)
        generate_graph = graph_generator(cfg.architecture, str(path))
        return await cls.from_tensors(cfg, generate_graph, tensors, MappedFiles(), device, max_rows, context, path,
                                      max_binding or device.caps.limits.max_storage_binding, progress)

    @classmethod
    async def from_tensors(cls, cfg, generate_graph, tensors, reader, device, max_rows, context, path, max_binding,
                           progress=None):
        context = min(context, cfg.max_position)
        kernels = KernelCache(device)
        half = device.caps.shader_f16
        builder = GraphBuilder(cfg, lambda name: _tensor_info(tensors, name, path), max_rows, context,
                               half, v_cache_dtype(tensors, half), max_binding)
        graph = generate_graph(builder)
        log.info("graph: %s", graph.summary())
        uploader = WeightUploader(device, kernels, tensors, reader, progress)
        uploader.expect(t for t in graph.tensors if t.kind == "weight")
        executor = Executor(device, kernels, graph, uploader)
        uploader.release_staging()
        engine = cls(device, cfg, executor, kernels, uploader.bytes_uploaded, context)
        await device.read_buffer(engine.logits_buffer, 0, 4)  # wait for uploads and conversions
        return engine

    def reset(self):
        self.pos = 0

    def forward_commands(self, ids: list[int]) -> list:
        if self.pos + len(ids) > self.context:
            raise ValueError(f"context full: {self.pos} + {len(ids)} tokens > {self.context}")
        ex = self.executor
        self.device.write_buffer(ex.buffer("ids"), 0, array("I", ids).tobytes())
        self.device.write_buffer(ex.buffer("cos_sin"), 0, cos_sin_table(self.inv_freq, self.pos, len(ids)))
        commands = ex.commands(len(ids), self.pos)
        self.pos += len(ids)
        return commands

    def prefill_commands(self, ids: list[int]) -> list:
        """Run all chunks but the last; return the last chunk's commands (its LM head gives the logits)."""
        for start in range(0, len(ids) - self.max_rows, self.max_rows):
            self.device.submit(self.forward_commands(ids[start:start + self.max_rows]))
        tail = len(ids) - (len(ids) - 1) // self.max_rows * self.max_rows
        return self.forward_commands(ids[-tail:])

    async def prompt_logits(self, ids: list[int]) -> list[float]:
        self.device.submit(self.prefill_commands(ids))
        raw = await self.device.read_buffer(self.logits_buffer, 0, self.cfg.vocab_size * 4)
        return list(struct.unpack(f"<{self.cfg.vocab_size}f", raw))

    async def generate(self, prompt: list[int], max_new_tokens: int, sampling: SamplingParams | None = None,
                       stop_ids=()):
        """Async generator of new token ids; a stop id is yielded, then generation ends."""
        sampling = sampling or SamplingParams()
        self.sampler.reset()  # the same seed gives the same answer on every request
        history = list(prompt)
        commands = self.prefill_commands(prompt)
        for _ in range(max_new_tokens):
            self.device.submit(commands + self.sampler.commands(sampling, history))
            token = await self.sampler.pick(sampling)
            history.append(token)
            yield token
            if token in stop_ids or self.pos >= self.context:
                return
            commands = self.forward_commands([token])


def hf_model(path: Path):
    raw = read_json(path / "config.json")
    cfg = config_from_hf(raw, path / "config.json")
    tensors = read_tensor_index(path)
    if raw.get("quantization"):
        tensors = mlx_tensors(tensors, raw["quantization"], path / "config.json")
    return cfg, tensors


def gguf_model(path: Path):
    gguf = read_gguf(path)
    return config_from_gguf(gguf), hf_tensors(gguf)  # config_from_gguf sets the RoPE layout


def v_cache_dtype(tensors: dict, half: bool) -> str:
    """The V cache follows the checkpoint's precision: f16 on shader-f16 devices unless a matrix
    is stored in f32 (its owner asked for full precision); quantized models take f16."""
    matrices = [t for t in tensors.values() if len(t.shape) == 2]
    return "f16" if half and all(t.dtype != "F32" for t in matrices) else "f32"


def _tensor_info(tensors, name, path):
    if name not in tensors:
        raise ModelFileError(path, f"missing tensor {name!r}")
    return tensors[name]
