"""Whisper behind the Transcriber interface (transcriber.py): `await load_whisper_transcriber(model,
device)`, then `async for segment in t.transcribe(audio)`.

Audio goes in 30-second windows that seek as transformers' sequential generation does
(whisper_generation.py): a window starts at log-mel frame `seek` (10 ms each); its tokens split into
segments at timestamp pairs; the next window starts after the window, or at its last timestamp where
its last segment was cut off. Audio of at most 30 s counts as 3,000 frames (transformers pads it to
a window); longer audio is long-form: timestamps are on (they drive the seek), its frames are its
samples / 160. The audio is read as it comes (a sequence of floats, or an async iterable of chunks):
never more than a window and a chunk held, so a 2-hour stream is fine.

A window's features are the log-mel of the window's own 30 s of audio (zero past its end), normalised
by its own loudest frame (the front-end graph: models/log_mel.py). transformers slices the features of
the whole recording instead (normalised by the recording's loudest frame, zero features past its end):
the same for audio of at most 30 s until a window seeks past 0, close elsewhere (a stream cannot be
normalised by what has not arrived). tests/test_whisper.py gives the windows transformers' own
features (encode_window) to check the seek and the segments exactly.
"""

from __future__ import annotations

import re
from array import array

from ..models.log_mel import HOP, N_SAMPLES, SAMPLE_RATE
from .log_mel import window_bytes
from .seq2seq import Seq2Seq
from .transcriber import Segment
from .whisper_generation import (
    WINDOW_FRAMES,
    TimestampMask,
    WindowSegment,
    init_tokens,
    needs_language,
    split_window,
)
from .whisper_model import WhisperFiles, load_whisper, read_whisper_files

TIMESTAMP = re.compile(r"<\|(\d+\.\d+)\|>")  # a timestamp token's text


class AudioReader:
    """The audio's samples as they arrive, the ones before a window's start let go."""

    def __init__(self, audio):
        self._source = _chunks(audio)
        self.samples = array("f")
        self.first = 0  # the sample samples[0] is
        self.total: int | None = None  # known once the audio has ended

    async def fill(self, end: int) -> None:
        """Read until sample `end` is held or the audio ends."""
        while self.total is None and self.first + len(self.samples) < end:
            chunk = await anext(self._source, None)
            if chunk is None:
                self.total = self.first + len(self.samples)
            else:
                self.samples.extend(chunk if isinstance(chunk, array) else array("f", chunk))

    def window(self, start: int, count: int) -> array:
        """Samples [start, start + count) (fewer at the end), those before start let go."""
        if start > self.first:
            del self.samples[: start - self.first]
            self.first = start
        return self.samples[start - self.first : start - self.first + count]


async def _chunks(audio):
    if hasattr(audio, "__aiter__"):
        async for chunk in audio:
            yield chunk
        return
    for at in range(0, len(audio), N_SAMPLES):
        yield audio[at : at + N_SAMPLES]


