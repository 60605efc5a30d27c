"""Engine: a loaded model on a device — prefill, decode, sample — async end to end."""

from __future__ import annotations

import logging
import struct
from array import array
from dataclasses import dataclass, replace

from .decode.on_gpu import decode_on_gpu
from .decode.on_host import decode_on_host
from .decode.prompt_lookup import Drafter, lookup_decode
from .decode.sampling import Sampler
from .decode.token_choice import SamplingParams
from .errors import WispError
from .formats.model_files import read_model
from .formats.source import open_source
from .gpu import Copy
from .models.config import ModelConfig
from .models.graph_options import GraphOptions, device_options
from .runtime.executor import STEP_BYTES, Executor, step_bytes
from .runtime.kv_cache import TOKENS_PER_SUBMIT, KVWrites, kv_formats, ring_slack
from .runtime.linear_plan import LOGIT_ROWS_MAX
from .runtime.linear_plan import arithmetic as device_arithmetic
from .runtime.loader import plan, upload
from .runtime.memory import largest_context, too_large
from .runtime.picture_layout import PictureLayout
from .runtime.picture_spans import prefill_chunks
from .runtime.recurrent_state import RecurrentState

log = logging.getLogger("wisp")

# Prompt tokens one prefill forward takes by default: 512 rows keep the matmul's 64 x 64 tiles
# filling the GPU (H200, exact: an 8B layer's Q4_0 matmuls 10.3 ms at 512 rows, 21 TFLOP/s, 3.3 ms
# at 128, 14 on its N = 4096 projections; the 8B's pp512 1,413 tok/s against 1,123 in forwards of
# 128 rows, SmolLM2's 17,349 against 10,582).
PREFILL_ROWS = 512


@dataclass
class DecodeStats:
    """What the last generate's decoding cost; its decode loop adds to it."""

    tokens: int = 0  # decode tokens (the first answer token is the prefill's)
    host_seconds: float = 0.0  # the host encoding and submitting them
    wait_seconds: float = 0.0  # the host waiting for a token the GPU had not finished (the GPU-fed loop)
    constraint_seconds: float = 0.0  # the host in the constraint's mask and advance (constrained decoding)


