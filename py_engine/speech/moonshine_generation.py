"""Moonshine's generation rules: how many tokens a window of audio may produce, and where long audio
is cut into windows.

Moonshine has no length token or timestamps: greedy decoding runs from decoder_start_token_id until an
eos id or a limit. transformers' generate has no limit of its own for it (its config's max_length
default, 20, would cut a long window); the model card's usage sets max_length to 6.5 tokens a second
of audio (`token_limit_factor = 6.5 / sampling_rate`), which also stops a hallucinating loop early.
The engine's limit a window: int(samples x 6.5 / 16000) new tokens, at least one."""

from __future__ import annotations

from array import array

RATE = 16000  # Moonshine's sample rate: raw PCM in, no feature extractor beyond it
TOKENS_PER_SECOND = 6.5


def max_new_tokens(samples: int) -> int:
    """The most tokens a window of `samples` may produce (the module docstring's rule)."""
    return max(1, int(samples * TOKENS_PER_SECOND / RATE))


# Long audio goes in windows of at most the encoder graph's samples. Where more audio follows, a
# window ends at the quietest QUIET_FRAME samples (0.1 s) of its last CUT_SEARCH part, so a word is
# seldom cut in two: Moonshine has no timestamps to seek by, as Whisper's long-form decoding does.
CUT_SEARCH = 6  # the last sixth of a window (5 s of 30)
QUIET_FRAME = 1600


def quiet_cut(pcm, window: int) -> int:
    """Where a window of the first `window` samples of pcm ends: the middle of the frame of least
    energy among the frames (QUIET_FRAME long, half a frame apart) of its last 1 / CUT_SEARCH."""
    first = window - window // CUT_SEARCH
    best, cut = None, window
    for at in range(first, window - QUIET_FRAME + 1, QUIET_FRAME // 2):
        frame = pcm[at : at + QUIET_FRAME]
        energy = sum(map(float.__mul__, frame, frame))
        if best is None or energy < best:
            best, cut = energy, at + QUIET_FRAME // 2
    return cut


async def _chunks(audio, size: int):
    """An async iterable of chunks as it is, or a sequence of floats in slices of `size`."""
    if hasattr(audio, "__aiter__"):
        async for chunk in audio:
            yield chunk
        return
    for at in range(0, len(audio), size):
        yield audio[at : at + size]


async def windows(audio, window: int):
    """(first sample, array('f') samples) of each window of audio (floats, or an async iterable of
    chunks of any size), at most `window` samples each, cut by quiet_cut where more follows: never
    more than a window and a chunk held at once."""
    buffer, start = array("f"), 0
    async for chunk in _chunks(audio, window):
        buffer.extend(chunk)
        used = 0  # samples of buffer already yielded: dropped once a chunk's windows are out
        while len(buffer) - used > window:
            pcm = buffer[used : used + window]
            cut = quiet_cut(pcm, window)
            yield start, pcm[:cut]
            start, used = start + cut, used + cut
        del buffer[:used]
    if buffer:
        yield start, buffer
