"""Encoder-decoder speech models on the GPU (Whisper: models/whisper.py; Moonshine): the encoder
graph runs once a window and writes every decoder layer's cross-attention K and V; the decoder
graph then runs a greedy loop a token at a time (causal self-attention over the engine's KV cache,
cross-attention into the frozen K/V), the host choosing each token from its logits.

Interfaces (what a model family gives and calls):
- Its two graphs, built by plan_seq2seq(build, ...) with two GraphBuilders: build(encoder_builder,
  decoder_builder) -> (encoder graph, decoder graph). The encoder graph's ops write the cross K/V
  ("state" tensors, models/audio_ops.py cross_kv, listed in its outputs); the decoder graph's
  cross_attention ops bind those very Tensors, and loader.upload of both keeps each in one buffer.
- The decoder graph's inputs, written here per forward: "ids" (the rows' tokens), "positions"
  (their positions, where the graph has it: Whisper's learned table), "last_row" (the forward's
  last row, [1]: the row its "logits" output scores) and its RoPE tables (graph.rotary, as the
  engine fills them). Its output: "logits" [1, vocab] of that last row.
- The encoder graph's inputs are the family's own: Seq2Seq.encode(inputs, rows) writes them (name
  -> bytes) and submits its forward of `rows` rows; the decoder's forwards after it are ordered
  after it on the queue.
- Optionally a front-end graph before the encoder (plan_seq2seq's `front` options): Whisper's
  log-mel features, the encoder's input written by the front-end's ops (one buffer: both graphs
  bind the Tensor). encode() runs it first unless front=False (the features written as inputs).
- Seq2Seq.generate(prompt, choose, max_new_tokens): the tokens choose(tokens so far, logits) picks,
  one a forward, each yielded as it is chosen; the caller stops it (an end token, a budget).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import NamedTuple

from ..gpu import Read
from ..models.graph_options import GraphOptions
from ..runtime.graph import Graph
from ..runtime.linear_plan import LOGIT_ROWS_MAX
from ..runtime.loader import graph_builders, upload
from ..runtime.memory import Footprint, ModelTooLargeError, footprint, size


class Seq2SeqPlan(NamedTuple):
    encoder: Graph
    decoder: Graph
    footprint: Footprint
    front: Graph | None = None  # a front-end before the encoder (Whisper's log-mel features)

    @property
    def graphs(self) -> tuple:
        """The graphs in the order they run (and load_seq2seq uploads them)."""
        return (self.encoder, self.decoder) if self.front is None else (self.front, self.encoder, self.decoder)


def plan_seq2seq(
    build: Callable,
    encoder_cfg,
    decoder_cfg,
    tensor_info,
    encoder: GraphOptions,
    decoder: GraphOptions,
    front: GraphOptions | None = None,
) -> Seq2SeqPlan:
    """The graphs, build(encoder builder, decoder builder) -> (encoder, decoder) (with `front`'s
    options: build(front builder, encoder builder, decoder builder) -> (front, encoder, decoder)),
    and what they hold on a GPU together: a tensor a later graph binds but an earlier one made (the
    cross K/V, the features) counted once."""
    plans = [(encoder_cfg, encoder), (decoder_cfg, decoder)]
    graphs = build(*graph_builders(tensor_info, *([(encoder_cfg, front)] if front else []), *plans))
    prints = [footprint(g, 0, 0) for g in graphs[:-1]]
    prints.append(footprint(graphs[-1], decoder_cfg.vocab_size, decoder.kv_capacity))
    shared = {"state": 0, "input": 0}
    for i, g in enumerate(graphs[1:], 1):
        earlier = {t for e in graphs[:i] for t in e.tensors}
        for t in {t for op in g.ops for t in op.bind.values()} & earlier:
            if t.kind in shared:
                shared[t.kind] += t.nbytes
    total = Footprint(
        sum(p.weights for p in prints),
        sum(p.kv_cache for p in prints) - shared["state"],
        sum(p.activations for p in prints),
        sum(p.other for p in prints) - shared["input"],
    )
    *first, enc, dec = graphs
    return Seq2SeqPlan(enc, dec, total, first[0] if first else None)


async def load_seq2seq(
    device, planned: Seq2SeqPlan, tensors: dict, source, progress=None, gpu_budget: int | None = None
) -> Seq2Seq:
    """The planned graphs on `device`, their weights uploaded from `source`. gpu_budget: as
    Engine.load's (ModelTooLargeError, before any upload, where the graphs need more bytes)."""
    if gpu_budget is not None and planned.footprint.total > gpu_budget:
        raise ModelTooLargeError(
            f"{source.label} needs {planned.footprint.describe()} of GPU memory to transcribe, more than "
            f"this device's budget of {size(gpu_budget)}"
        )

    def make(executors, kernels, weight_bytes):
        *front, encoder, decoder = executors
        return Seq2Seq(device, encoder, decoder, front[0] if front else None)

    return await upload(device, planned.graphs, tensors, source, make, progress)