class Engine:
    """A loaded model on a device. Its decode loops (decode/on_gpu.py, decode/on_host.py,
    decode/prompt_lookup.py: generate picks one) drive it through a small interface and write nothing of
    its state: prefill_commands, forward_commands and decode_group (a forward of these rows),
    gpu_feedback and read_fed_token (the GPU-fed loop's picks), picks_after (read the picks of
    these rows), roll_back (back to this position), the sampler (the draw) and the device's
    submit; they read pos, context, max_rows and tokens_per_submit."""

    def __init__(self, device, cfg: ModelConfig, executor: Executor, kernels, weight_bytes: int, context: int):
        self.device = device
        self.cfg = cfg
        self.executor = executor
        self.weight_bytes = weight_bytes
        self.context = context
        self.max_rows = executor.graph.max_rows
        self.logits_buffer = executor.buffer("logits")
        self.sampler = Sampler(device, kernels, cfg.vocab_size, self.logits_buffer, max_history=context)
        self.pos = 0  # tokens already in the KV cache
        self.tokens: list[int] = []  # the tokens fed at positions 0 .. pos - 1 (past pos: stale)
        # Hybrids: the recurrent state's position and snapshots (recurrent_state.py); tokens a
        # forward recomputed to bring it to its position, since load.
        self.recurrent = RecurrentState(device, executor) if executor.graph.recurrent else None
        self.recomputed = 0
        self._turn_end = None  # where generate's prompt ends: prefill_commands snapshots the state there
        self.kv_writes = KVWrites(executor.graph.ring_slack)  # where the sliding layers' rings hold their windows
        self.stats = DecodeStats()  # the last generate's
        self.drafter = None  # the last generate's prompt_lookup.Drafter (with lookup): its reports
        self.tokens_per_submit = None  # decode forwards per submit: None sizes each group (decode/on_gpu.py)
        # A decode forward's staged inputs, one slot each: its Step, its cos/sin rows (one per
        # RoPE table of the graph), its draw.
        self._rotary = [(executor.buffer(name), rotary) for name, rotary in executor.graph.rotary.items()]
        # LongRoPE (Phi-3): a sequence longer than long_after positions is rotated with the long
        # factors, every key of it, as transformers does (it recomputes the cache when a generation
        # grows past that length). rope_long: how the keys in the cache were rotated.
        switches = [r.long_after for _, r in self._rotary if r.long_after is not None]
        self.long_after = min(switches) if switches else None
        self.rope_long = False
        self._rope_bytes = sum(-(-rotary.row_bytes // 16) * 16 for _, rotary in self._rotary)
        self._slot = STEP_BYTES + self._rope_bytes + 64
        self._staging_bytes = TOKENS_PER_SUBMIT * self._slot
        self._staging = device.create_buffer(self._staging_bytes, label="decode inputs")
        # A vision-language model's text graph (GraphOptions.image_rows): the image embeddings its
        # picture tokens take (image_embeds, which the vision encoder fills) and where the last prompt
        # placed its pictures (runtime/picture_layout.py: slots, Gemma 3's spans, Qwen3.5's positions).
        self.image_embeds = executor.buffer("image_embeds") if "image_slots" in executor.graph.inputs else None
        mrope = any(rotary.streams for _, rotary in self._rotary)
        self._pictures = (
            PictureLayout(device, executor, context, self.max_rows, mrope) if self.image_embeds is not None else None
        )

    @classmethod
    async def load(
        cls,
        model,
        device,
        *,
        max_rows: int = PREFILL_ROWS,
        context: int = 2048,
        max_binding: int = 0,
        progress=None,
        packed_kv: bool = False,
        gpu_budget: int | None = None,
        read=None,
        kv_rings: bool = True,
        precision: str = "fast",
        image_rows: int = 0,
        picture_spans: bool = False,
    ) -> Engine:
        """The one way a model becomes an Engine (session.load adds its tokenizer and stop ids).
        model: a path (a GGUF file or an HF directory: safetensors, optionally MLX-quantized) or a
        ModelSource. max_rows: the most tokens one prefill forward takes. context: the KV cache's
        tokens (at most the model's max_position). max_binding: split weights above this many bytes
        (default: the device's binding limit). progress: (bytes landed, bytes expected) as weights
        reach the GPU. packed_kv: keep K and V as f16 pairs in u32 words (WebKit: half the memory,
        no native f16). gpu_budget: refuse (ModelTooLargeError) before any upload when the model
        needs more bytes. read: read_model(model)'s result when the caller has it already
        (session.load: a GGUF header holds the tokenizer too, and is parsed once).
        kv_rings: a sliding layer caches only its window's keys (kv_cache.py); False: the whole
        context, as a layer without a window does. precision: "fast" (the default: the GEMV of
        the block formats linear_plan.INT8_FORMATS multiplies int8-quantized activations; mean KL
        divergence from exact <= 1e-3, benchmarks/fidelity.py) or "exact" (f32 arithmetic, the
        transformers-parity path). image_rows: a vision-language model's most image embedding rows a
        context holds (its text graph splices them in: place_images); 0: text only. picture_spans:
        its picture tokens see their whole picture in a prompt (Gemma 3: GraphOptions.picture_spans)."""
        source = open_source(model)
        cfg, tensors, _ = read_model(source) if read is None else read
        context = min(context, cfg.max_position)
        half = device.caps.shader_f16
        # Fast falls back to exact per matrix (linear_plan.int8_activations), and everywhere on a
        # device whose packed integer dot products are missing or emulated (linear_plan.arithmetic);
        # engine.precision is what was asked.
        arithmetic = device_arithmetic(precision, device.caps.int8_dot, device.caps.int8_emulated)
        kv = kv_formats(tensors, half, packed_kv)
        options = GraphOptions(
            max_rows=max_rows,
            kv_capacity=context,
            kv_formats=kv,
            **device_options(device, half=half, max_binding=max_binding),
            ring_slack=ring_slack(max_rows) if kv_rings else 0,
            precision=arithmetic,
            image_rows=image_rows,
            picture_spans=picture_spans,
        )
        graph, need = plan(cfg, tensors, source.label, options)
        log.info("graph: %s; GPU memory %s", graph.summary(), need.describe())
        if gpu_budget is not None and need.total > gpu_budget:  # before a byte is uploaded

            def need_at(context: int) -> int:
                return plan(cfg, tensors, source.label, replace(options, kv_capacity=context)).footprint.total

            fitting = largest_context(lambda c: need_at(c) <= gpu_budget, context)
            raise too_large(need, gpu_budget, source.label, context, fitting)

        def make(executor, kernels, weight_bytes):
            return cls(device, cfg, executor, kernels, weight_bytes, context)

        engine = await upload(device, graph, tensors, source, make, progress)
        engine.footprint, engine.kv_formats, engine.precision = need, kv, precision
        return engine

    def reset(self):
        self.pos = 0

    def place_images(self, start: int, ids: list[int], image_token: int) -> int:
        """The prompt `ids`, fed from position `start`, has picture tokens (image_token) whose
        embeddings lie in image_embeds in order (the k-th picture token takes row k): every
        position's slot (and picture end, RoPE position), written before the prompt's prefill (every
        other position is text, so a later prompt's positions read no stale picture). Returns the
        picture tokens' count."""
        if self._pictures is None:
            raise WispError(f"{self.cfg.architecture} reads no pictures")
        return self._pictures.place(start, ids, image_token)

    def picture_grids(self, grids: list[tuple[int, int]]) -> None:
        """The pictures whose embeddings image_embeds now holds, in order, as (rows, cols) of their
        tokens: where a multimodal RoPE (Qwen3.5) puts them (place_images)."""
        if self._pictures is None:
            raise WispError(f"{self.cfg.architecture} reads no pictures")
        self._pictures.grids = list(grids)

    def _rope_table(self, rotary, first: int, rows: int) -> bytes:
        """A forward's cos/sin rows for cache positions first .. first + rows - 1: plain positions, or
        the placed prompt's multimodal ones (and the text after it, delta behind)."""
        positions = self._pictures.positions if self._pictures else None
        if positions is None:
            return rotary.table(first, rows, self.rope_long)
        return rotary.table_at(positions.rows(first, rows))

    def roll_back(self, pos: int) -> None:
        """Go on from `pos`: what was computed past it is forgotten (its keys stay in the caches,
        stale, until forwards write over them; a hybrid's state is brought back by the next
        forward). pos is at most the end of the tokens fed (engine.tokens)."""
        if not 0 <= pos <= len(self.tokens):
            raise ValueError(f"cannot roll back to position {pos}: {len(self.tokens)} tokens were fed")
        self.pos = pos

    def forward_commands(self, ids: list[int]) -> list:
        """The next forward over `ids` (written to the GPU now), at the engine's position."""
        return self._forward(len(ids), ids)

    def _forward(self, rows: int, ids: list[int] | None = None, logit_rows: int = 1) -> list:
        """A forward of `rows` tokens at the engine's position, its LM head scoring the last
        `logit_rows`; ids None: the token is already on the GPU (Sampler.gpu_feedback copied it there)."""
        if ids is not None:
            self._check_ids(ids)
        self._resume()
        self._check_room(rows)
        ex = self.executor
        if ids is not None:
            del self.tokens[self.pos :]
            self.tokens += ids
            self.device.write_buffer(ex.buffer("ids"), 0, array("I", ids).tobytes())
        for buffer, rotary in self._rotary:
            self.device.write_buffer(buffer, 0, self._rope_table(rotary, self.pos, rows))
        commands = ex.commands(rows, self.pos, logit_rows)
        self.pos += rows
        return commands

    def _check_ids(self, ids: list[int]) -> None:
        """Ids from outside (a prompt's, or a tokenizer's whose vocabulary outgrows the model's
        embedding) must name an embedding row: past the rows the GPU would read another or none."""
        vocab = self.cfg.vocab_size
        bad = next((i for i in ids if type(i) is not int or not 0 <= i < vocab), None)
        if bad is not None:
            raise WispError(f"token id {bad!r} is outside the model's vocabulary (0..{vocab - 1})")

    def _check_room(self, rows: int) -> None:
        """Refuse a forward of `rows` at pos past the context or (kv_cache.py) past what the
        sliding layers' rings hold; else record its writes."""
        if self.pos + rows > self.context:
            raise ValueError(f"context full: {self.pos} + {rows} tokens > {self.context}")
        self.kv_writes.forward(self.pos, rows)
        if self.recurrent:
            self.recurrent.advanced(self.pos, rows)

    def _resume(self) -> None:
        """Bring a hybrid's recurrent state to pos where it has gone past it: restore the latest
        snapshot at or before pos, then recompute the tokens from there (recurrent_state.py)."""
        state = self.recurrent
        if state is None or state.pos == self.pos:
            return
        slot, at = state.latest(self.pos)
        if not self.kv_writes.holds(at):  # a sliding layer's ring no longer has the keys before it
            slot, at = None, 0
        self.device.submit(state.restore(slot))
        replay, self.pos = self.tokens[at : self.pos], at
        for start in range(0, len(replay), self.max_rows):
            chunk = replay[start : start + self.max_rows]
            self.device.submit(self._forward(len(chunk), chunk))
        self.recomputed += len(replay)

    def _check_scored_rows(self, rows: int, caller: str) -> None:
        """A forward that scores every row takes 1 to LOGIT_ROWS_MAX (and max_rows: the
        activations hold that many) rows."""
        most = min(LOGIT_ROWS_MAX, self.max_rows)
        if not 1 <= rows <= most:
            raise ValueError(f"{caller} takes 1 to {most} ids, not {rows}")

    async def picks_after(
        self, ids: list[int], sampling: SamplingParams | None = None, us: list[float] = ()
    ) -> list[int]:
        """One forward over `ids` (at most LOGIT_ROWS_MAX) at the engine's position: the token
        chosen after each prefix ids[:i + 1] — greedy, or drawn at us[i] — bit for bit what i + 1
        one-token decodes would choose (the GEMV, attention and LM head compute each row as a
        decode token's, and each row is drawn by the decode loop's kernels): how drafted tokens
        are verified. pos advances by len(ids)."""
        rows = len(ids)
        self._check_scored_rows(rows, "picks_after")
        picks = self.sampler.rows_pick(rows, sampling or SamplingParams(), us)
        self._resume()
        saved = self.recurrent.save() if self.recurrent else []  # its drafts may be rejected
        commands = saved + self._forward(rows, ids, logit_rows=rows) + picks
        return list(struct.unpack(f"<{rows}I", await self.device.fetch(self.device.submit(commands)[0])))

    async def rows_logits(self, ids: list[int], scored: int | None = None) -> list[array]:
        """One forward over `ids` at the engine's position scoring its last `scored` rows (default
        every row; at most LOGIT_ROWS_MAX): the float32 logits after each of those prefixes. A
        forward of at most LOGIT_ROWS_MAX rows computes each row as a decode token's (the GEMV
        path, as picks_after's); a longer one (up to max_rows) as a prompt's (the matmul and the
        prompt's attention). benchmarks/fidelity.py compares precisions with them. pos advances by
        len(ids)."""
        rows, vocab = len(ids), self.cfg.vocab_size
        scored = rows if scored is None else scored
        self._check_scored_rows(scored, "rows_logits")
        if rows < scored or rows > self.max_rows:
            raise ValueError(f"rows_logits takes {scored} to {self.max_rows} ids, not {rows}")
        self._resume()
        self.device.submit(self._forward(rows, ids, logit_rows=scored))
        raw = await self.device.read_buffer(self.logits_buffer, 0, scored * vocab * 4)
        return [array("f", raw[r * vocab * 4 : (r + 1) * vocab * 4]) for r in range(scored)]

    def prefill_commands(self, ids: list[int]) -> list:
        """Run all chunks but the last; return the last chunk's commands (its LM head gives the logits)."""
        if self.pos == 0 and self.long_after is not None:  # a sequence from its start: its length picks
            self.rope_long = len(ids) > self.long_after
        sizes = prefill_chunks(self.pos, len(ids), self.max_rows, self._pictures.spans if self._pictures else [])
        start = 0
        for size in sizes[:-1]:
            self.device.submit(self.forward_commands(ids[start : start + size]))
            start += size
        commands = self.forward_commands(ids[start:])
        if self.recurrent and self.pos == self._turn_end:  # a chat's next turn goes on from here
            commands += self.recurrent.save(turn=True)
        return commands

    async def prompt_logits(self, ids: list[int]) -> list[float]:
        self.device.submit(self.prefill_commands(ids))
        raw = await self.device.read_buffer(self.logits_buffer, 0, self.cfg.vocab_size * 4)
        return list(struct.unpack(f"<{self.cfg.vocab_size}f", raw))

    async def generate(
        self,
        prompt: list[int],
        max_new_tokens: int,
        sampling: SamplingParams | None = None,
        stop_ids=(),
        context_ids: list[int] | None = None,
        constraint=None,
    ):
        """Async generator of new token ids; a stop id is yielded, then generation ends. Closing it
        early (a cancel, a stop string) leaves pos as if the tokens after the last one yielded had
        never been computed: the last yielded token is not in the KV cache. context_ids: every
        token before the answer, cached ones included (the repetition penalty's history, as HF
        takes the whole input); default the prompt. sampling.lookup: draft from the conversation and
        verify drafts in one forward (prompt_lookup.py), without a repetition penalty: the same
        tokens as without it (greedy, or the same seed's draws). constraint: a
        constrain.Constraint whose mask each token is drawn under (decode/on_host.py); generation ends
        when it is finished. Otherwise the GPU-fed loop decodes (decode/on_gpu.py)."""
        sampling = sampling or SamplingParams()
        self.sampler.reset()  # the same seed gives the same answer on every request
        self.stats = DecodeStats()
        history = list(prompt if context_ids is None else context_ids)
        answer = []
        self._turn_end = self.pos + len(prompt)
        while True:
            prompt = self._rotate_for(prompt, history)
            first_input = self.pos + len(prompt)
            count = max_new_tokens - len(answer)
            if self.long_after is not None and not self.rope_long:  # stop before a forward passes long_after
                count = min(count, self.long_after - first_input + 1)
            if constraint is not None:
                tokens = decode_on_host(self, prompt, count, sampling, stop_ids, list(history), self.stats, constraint)
            elif sampling.lookup and sampling.repetition_penalty == 1:
                self.drafter = Drafter(history)
                tokens = lookup_decode(self, self.drafter, prompt, count, sampling, stop_ids, list(history), self.stats)
            else:
                tokens = decode_on_gpu(self, prompt, count, sampling, stop_ids, list(history), self.stats)
            produced = 0
            try:
                async for token in tokens:
                    produced += 1
                    answer.append(token)
                    yield token
            finally:  # closed early (a cancel): the inner loop rolls pos back now, not when collected
                await tokens.aclose()
            if produced < count or len(answer) == max_new_tokens or answer[-1] in stop_ids:
                return
            # The next forward would pass long_after: the whole sequence again, with the long factors.
            history = history + answer[-produced:]
            if len(history) >= self.context:
                return
            self.pos, prompt = 0, history

    def _rotate_for(self, prompt: list[int], history: list[int]) -> list[int]:
        """The prompt to prefill so that every key is rotated as a sequence ending with it is
        (LongRoPE): where the cache's keys were rotated the other way, all of history from
        position 0 (history ends with the prompt)."""
        if self.long_after is None:
            return prompt
        long = self.pos + len(prompt) > self.long_after
        if long != self.rope_long and self.pos:
            if history[-len(prompt) :] != prompt or len(history) != self.pos + len(prompt):
                raise ValueError("context_ids must hold the cached tokens and the prompt")
            self.pos, prompt = 0, history
        self.rope_long = long
        return prompt

    def gpu_feedback(self, sampling: SamplingParams, history: list[int]) -> list:
        """The commands after a GPU-fed forward: its pick (Sampler.gpu_feedback, the penalty's
        history on the GPU) copied to where the next forward reads its input, and a Read of it."""
        return self.sampler.gpu_feedback(sampling, self.executor.buffer("ids"), history)

    async def read_fed_token(self, read) -> int:
        """The token a GPU-fed forward chose, from its Read (gpu_feedback's): the input of the
        next forward, recorded as the token at the next position (engine.tokens)."""
        token = struct.unpack("<I", await self.device.fetch(read))[0]
        self.tokens.append(token)
        return token

    def decode_group(self, count: int, sampling: SamplingParams, feedback: list) -> list:
        """`count` one-token forwards for one submit, their tokens on the GPU (the last forward's
        feedback put them there), each after copies of its staged inputs (Step, cos/sin row,
        draw) and followed by `feedback` (gpu_feedback's) that feeds the next."""
        staged, commands = bytearray(count * self._slot), []
        if count * self._slot > self._staging_bytes:  # more a submit than the loop sizes (a benchmark's choice)
            self._staging_bytes = count * self._slot  # the old buffer lives while submitted work reads it
            self._staging = self.device.create_buffer(self._staging_bytes, label="decode inputs")
        if self.recurrent:  # the loop's stop may land in this group: it goes back to here
            commands += self.recurrent.save()
        for i in range(count):
            self._check_room(1)
            at = i * self._slot
            staged[at : at + STEP_BYTES] = step_bytes(1, self.pos)
            rope_at = at + STEP_BYTES
            for buffer, rotary in self._rotary:
                staged[rope_at : rope_at + rotary.row_bytes] = self._rope_table(rotary, self.pos, 1)
                commands.append(Copy(self._staging, rope_at, buffer, 0, rotary.row_bytes))
                rope_at += -(-rotary.row_bytes // 16) * 16
            commands += self.executor.staged_commands(1, self.pos, self._staging, at)
            draw = self.sampler.draw_params(sampling)
            if draw is not None:
                draw_at = self._slot * (i + 1) - 64
                staged[draw_at : draw_at + len(draw)] = draw
                commands.append(self.sampler.draw_copy(self._staging, draw_at, len(draw)))
            commands += feedback
            self.pos += 1
        self.device.write_buffer(self._staging, 0, bytes(staged))
        return commands
