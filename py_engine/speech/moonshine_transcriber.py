"""Moonshine behind the Transcriber interface (transcriber.py): `await load_moonshine_transcriber(model,
device)`, then `async for segment in t.transcribe(audio)`.

Audio goes in windows (moonshine_generation.windows: at most the encoder graph's 30 s, cut at a quiet
place where more follows; a long stream is never held whole); each window is encoded once, then
decoded greedily from decoder_start_token_id until an end id or its limit (6.5 tokens a second), and
is one Segment spanning the window. A window too short for one encoder frame (under 895 samples,
56 ms: the tail of a stream) says nothing. Moonshine has no language, task or prompt tokens and no
timestamps: `language` and `prompt` are not used (a Moonshine checkpoint is of one language), and
`timestamps` gives the same window-long segments."""

from __future__ import annotations

from .moonshine_config import MIN_SAMPLES
from .moonshine_generation import RATE, max_new_tokens, windows
from .moonshine_model import WINDOW_SECONDS, MoonshineFiles, encode_window, load_moonshine, read_moonshine_files
from .seq2seq import Seq2Seq
from .transcriber import Segment


class MoonshineTranscriber:
    sample_rate = RATE

    def __init__(self, files: MoonshineFiles, model: Seq2Seq, model_id: str):
        """Use load_moonshine_transcriber."""
        self.files, self.model, self.model_id = files, model, model_id
        self.window = model.encoder.graph.inputs["audio"].nbytes // 4
        self.start_id = files.config.decoder_start_id
        self.end_ids = set(files.config.eos_ids)

    async def transcribe(self, audio, *, language=None, timestamps=False, prompt=None, max_tokens=None):
        """Segments of `audio` (floats at 16 kHz in [-1, 1], or an async iterable of chunks) as each
        window is decoded; max_tokens: the most tokens of the whole transcript."""
        budget = max_tokens
        async for start, pcm in windows(audio, self.window):
            if len(pcm) < MIN_SAMPLES:
                continue
            limit = max_new_tokens(len(pcm)) if budget is None else min(budget, max_new_tokens(len(pcm)))
            if limit < 1:
                return
            tokens = await self._decode(pcm, limit)
            if budget is not None:
                budget -= len(tokens)
            yield Segment(start / RATE, (start + len(pcm)) / RATE, self.text(tokens), tokens)

    async def _decode(self, pcm, limit: int) -> list[int]:
        """A window's tokens: encoded, then greedy from the start id to an end id (left out) or `limit`."""
        encode_window(self.model, pcm)
        tokens = []
        steps = self.model.generate_greedy([self.start_id], limit)
        async for token in steps:
            if token in self.end_ids:
                break
            tokens.append(token)
        await steps.aclose()
        return tokens

    def text(self, tokens: list[int]) -> str:
        tokenizer = self.files.tokenizer
        if tokenizer is None:
            raise ValueError(f"{self.files.source.label} has no tokenizer.json: its tokens cannot be read as text")
        return tokenizer.decode(tokens, skip_special_tokens=True)


async def load_moonshine_transcriber(
    model, device, *, model_id: str | None = None, window: float = WINDOW_SECONDS, **options
) -> MoonshineTranscriber:
    """A MoonshineTranscriber of `model` (an HF folder of MoonshineForConditionalGeneration, its
    ModelSource, or read_moonshine_files') on `device`. window: the longest window in seconds (the
    encoder graph's size); model_id: the name it reports (default the folder's); options: load_moonshine's
    (f32, max_binding, progress, gpu_budget: as load_embedder's)."""
    files = model if isinstance(model, MoonshineFiles) else read_moonshine_files(model)
    loaded = await load_moonshine(files, device, window=window, **options)
    name = model_id or files.source.label.rstrip("/").rpartition("/")[2]
    return MoonshineTranscriber(files, loaded, name)
