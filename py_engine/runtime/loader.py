"""How every model loads, in two steps: plan() (a config and its tensors -> the graph and its GPU
footprint, with no device) and upload() (the graph on a device: its kernels, weights and
Executor). The chat engine (Engine.load), the embedder (embedding/embedder.py), a vision-language
model's vision tower (vision/encoder.py: vision_plan) and the device-free
check of a model's files (session.read_model_files, which the CLI runs before opening a GPU) all
go through them, and this is the one place a graph builder is made (graph_builders: a speech model's
several graphs, planned by speech/seq2seq.py)."""

from __future__ import annotations

from typing import NamedTuple

from ..formats.model_files import tensor_info
from ..models import graph_generator
from ..models.bert import EmbeddingBuilder
from ..models.builder import GraphBuilder
from ..models.gemma3_vision import build_gemma3_vision
from ..models.graph_options import GraphOptions
from ..models.qwen3_5_vision import build_qwen3_5_vision
from ..models.siglip import build_siglip
from .executor import Executor
from .graph import Graph
from .kernels import KernelCache
from .memory import Footprint, footprint
from .weights import WeightUploader


class Plan(NamedTuple):
    graph: Graph
    footprint: Footprint


def plan(cfg, tensors: dict, label: str, options: GraphOptions) -> Plan:
    """The graph of `cfg`'s architecture over `tensors` (label: where they come from, for errors)
    and what it holds on a GPU: an embedding graph where options.pooling is set (an encoder's
    architecture allowed), else a generating one. ModelFileError for a tensor missing or of a
    dtype no kernel reads."""

    def info(name):
        return tensor_info(tensors, name, label)

    if options.pooling is None:
        graph = graph_generator(cfg.architecture, label)(GraphBuilder(cfg, info, options))
        return Plan(graph, footprint(graph, cfg.vocab_size, options.kv_capacity))
    graph = graph_generator(cfg.architecture, label, encoders=True)(EmbeddingBuilder(cfg, info, options))
    return Plan(graph, footprint(graph, 0, 0))  # no sampling: no vocabulary or history buffers


# A vision tower's graph by its geometry's kind.
VISION_GRAPHS = {"smolvlm": build_siglip, "gemma3": build_gemma3_vision, "qwen3_5": build_qwen3_5_vision}


def vision_plan(cfg, geometry: dict, tensors: dict, label: str, options: GraphOptions) -> Plan:
    """The vision tower's graph (models/siglip.py, models/gemma3_vision.py: one tile a forward;
    models/qwen3_5_vision.py: one picture; options.max_rows its patches) over the vision tensors, and its
    footprint."""
    build = VISION_GRAPHS[geometry["kind"]]
    graph = build(GraphBuilder(cfg, lambda name: tensor_info(tensors, name, label), options), geometry)
    return Plan(graph, footprint(graph, 0, 0))


def built_plan(build, cfg, tensors: dict, label: str, options: GraphOptions) -> Plan:
    """The graph build(builder) emits over `tensors` (a graph of no text or vision family: NanoCodec's
    decoder, models/nanocodec.py) and its footprint."""
    graph = build(GraphBuilder(cfg, lambda name: tensor_info(tensors, name, label), options))
    return Plan(graph, footprint(graph, 0, 0))


def graph_builders(tensor_info, *plans: tuple) -> list[GraphBuilder]:
    """A GraphBuilder for each (config, GraphOptions) of `plans` over one model's tensors (tensor_info:
    name -> TensorInfo): the graphs of a speech model (speech/seq2seq.py: front-end, encoder, decoder)."""
    return [GraphBuilder(cfg, tensor_info, options) for cfg, options in plans]


async def upload(device, graph: Graph | tuple, tensors: dict, source, make, progress=None):
    """make(executor, kernels, weight bytes) on `device`: what runs the graph (an Engine, an
    embedding runner), made before the kernels are awaited so that its own compile with the
    graph's (the browser compiles asynchronously: all before any submit); returned once every
    weight of `tensors` (read from `source`) has landed. progress: (bytes landed, bytes expected).
    A tuple of graphs (a speech model's encoder and decoder): make gets a tuple of executors, a
    Tensor that several graphs bind held in one buffer (Executor's shared)."""
    graphs = graph if isinstance(graph, tuple) else (graph,)
    kernels = KernelCache(device)
    uploader = WeightUploader(device, kernels, tensors, source, progress)
    uploader.expect(t for g in graphs for t in g.tensors if t.kind == "weight")
    executors, held = [], {}
    for g in graphs:
        executors.append(Executor(device, kernels, g, uploader, shared=held))
        held.update(executors[-1].buffers)
    made = make(executors[0] if len(graphs) == 1 else tuple(executors), kernels, uploader.bytes_uploaded)
    await device.prepare()
    await uploader.finish()
    for executor, g in zip(executors, graphs):
        await device.read_buffer(executor.buffer(next(iter(g.outputs))), 0, 4)  # every upload landed
    return made
