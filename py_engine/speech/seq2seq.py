"""Encoder-decoder speech models on the GPU (Whisper: models/whisper.py; Moonshine): the encoder
graph runs once a window and writes every decoder layer's cross-attention K and V; the decoder
graph then runs a greedy loop a token at a time (causal self-attention over the engine's KV cache,
cross-attention into the frozen K/V), each token chosen on the GPU (generate_greedy, generate_split)
or by the host from the whole row (generate).

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
- Seq2Seq.generate_greedy(prompt, max_new_tokens, first_banned, banned): the same for greedy picks
  under fixed suppress lists, chosen on the GPU (the engine's Sampler: logit_mask, argmax, the pick
  copied into the next forward's "ids"), several forwards a submit and 4 bytes read back a token.
  Seq2Seq.stats times the last generation (first token, the tokens after it).
- Seq2Seq.generate_split(prompt, max_new_tokens, split, mask, pick): tokens the host picks from 24
  bytes a step: the row masked on the GPU by mask(tokens), then each of the ranges [0, split) and
  [split, vocab)'s best and log-sum-exp (RangeBest; Whisper's timestamp rule needs no more).
"""

from __future__ import annotations

import struct
import time
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ..decode.row_draw import CANDIDATES, TILE, RowDraw
from ..decode.sampling import Sampler
from ..decode.token_choice import SamplingParams
from ..gpu import Copy, Read
from ..models.graph_options import GraphOptions
from ..runtime.executor import STEP_BYTES, step_bytes
from ..runtime.graph import Graph
from ..runtime.kv_cache import SUBMITS_AHEAD, TOKENS_PER_SUBMIT
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
        return Seq2Seq(device, encoder, decoder, front[0] if front else None, kernels)

    return await upload(device, planned.graphs, tensors, source, make, progress)


def _u32(values) -> bytes:
    return array("I", values).tobytes()


