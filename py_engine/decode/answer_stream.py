"""One answer as text, the one way every answerer turns tokens into it (the CLI's generate, the
terminal chat, the OpenAI layer that the browser worker and the desktop server speak): the token
ids a loaded model generates for a prompt through its prompt cache, decoded by the tokenizer's
stream decoder (a token's text may wait for the next: a character split across tokens), ended by a
stop id, a stop string (stop_strings.py: held back until it cannot be one), a finished constraint,
a cancel or the length."""

from __future__ import annotations

import asyncio
import time

from ..errors import WispError
from ..gpu import Read
from .stop_strings import StopStrings


class AnswerStream:
    """Async iterable of the answer's text pieces (none empty; a model without a tokenizer gives
    none, only tokens). Afterwards: tokens (every id generated, a final stop id included),
    token_times (perf_counter() as each arrived), started (perf_counter() before the prompt went
    in), encoded (perf_counter() once its pictures' embeddings were seen done on the GPU, by the
    first token; None without pictures) and stop: why it ended, "eos" (a stop id), "stop" (a stop string, or the constraint was
    finished), "cancel" or "length"."""

    def __init__(
        self,
        model,
        ids: list[int],
        max_new_tokens: int,
        sampling,
        *,
        stop_strings=(),
        constraint=None,
        cancelled=lambda: False,
        ignore_eos: bool = False,
        pictures=(),
    ):
        """model: a session.LoadedModel. cancelled(): asked after every token (the page's Stop, a
        client that went away). ignore_eos: no stop id ends it (benchmarks decode a fixed count).
        pictures: a vision model's (vision/input.py Picture), one for each picture in ids, in order:
        encoded on the GPU before the prompt goes in."""
        self.model, self.ids, self.max_new_tokens, self.sampling = model, ids, max_new_tokens, sampling
        self.stop_strings, self.constraint, self.cancelled = stop_strings, constraint, cancelled
        self.stop_ids = set() if ignore_eos else model.stop_ids
        self.tokens: list[int] = []
        self.token_times: list[float] = []
        self.started = None
        self.encoded = None
        self._encoding = None  # the task that sets `encoded`
        self.stop = "length"
        self.pictures = list(pictures)

    @property
    def completion_tokens(self) -> int:
        """The answer's tokens: a final stop id is not one."""
        return len(self.tokens) - (self.stop == "eos")

    def __aiter__(self):
        return self._pieces()

    async def _place_pictures(self, keep: int) -> None:
        """The prompt cache's prepare: the pictures encoded unless every picture token is reused.
        Not waited for: the prompt's forward goes in behind them while the GPU encodes (H200,
        Gemma-3-4B: the ~5 ms of host work a prompt's forward takes); a read of their embeddings
        submitted after them is watched beside it for the stats' encode time."""
        if await place_pictures(self.model, self.ids, self.pictures, keep):
            engine = self.model.engine
            pending = engine.device.submit([Read(engine.image_embeds, 0, 4)])[0]
            self._encoding = asyncio.ensure_future(self._note_encoded(engine.device, pending))

    async def _note_encoded(self, device, pending) -> None:
        await device.fetch(pending)
        self.encoded = time.perf_counter()

    async def _encoded(self) -> None:
        """Wait for the encode time's task (done once a token came: the pictures went first)."""
        if self._encoding is not None:
            task, self._encoding = self._encoding, None
            await task

    async def _pieces(self):
        tok = self.model.tok
        decoder = tok.stream_decoder(skip_special_tokens=True) if tok else None
        stops = StopStrings(self.stop_strings)
        self.started = time.perf_counter()
        keys, prepare = None, None
        if getattr(self.model, "vision", None) is not None:
            keys, prepare = self.model.vision.picture_keys(self.ids, self.pictures), self._place_pictures
        elif self.pictures:
            raise WispError(f"{self.model.id} reads no pictures (a text-only model)")
        generation = self.model.cache.generate(
            self.ids, self.max_new_tokens, self.sampling, self.stop_ids, self.constraint, keys=keys, prepare=prepare
        )
        try:
            async for token in generation:
                self.tokens.append(token)
                self.token_times.append(time.perf_counter())
                await self._encoded()
                if token in self.stop_ids:
                    self.stop = "eos"
                    break
                text = stops.push(decoder.push(token)) if decoder else ""
                if text:
                    yield text
                if stops.stopped:
                    self.stop = "stop"
                    break
                if self.cancelled():
                    self.stop = "cancel"
                    break
            else:
                if self.constraint is not None and self.constraint.finished:
                    self.stop = "stop"
        finally:
            await generation.aclose()  # now, not at garbage collection: the cache must know what it holds
            await self._encoded()
        tail = stops.push(decoder.flush()) + stops.flush() if decoder else ""
        if tail:
            yield tail


async def place_pictures(model, ids: list[int], pictures: list, keep: int = 0) -> bool:
    """A vision model's pictures encoded where the prompt's picture tokens from position `keep` on
    read them (not when every picture token lies before keep: those are cached), and every
    position's slot placed (the others text). Returns whether they were encoded."""
    vision = model.vision
    token = vision.image_token_id
    encode = token in ids[keep:]
    if encode:
        await vision.encode(model.engine, pictures)
    model.engine.place_images(0, ids, token)
    return encode