def _u32(values) -> bytes:
    return array("I", values).tobytes()


class Seq2Seq:
    def __init__(self, device, encoder, decoder, front=None):
        """Use load_seq2seq."""
        self.device, self.encoder, self.decoder, self.front = device, encoder, decoder, front
        graph = decoder.graph
        self.max_rows = graph.max_rows
        # The context: the self-attention's KV cache rows (its attention ops' capacity).
        self.context = next(op.params["capacity"] for op in graph.ops if "capacity" in op.params)
        self.vocab = graph.outputs["logits"].nbytes // (4 * LOGIT_ROWS_MAX)
        self.logits = decoder.buffer("logits")
        self._inputs = {n: decoder.buffer(n) for n in ("ids", "positions", "last_row") if n in graph.inputs}
        bound = {id(t) for op in graph.ops for t in op.bind.values()}
        self._rotary = [
            (decoder.buffer(n), r) for n, r in graph.rotary.items() if r.rotary_dim and id(graph.inputs[n]) in bound
        ]

    def encode(self, inputs: dict, rows: int, front: bool = True) -> None:
        """Write the inputs (name -> bytes: the front-end's or the encoder's) and submit the front-end's
        forward (where there is one, unless front=False: its output written here) then the encoder's of
        `rows` rows."""
        graphs = [e for e in (self.front, self.encoder) if e is not None]
        for name, data in inputs.items():
            owner = next((e for e in graphs if name in e.graph.inputs), None)
            if owner is None:
                raise KeyError(f"no graph of this model has an input {name!r}")
            self.device.write_buffer(owner.buffer(name), 0, data)
        stages = graphs if front else [self.encoder]
        self.device.submit([c for stage in stages for c in stage.commands(rows, 0)])

    def _forward(self, ids: list[int], pos: int) -> list:
        """The decoder's forward over `ids` at position pos (its inputs written now)."""
        rows = len(ids)
        values = {"ids": ids, "positions": range(pos, pos + rows), "last_row": [rows - 1]}
        for name, buffer in self._inputs.items():
            self.device.write_buffer(buffer, 0, _u32(values[name]))
        for buffer, rotary in self._rotary:
            self.device.write_buffer(buffer, 0, rotary.table(pos, rows))
        return self.decoder.commands(rows, pos, logit_rows=1)

    async def logits_after(self, ids: list[int], pos: int) -> array:
        """The float32 logits after `ids` fed from position pos (in forwards of at most max_rows)."""
        if not ids or pos + len(ids) > self.context:
            raise ValueError(f"{len(ids)} tokens from position {pos} do not fit the decoder's {self.context}")
        last = (len(ids) - 1) // self.max_rows * self.max_rows  # the last forward's first id
        for start in range(0, last, self.max_rows):
            self.device.submit(self._forward(ids[start : start + self.max_rows], pos + start))
        commands = self._forward(ids[last:], pos + last)
        read = self.device.submit(commands + [Read(self.logits, 0, self.vocab * 4)])[0]
        return array("f", await self.device.fetch(read))

    async def generate(self, prompt: list[int], choose: Callable, max_new_tokens: int):
        """Async generator of the tokens choose(tokens, logits) picks after the prompt, each fed
        back, until max_new_tokens or the decoder's context is reached (or the caller stops)."""
        tokens, feed, pos = list(prompt), list(prompt), 0
        for _ in range(max_new_tokens):
            if pos + len(feed) > self.context:
                return
            logits = await self.logits_after(feed, pos)
            pos += len(feed)
            token = choose(tokens, logits)
            tokens.append(token)
            yield token
            feed = [token]