def allowed_mask(vocab: int, banned) -> bytes:
    """Sampler.mask's bits: every token allowed but `banned`'s."""
    words = array("I", [0xFFFFFFFF]) * (-(-vocab // 32))
    if vocab % 32:
        words[-1] = (1 << vocab % 32) - 1
    for t in banned:
        words[t // 32] &= ~(1 << t % 32)
    return words.tobytes()


class RangeBest(NamedTuple):
    """A range of a logits row: its best logit, that token's id (the first of equal maxima) and
    the log-sum-exp of the range."""

    value: float
    id: int
    lse: float


@dataclass
class GenerateStats:
    """The last generation's times (host clock, the GPU's work awaited included): from its call to
    its first token (an encode queued before it included), and from there to its last token."""

    first_token_seconds: float = 0.0
    tokens: int = 0
    later_seconds: float = 0.0  # the tokens after the first

    @property
    def seconds_per_token(self) -> float | None:
        """Each token after the first's (None with fewer than two)."""
        return self.later_seconds / (self.tokens - 1) if self.tokens > 1 else None


class Seq2Seq:
    def __init__(self, device, encoder, decoder, front=None, kernels=None):
        """Use load_seq2seq (kernels: its KernelCache, for the GPU's token choice)."""
        self.device, self.encoder, self.decoder, self.front = device, encoder, decoder, front
        self.stats = GenerateStats()
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
        self.sampler = None if kernels is None else Sampler(device, kernels, self.vocab, self.logits)
        self._staging = None  # generate_greedy's staged inputs (a forward's Step, position, RoPE rows)
        self._split = {}  # generate_split's commands after a forward, by split

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

    async def sync(self) -> None:
        """Wait for the work submitted so far (a 4-byte read after it)."""
        await self.device.fetch(self.device.submit([Read(self.logits, 0, 4)])[0])

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
        read = self.device.submit(self._prompt_commands(ids, pos) + [Read(self.logits, 0, self.vocab * 4)])[0]
        return array("f", await self.device.fetch(read))

    def _prompt_commands(self, ids: list[int], pos: int) -> list:
        """Submit the forwards over `ids` from pos but the last (at most max_rows each); return the
        last one's commands (its logits: the row after the last id)."""
        last = (len(ids) - 1) // self.max_rows * self.max_rows  # the last forward's first id
        for start in range(0, last, self.max_rows):
            self.device.submit(self._forward(ids[start : start + self.max_rows], pos + start))
        return self._forward(ids[last:], pos + last)

    async def generate(self, prompt: list[int], choose: Callable, max_new_tokens: int):
        """Async generator of the tokens choose(tokens, logits) picks after the prompt, each fed
        back, until max_new_tokens or the decoder's context is reached (or the caller stops)."""
        tokens, feed, pos = list(prompt), list(prompt), 0
        clock = self._clock()
        for _ in range(max_new_tokens):
            if pos + len(feed) > self.context:
                return
            logits = await self.logits_after(feed, pos)
            pos += len(feed)
            token = choose(tokens, logits)
            tokens.append(token)
            clock()
            yield token
            feed = [token]

    def _clock(self) -> Callable:
        """A new self.stats and what to call as each token is chosen."""
        stats, start = GenerateStats(), time.perf_counter()
        self.stats = stats

        def tick():
            now = time.perf_counter()
            if stats.tokens:
                stats.later_seconds = now - start - stats.first_token_seconds
            else:
                stats.first_token_seconds = now - start
            stats.tokens += 1

        return tick

    async def generate_greedy(self, prompt: list[int], max_new_tokens: int, first_banned=(), banned=()):
        """Async generator of the greedy tokens after the prompt (the first of equal maxima, as
        torch's argmax), first_banned suppressed at the first token and banned at every later one,
        until max_new_tokens or the decoder's context is reached (or the caller stops). Chosen on the
        GPU: each pick feeds the next forward there, forwards go several a submit (1, 2, 4, ... up to
        TOKENS_PER_SUBMIT, SUBMITS_AHEAD submits in flight), the host reads each pick's 4 bytes. A
        caller that stops leaves at most the submits in flight to run (their picks unread)."""
        if self.sampler is None:
            raise ValueError("this Seq2Seq was made without kernels: it has no GPU token choice")
        room = min(max_new_tokens, self.context - len(prompt) + 1)  # pick k comes from position len(prompt) + k - 2
        if room <= 0:
            return
        masks = [allowed_mask(self.vocab, b) if b else None for b in (first_banned, banned)]
        feedback = self.sampler.gpu_feedback(SamplingParams(), self._inputs["ids"], [])
        clock = self._clock()
        ahead = SUBMITS_AHEAD if self.device.reads_overlap else 1
        groups, submitted, size, pos = deque(), 0, 1, len(prompt)
        for _ in range(room):
            while len(groups) < ahead and submitted < room:
                if submitted == 0:
                    count, commands = 1, self._prompt_commands(prompt, 0) + self._mask(masks[0]) + feedback
                else:
                    count = min(room - submitted, size)
                    size = min(2 * size, TOKENS_PER_SUBMIT)
                    commands = self._group(count, pos, self._mask(masks[1]) + feedback)
                    pos += count
                groups.append(deque(self.device.submit(commands)))
                submitted += count
            token = struct.unpack("<I", await self.device.fetch(groups[0].popleft()))[0]
            if not groups[0]:
                groups.popleft()
            clock()
            yield token

    async def generate_split(self, prompt: list[int], max_new_tokens: int, split: int, mask, pick):
        """Async generator of the tokens pick(tokens, low, high) chooses after the prompt, each fed
        back, until max_new_tokens or the decoder's context is reached (or the caller stops): each
        step the row masked by mask(tokens) (Sampler.mask's bits) on the GPU, then the RangeBest of
        [0, split) (low) and of [split, vocab) (high), 24 bytes read back."""
        if self.sampler is None:
            raise ValueError("this Seq2Seq was made without kernels: it has no GPU token choice")
        if split not in self._split:
            self._split[split] = self._range_commands(split)
        after = self._split[split]
        tokens, feed, pos = list(prompt), list(prompt), 0
        clock = self._clock()
        for _ in range(max_new_tokens):
            if pos + len(feed) > self.context:
                return
            commands = self._prompt_commands(feed, pos) + self.sampler.mask(mask(tokens)) + after
            raw = await self.device.fetch(self.device.submit(commands)[0])
            pos += len(feed)
            low, high = (RangeBest(*struct.unpack_from("<fIf", raw, 12 * i)) for i in range(2))
            token = pick(tokens, low, high._replace(id=high.id + split))
            tokens.append(token)
            clock()
            yield token
            feed = [token]

    def _range_commands(self, split: int) -> list:
        """The top-k passes (row_draw.RowDraw's) over [0, split) and [split, vocab): their first
        candidate and log-sum-exp copied side by side, and a Read of them."""
        widest = max(split, self.vocab - split)
        tiles = -(-widest // TILE)
        scratch = [self.device.create_buffer(n, label="range top-k") for n in (8 * CANDIDATES * tiles, 8 * tiles)]
        scratch = [(b, 0, b.size) for b in scratch]
        out = self.device.create_buffer(24, label="range bests")
        commands, logits = [], (self.logits, 0, 4 * self.vocab)
        for i, (base, count) in enumerate(((0, split), (split, self.vocab - split))):
            row = RowDraw(self.device, self.decoder.kernels, count, logits, base, scratch)
            self.device.write_buffer(row.topk_params, 0, row.topk_bytes(1.0))
            commands += row.topk + [
                Copy(row.result, 0, out, 12 * i, 8),
                Copy(row.result, 8 * CANDIDATES, out, 12 * i + 8, 4),
            ]
        return commands + [Read(out, 0, 24)]

    def _mask(self, allowed: bytes | None) -> list:
        return [] if allowed is None else self.sampler.mask(allowed)

    def _group(self, count: int, pos: int, after: list) -> list:
        """`count` one-token forwards from position pos for one submit, each fed the pick before it
        (in "ids" on the GPU), its Step, position and RoPE rows copied from a staging buffer, and
        `after` (the mask, the pick and its feedback) after each."""
        rope_bytes = [-(-len(rotary.table(0, 1)) // 16) * 16 for _, rotary in self._rotary]
        at_position = -(-STEP_BYTES // 16) * 16
        slot = at_position + 16 + sum(rope_bytes)  # the Step, the position (padded to 16), the RoPE rows
        if self._staging is None or self._staging.size < count * slot:
            self._staging = self.device.create_buffer(TOKENS_PER_SUBMIT * slot, label="seq2seq inputs")
        staged, commands = bytearray(count * slot), []
        if "last_row" in self._inputs:
            self.device.write_buffer(self._inputs["last_row"], 0, _u32([0]))
        for i in range(count):
            at = i * slot
            staged[at : at + STEP_BYTES] = step_bytes(1, pos + i)
            staged[at + at_position : at + at_position + 4] = _u32([pos + i])
            if "positions" in self._inputs:
                commands.append(Copy(self._staging, at + at_position, self._inputs["positions"], 0, 4))
            rope_at = at + at_position + 16
            for (buffer, rotary), padded in zip(self._rotary, rope_bytes):
                row = rotary.table(pos + i, 1)
                staged[rope_at : rope_at + len(row)] = row
                commands.append(Copy(self._staging, rope_at, buffer, 0, len(row)))
                rope_at += padded
            commands += self.decoder.staged_commands(1, pos + i, self._staging, at) + after
        self.device.write_buffer(self._staging, 0, bytes(staged))
        return commands
