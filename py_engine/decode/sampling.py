"""Token sampling: repetition penalty, greedy argmax, and temperature / top-k / top-p draws.

Semantics are HF transformers' generation: RepetitionPenaltyLogitsProcessor, then temperature →
top_k → top_p, then one multinomial draw (here a uniform u from `random.Random(seed)`, mapped through
the inverse CDF). Tokens are ranked by logit, ties → lower id, everywhere:
- top_k keeps every token whose logit is >= the top_k-th largest (ties at the cut all kept, as HF);
- top_p then keeps the shortest prefix of that ranking whose renormalised mass reaches top_p (at
  least one token); HF splits ties at this cut in torch.sort's order, here lower ids come first.

The vocabulary is only ever touched on the GPU. Per token, `commands` appends to the forward pass:
greedy → `argmax` (two dispatches, 8 bytes read back); sampling → `topk_chunks` + `topk_merge`, which
leave the row's first CANDIDATES tokens with their logits and the exact log-sum-exp of the whole row
(a few hundred bytes). `pick` then decides in Python on those few numbers. Only when the answer
depends on tokens past the candidates does it run `sample_full`: one more GPU round trip, exact, and
slower (one workgroup; a cut takes 8-13 passes over the row: ~1.6-6 ms on an H100 at 150-260k vocab):
- no top_k / top_p truncation and u lands past the candidates' mass: a draw among the other tokens;
- top_p with no top_k whose nucleus is larger than the candidates;
- top_k > CANDIDATES (below vocab), any top_p: the kept set's mass is unknown without the cut;
- top_k <= CANDIDATES whose tie at the cut runs past the last candidate.
Probabilities are computed in f32 on the GPU; "exact" means up to that rounding.

The engine decodes through `gpu_feedback` instead: the same draw made on the GPU (row_draw.py),
the penalty's history kept as a flag per vocabulary entry (`mark_seen` sets the chosen token's),
and the token copied to where the next forward reads its input: no host between two forwards.
Each token's u comes from the same `random.Random(seed)` sequence, so a seed gives the same tokens
both ways (tests/test_decode_loop.py) up to f32 against Python's doubles at a CDF boundary;
`commands` + `pick` remain the reference.
"""

from __future__ import annotations

import random
import struct
from array import array
from collections import deque

from ..gpu import Copy, Dispatch, Read
from .row_draw import CANDIDATES, THREADS, TILE, RowDraw, params_bytes, sampling_kernel
from .token_choice import FullDraw, SamplingParams, check_params, choose

ARGMAX_MAX_GROUPS = 256  # so one workgroup finishes the argmax
CANDIDATE_FORMAT = "<fI"  # struct Candidate { value: f32, id: u32 }