class WhisperTranscriber:
    sample_rate = SAMPLE_RATE

    def __init__(self, files: WhisperFiles, model: Seq2Seq, model_id: str):
        """Use load_whisper_transcriber."""
        self.files, self.model, self.model_id = files, model, model_id
        self.settings = files.settings
        self.rows = files.geometry["frames"]

    async def transcribe(
        self,
        audio,
        *,
        language: str | None = None,
        timestamps: bool = False,
        prompt: str | None = None,
        max_tokens: int | None = None,
        task: str | None = None,
    ):
        """Segments of `audio` (floats at 16 kHz in [-1, 1], or an async iterable of chunks) as each
        window is decoded. language: "en", "english" or "<|en|>" (default: detected from the first
        window on a multilingual model); timestamps: segments at the model's timestamps (always for
        audio past 30 s); prompt: text the model takes as what came before; max_tokens: the most
        tokens of the whole transcript (timestamps included); task: "transcribe" or "translate" (to English)."""
        budget = max_tokens
        steps = self.windows(
            audio, language=language, timestamps=timestamps, prompt=prompt, task=task, window_tokens=lambda: budget
        )
        async for window in steps:
            for piece in window:
                tokens = piece.tokens if budget is None else piece.tokens[: max(budget, 0)]
                if budget is not None:
                    budget -= len(tokens)
                yield Segment(piece.start, piece.end, self.text(tokens), tokens)
            if budget is not None and budget <= 0:
                return

    async def windows(
        self,
        audio,
        *,
        language: str | None = None,
        timestamps: bool = False,
        prompt: str | None = None,
        task: str | None = None,
        window_tokens=None,
    ):
        """Each window's segments (whisper_generation.WindowSegment: their tokens, timestamps included)
        as transformers' generate gives them. window_tokens: the most new tokens a window (its
        max_new_tokens; default: up to the decoder's max_target_positions), or a function giving it
        before each window (None: no bound; a bound past the decoder's room is cut to it)."""
        settings = self.settings
        if (language is not None or task is not None) and not settings.multilingual:
            raise ValueError(f"{self.model_id} is an English-only model: it takes no language or task")
        reader = AudioReader(audio)
        await reader.fill(N_SAMPLES + 1)
        short = reader.total is not None and reader.total <= N_SAMPLES
        timestamps = timestamps or not short
        prefix = self.prompt_ids(prompt) if prompt else []
        lang = None if language is None else settings.language_id(language)
        detect, detected = needs_language(settings, lang, task), None
        seek = 0
        while True:
            await reader.fill((seek + WINDOW_FRAMES) * HOP)
            frames = WINDOW_FRAMES - seek if short else self._audio_frames(reader, seek)  # its seek_num_frames
            if frames <= 0:
                return
            self.encode_window(reader.window(seek * HOP, frames * HOP), seek, frames)
            if detect and detected is None:  # from the first window, for all (as transformers)
                detected = await self.detect_language()
            start = init_tokens(settings, lang, task, timestamps, detected)
            limit = window_tokens() if callable(window_tokens) else window_tokens
            if callable(window_tokens) and limit is not None:
                limit = min(limit, self.settings.max_target_positions - len(prefix + start))
            sequence = await self._generate(prefix + start, timestamps, limit)
            segments, advance = split_window(settings, sequence, seek, frames)
            yield segments
            seek += advance if advance > 0 else frames  # a seek of 0 would decode this window again

    def _audio_frames(self, reader: AudioReader, seek: int) -> int:
        """Long-form: the frames of the window from `seek`, at most a window's (the audio's frames are
        its samples / HOP, transformers' features of the whole recording)."""
        if reader.total is None:
            return WINDOW_FRAMES
        return min(reader.total // HOP - seek, WINDOW_FRAMES)

    def encode_window(self, samples: array, seek: int, frames: int) -> None:
        """Submit the front-end and encoder over the window's samples (zero-padded to 30 s)."""
        self.model.encode({"pcm": window_bytes(samples)}, self.rows)

    async def detect_language(self) -> int:
        """The likeliest language token after <|startoftranscript|> (transformers' detect_language)."""
        logits = await self.model.logits_after([self.settings.start], 0)
        return max(self.settings.lang_to_id.values(), key=lambda i: (logits[i], -i))

    async def _generate(self, prompt: list[int], timestamps: bool, window_tokens: int | None) -> list[int]:
        """A window's generated tokens (its end token left out)."""
        settings, limit = self.settings, settings_limit(self.settings, len(prompt), window_tokens)
        begin = len(prompt)
        tokens = []
        if timestamps and settings.timestamp_begin is not None:  # the host picks from each range's best
            mask = TimestampMask(settings, self.model.vocab, begin)
            steps = self.model.generate_split(prompt, limit, settings.timestamp_begin, mask, mask.pick)
        else:  # the suppress lists alone: picked on the GPU
            first = settings.begin_suppress + settings.suppress
            steps = self.model.generate_greedy(prompt, limit, first, settings.suppress)
        async for token in steps:
            if token == settings.eos:
                break
            tokens.append(token)
        await steps.aclose()
        return tokens

    def prompt_ids(self, prompt: str) -> list[int]:
        """<|startofprev|> and the prompt's tokens (transformers' get_prompt_ids: " " + the text stripped)."""
        if self.files.tokenizer is None or self.settings.prev_sot is None:
            raise ValueError(f"{self.model_id} takes no prompt (no tokenizer.json or <|startofprev|>)")
        return [self.settings.prev_sot] + self.files.tokenizer.encode(" " + prompt.strip())

    def text(self, tokens: list[int]) -> str:
        """tokens as text, as transformers' WhisperTokenizer decodes them: its special tokens left out,
        the timestamps decoded in place (bytes either side of one are decoded apart) then removed."""
        tokenizer = self.files.tokenizer
        if tokenizer is None:
            raise ValueError(f"{self.files.source.label} has no tokenizer.json: its tokens cannot be read as text")
        return TIMESTAMP.sub("", tokenizer.decode(tokens, skip_special_tokens=True))


def settings_limit(settings, prompt_len: int, window_tokens: int | None) -> int:
    """A window's most new tokens: window_tokens, or up to max_target_positions (ValueError where the
    prompt and them pass it, as transformers refuses)."""
    room = settings.max_target_positions - prompt_len
    if window_tokens is None:
        return room
    if window_tokens > room:
        raise ValueError(
            f"a prompt of {prompt_len} tokens and {window_tokens} new ones pass the decoder's "
            f"{settings.max_target_positions} positions"
        )
    return window_tokens


async def load_whisper_transcriber(model, device, *, model_id: str | None = None, **options) -> WhisperTranscriber:
    """A WhisperTranscriber of `model` (an HF folder of WhisperForConditionalGeneration, its
    ModelSource, or read_whisper_files' result) on `device`. options: load_whisper's (f32,
    max_binding, progress, gpu_budget)."""
    files = model if isinstance(model, WhisperFiles) else read_whisper_files(model)
    seq2seq = await load_whisper(files, device, **options)
    name = model_id or files.source.label.rstrip("/").rpartition("/")[2]
    return WhisperTranscriber(files, seq2seq, name)


__all__ = ["WhisperTranscriber", "WindowSegment", "load_whisper_transcriber"]