class Sampler:
    """Picks the next token from one logits row on the GPU; everything is allocated here, once."""

    def __init__(
        self, device, kernels, vocab_size: int, logits_buffer, logits_offset: int = 0, max_history: int = 8192
    ):
        if logits_offset % 4:
            raise ValueError("logits_offset must be a multiple of 4")
        self.device = device
        self._kernels = kernels
        self.vocab = vocab_size
        self.max_history = max_history
        # Storage bindings start at aligned offsets: bind from the aligned start, index from the row.
        bind_start = logits_offset - logits_offset % device.caps.limits.storage_offset_alignment
        self._logits_base = (logits_offset - bind_start) // 4
        logits = (logits_buffer, bind_start, logits_offset - bind_start + 4 * vocab_size)
        self._written: dict[int, bytes] = {}  # id(buffer) → bytes last written there (buffers held by self)
        self._pending = None  # "greedy" or "sample": what the last `commands` queued
        self._rng = None
        self._rng_seed = None
        self._unread: deque[float] = deque()  # u's handed back (unread): drawn before the rng's next

        def buffer(size, kind="storage", label=""):
            buf = device.create_buffer(size, kind, label)
            return buf, (buf, 0, size)

        self._penalty = sampling_kernel(kernels, "repetition_penalty", SEEN=False)
        self._penalty_ids, ids_binding = buffer(4 * max_history, label="penalty ids")
        self._penalty_params, p = buffer(16, "uniform")
        self._penalty_group = device.create_bind_group(self._penalty.handle, [p, ids_binding, logits])
        # On the GPU-fed path the history is a flag per vocabulary entry, set by mark_seen.
        seen_penalty = sampling_kernel(kernels, "repetition_penalty", SEEN=True)
        self._seen, seen = buffer(4 * vocab_size, label="seen ids")
        self._seen_params, p = buffer(16, "uniform")
        self._seen_penalty = Dispatch(
            seen_penalty.handle,
            device.create_bind_group(seen_penalty.handle, [p, seen, logits]),
            (-(-vocab_size // THREADS), 1, 1),
        )
        self._mark_kernel, self._marks = kernels.get("mark_seen"), {}  # ids buffer → its mark_seen dispatch

        self._argmax_groups = min(ARGMAX_MAX_GROUPS, -(-vocab_size // THREADS))
        self._argmax_kernels = tuple(sampling_kernel(kernels, "argmax", FINAL=f) for f in (False, True))
        self._logits_at = (logits_buffer, bind_start)
        self._row_argmax = [self._argmax_row(0)]  # per logits row, _argmax_row: row 0's for commands / pick
        self._row_ids = device.create_buffer(4 * 64, label="row ids")

        # The draws of logits rows 0.. (RowDraw): row 0's for the decode loop and the host's pick,
        # more as rows_pick needs them; the top-k passes' scratch is shared.
        tiles = -(-vocab_size // TILE)
        self._draw_scratch = (
            buffer(8 * CANDIDATES * tiles, label="topk lists")[1],
            buffer(8 * tiles, label="topk stats")[1],
        )
        self._rows = [self._row_draw(0)]
        self._mask = None  # constrained decoding's mask buffer and dispatch (mask), made on first use
        # ...but its kernel now, with the model's: compiled before the first submit (the browser
        # compiles asynchronously; a kernel first met at submit time is compiled synchronously).
        self._mask_kernel = sampling_kernel(kernels, "logit_mask")

        # The host's exact draw (pick() when the candidates cannot decide), with Params of its own.
        self._full = sampling_kernel(kernels, "sample_full")
        self._full_chosen, chosen = buffer(4, label="sample_full")
        self._full_params, p = buffer(params_bytes(self._full), "uniform")
        self._full_draw = Dispatch(
            self._full.handle, device.create_bind_group(self._full.handle, [p, logits, chosen]), (1, 1, 1)
        )

    def mask(self, allowed: bytes) -> list:
        """The dispatch that makes every token outside `allowed` (a bit per vocabulary entry,
        ceil(vocab / 32) little-endian u32 words: constrain.Constraint.mask()) impossible on row 0,
        written now; it goes before `commands`' dispatches (after the LM head wrote the row)."""
        words = -(-self.vocab // 32)
        if len(allowed) != 4 * words:
            raise ValueError(f"a mask of {len(allowed)} bytes for a vocabulary of {self.vocab}: {4 * words} expected")
        if self._mask is None:
            kernel = self._mask_kernel
            buffer = self.device.create_buffer(4 * words, label="logit mask")
            params = self.device.create_buffer(16, "uniform")
            self.device.write_buffer(
                params, 0, kernel.pack_params({"vocab": self.vocab, "logits_base": self._logits_base})
            )
            logits, _ = self._row_logits(0)
            group = self.device.create_bind_group(kernel.handle, [(params, 0, 16), (buffer, 0, 4 * words), logits])
            self._mask = (buffer, Dispatch(kernel.handle, group, (-(-self.vocab // THREADS), 1, 1)))
        buffer, dispatch = self._mask
        self.device.write_buffer(buffer, 0, allowed)
        return [dispatch]

    def _row_logits(self, r: int) -> tuple:
        """The binding of logits rows 0..r (from the aligned start) and row r's first element in it."""
        buffer, bind_start = self._logits_at
        base = self._logits_base + r * self.vocab
        return (buffer, bind_start, 4 * (base + self.vocab)), base

    def _row_draw(self, r: int) -> RowDraw:
        logits, base = self._row_logits(r)
        return RowDraw(self.device, self._kernels, self.vocab, logits, base, self._draw_scratch)

    def rows_pick(self, rows: int, params: SamplingParams, us: list[float] = ()) -> list:
        """Commands for the token chosen from each of the logits buffer's first `rows` rows (an LM
        head that scored several: drafted tokens verified in one forward), ending in one Read of
        `rows` little-endian u32 ids: the argmax, or (temperature > 0) row r drawn at us[r] as the
        decode loop's draw would (no repetition penalty: its history would differ per row)."""
        if rows > self._row_ids.size // 4:
            raise ValueError(f"{rows} logits rows > {self._row_ids.size // 4}")
        check_params(params)
        if params.repetition_penalty != 1:
            raise ValueError("rows_pick applies no repetition penalty")
        commands = []
        if params.temperature == 0:
            while len(self._row_argmax) < rows:
                self._row_argmax.append(self._argmax_row(len(self._row_argmax)))
            for r, (dispatches, best) in enumerate(self._row_argmax[:rows]):
                commands += dispatches + [Copy(best, 8 * self._argmax_groups + 4, self._row_ids, 4 * r, 4)]
            return commands + [Read(self._row_ids, 0, 4 * rows)]
        if len(us) != rows:
            raise ValueError(f"{rows} rows drawn at {len(us)} uniforms")
        while len(self._rows) < rows:
            self._rows.append(self._row_draw(len(self._rows)))
        for r, (row, u) in enumerate(zip(self._rows, us)):
            self._write(row.topk_params, row.topk_bytes(params.temperature))
            self.device.write_buffer(row.pick_params, 0, row.pick_bytes(params, u))
            commands += row.draw + [Copy(row.picked, 0, self._row_ids, 4 * r, 4)]
        return commands + [Read(self._row_ids, 0, 4 * rows)]

    def _argmax_row(self, r: int) -> tuple[list, object]:
        """The two argmax dispatches over logits row r and the buffer they leave the best in (its
        id at 8 * groups + 4)."""
        chunks, final = self._argmax_kernels
        logits, base = self._row_logits(r)
        best = self.device.create_buffer(8 * (self._argmax_groups + 1), label="argmax")
        params = self.device.create_buffer(16, "uniform")
        self.device.write_buffer(
            params, 0, chunks.pack_params({"vocab": self.vocab, "logits_base": base, "groups": self._argmax_groups})
        )
        dispatches = [
            Dispatch(
                k.handle, self.device.create_bind_group(k.handle, [(params, 0, 16), logits, (best, 0, best.size)]), grid
            )
            for k, grid in ((chunks, (self._argmax_groups, 1, 1)), (final, (1, 1, 1)))
        ]
        return dispatches, best

    def _write(self, buffer, data: bytes) -> None:
        if self._written.get(id(buffer)) != data:
            self.device.write_buffer(buffer, 0, data)
            self._written[id(buffer)] = data

    def commands(self, params: SamplingParams, history: list[int]) -> list:
        """Dispatches to append to the forward pass's submit (after the LM head wrote the row).
        The penalty is applied in place on the row."""
        check_params(params)
        out = []
        if params.repetition_penalty != 1:
            seen = self._penalised(history)
            if len(seen) > self.max_history:
                raise ValueError(f"{len(seen)} distinct history ids > max_history {self.max_history}")
            if seen:
                self._write(self._penalty_ids, array("I", seen).tobytes())
                self._write(
                    self._penalty_params,
                    self._penalty.pack_params(
                        {"count": len(seen), "penalty": params.repetition_penalty, "logits_base": self._logits_base}
                    ),
                )
                out.append(Dispatch(self._penalty.handle, self._penalty_group, (-(-len(seen) // THREADS), 1, 1)))
        if params.temperature == 0:
            self._pending = "greedy"
            dispatches, _ = self._row_argmax[0]
            return out + dispatches
        self._pending = "sample"
        row = self._rows[0]
        self._write(row.topk_params, row.topk_bytes(params.temperature))
        return out + row.topk

    def _penalised(self, history: list[int]) -> list[int]:
        """The history's distinct ids the penalty applies to, in order of first use (which keeps
        the uploaded list stable as the history grows); HF ignores ids past the row (tokens the
        head cannot produce)."""
        seen = [t for t in dict.fromkeys(history) if t < self.vocab]
        if seen and min(seen) < 0:
            raise ValueError("negative token id in history")
        return seen

    def gpu_feedback(self, params: SamplingParams, ids_buffer, history: list[int]) -> list:
        """Decoding that stays on the GPU: the token chosen on the GPU, copied to ids_buffer[0]
        (where the next forward's embedding reads it) and set aside for the host (one Read: the
        submit's pending read holds it as a little-endian u32). Greedy: the argmax. Sampling: the
        top-k candidates, sample_pick's draw and, when the candidates cannot decide, sample_full's
        exact draw (dispatched every time; it returns at once when sample_pick decided). A
        repetition penalty reads the history's flags (set here from `history`), and each chosen
        token sets its own. Call next_draw before each submit of these commands."""
        check_params(params)
        before, after = [], []
        if params.repetition_penalty != 1:
            flags = array("I", bytes(4 * self.vocab))
            for t in self._penalised(history):
                flags[t] = 1
            self.device.write_buffer(self._seen, 0, flags.tobytes())
            self.device.write_buffer(
                self._seen_params,
                0,
                self._penalty.pack_params(
                    {"count": self.vocab, "penalty": params.repetition_penalty, "logits_base": self._logits_base}
                ),
            )
            before, after = [self._seen_penalty], [self._mark(ids_buffer)]
        if params.temperature == 0:
            at = 8 * self._argmax_groups + 4  # the final best's id
            dispatches, best = self._row_argmax[0]
            return before + dispatches + [Copy(best, at, ids_buffer, 0, 4)] + after + [Read(best, at, 4)]
        row = self._rows[0]
        self._write(row.topk_params, row.topk_bytes(params.temperature))
        return before + row.draw + [Copy(row.picked, 0, ids_buffer, 0, 4)] + after + [Read(row.picked, 0, 4)]

    def _mark(self, ids_buffer) -> Dispatch:
        """mark_seen over ids_buffer[0] (the chosen token, once copied there)."""
        if id(ids_buffer) not in self._marks:
            k = self._mark_kernel
            group = self.device.create_bind_group(k.handle, [(ids_buffer, 0, 16), (self._seen, 0, self._seen.size)])
            self._marks[id(ids_buffer)] = (ids_buffer, Dispatch(k.handle, group, (1, 1, 1)))
        return self._marks[id(ids_buffer)][1]

    def next_draw(self, params: SamplingParams) -> None:
        """Before each submit of gpu_feedback's commands: the next uniform of the seed's sequence
        (the one pick() would use for that token; greedy draws none)."""
        draw = self.draw_params(params)
        if draw is not None:
            self.device.write_buffer(self._rows[0].pick_params, 0, draw)

    def draw_params(self, params: SamplingParams) -> bytes | None:
        """next_draw's bytes for a forward of a submit that carries several (the caller stages them
        and puts draw_copy before that forward's gpu_feedback commands); None when greedy."""
        if params.temperature == 0:
            return None
        return self._rows[0].pick_bytes(params, self.uniform(params))

    def draw_copy(self, staging, offset: int, size: int) -> Copy:
        return Copy(staging, offset, self._rows[0].pick_params, 0, size)

    async def read_candidates(self) -> tuple[list[float], list[int], float]:
        """After the sampling commands ran: the row's first CANDIDATES tokens in the sampling order
        (logits, ids) and the log-sum-exp of logits / temperature over the whole row."""
        raw = await self.device.read_buffer(self._rows[0].result, 0, 8 * CANDIDATES + 4)
        n = min(CANDIDATES, self.vocab)
        pairs = list(struct.iter_unpack(CANDIDATE_FORMAT, raw[: 8 * n]))
        return [v for v, _ in pairs], [i for _, i in pairs], struct.unpack_from("<f", raw, 8 * CANDIDATES)[0]

    def reset(self) -> None:
        """Start a new generation: the next draw restarts `random.Random(params.seed)`."""
        self._rng = None
        self._unread.clear()

    def uniform(self, params: SamplingParams) -> float:
        """The seed's next u: token i of a generation is drawn at the i-th."""
        if self._unread:
            return self._unread.popleft()
        if self._rng is None or params.seed != self._rng_seed:
            self._rng, self._rng_seed = random.Random(params.seed), params.seed
        return self._rng.random()

    def unread(self, us) -> None:
        """Hand back u's drawn ahead and not used (rows a verification rejected): the next draws."""
        self._unread.extendleft(reversed(list(us)))

    async def pick(self, params: SamplingParams) -> int:
        """The token chosen by the commands last returned by `commands(params, ...)`, once run.
        Picking again without new commands draws again from the same row."""
        if self._pending is None:
            raise RuntimeError("pick() needs the commands of commands() to have been submitted")
        if self._pending == "greedy":
            _, best = self._row_argmax[0]
            raw = await self.device.read_buffer(best, 8 * self._argmax_groups, 8)
            return struct.unpack(CANDIDATE_FORMAT, raw)[1]
        values, ids, lse = await self.read_candidates()
        choice = choose(values, ids, lse, params, self.vocab, self.uniform(params))
        if isinstance(choice, int):
            return choice
        return await self.draw_on_gpu(choice, params, values[-1], ids[-1], lse)

    async def draw_on_gpu(
        self, draw: FullDraw, params: SamplingParams, last_value: float, last_id: int, lse: float
    ) -> int:
        """Run sample_full.wgsl on the row; (last_value, last_id) is the last candidate, lse the row's."""
        self._write(
            self._full_params,
            self._full.pack_params(
                {
                    "vocab": self.vocab,
                    "logits_base": self._logits_base,
                    "inv_temperature": 1 / params.temperature,
                    "lse": lse,
                    "top_k": draw.top_k,
                    "top_p": draw.top_p,
                    "skip_candidates": int(draw.skip_candidates),
                    "last_value": last_value,
                    "last_id": last_id,
                    "u": draw.u,
                    "skip_draw": 0,
                }
            ),
        )
        self.device.submit([self._full_draw])
        raw = await self.device.read_buffer(self._full_chosen, 0, 4)
        return struct.unpack("<I", raw)[0]

    async def sample(self, params: SamplingParams, history: list[int]) -> int:
        self.device.submit(self.commands(params, history))
        return await self.pick(params)
