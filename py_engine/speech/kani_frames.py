"""Kani-TTS-2's answer as frames: the audio-token mask each token is drawn under, and the codes it
yields (the decode loop's constraint: decode/on_host.py calls mask(), then advance(token)).

After the prompt's START_OF_SPEECH the model writes frames of per_frame tokens, slot k taking codebook
k's tokens (audio_start + k x codebook + code), and ends with END_OF_SPEECH between frames; kani-tts-2
samples them unconstrained and then refuses a malformed sequence (get_nano_codes). Here slot k may draw
only codebook k's tokens and END_OF_SPEECH only at a frame's start (after max_frames frames nothing
else), so every answer decodes: a trained model puts its mass there anyway, and greedy picks agree.
"""

from __future__ import annotations


class FrameGrammar:
    def __init__(
        self, vocab: int, audio_start: int, per_frame: int, codebook: int, end_of_speech: int, max_frames: int
    ):
        self.audio_start, self.per_frame, self.codebook = audio_start, per_frame, codebook
        self.end_of_speech, self.max_frames = end_of_speech, max_frames
        words = -(-vocab // 32)

        def bits(*ranges) -> bytes:
            value = 0
            for lo, hi in ranges:
                value |= ((1 << (hi - lo)) - 1) << lo
            return value.to_bytes(4 * words, "little")

        end = (end_of_speech, end_of_speech + 1)
        slots = [(audio_start + k * codebook, audio_start + (k + 1) * codebook) for k in range(per_frame)]
        self._masks = [bits(slots[0], end)] + [bits(s) for s in slots[1:]]
        self._end_only = bits(end)
        self.frames: list[list[int]] = []  # the finished frames' codes
        self._frame: list[int] = []
        self.finished = False

    def mask(self) -> bytes:
        """ceil(vocab / 32) little-endian u32 words, bit i set: token i may come next."""
        if not self._frame and len(self.frames) >= self.max_frames:
            return self._end_only
        return self._masks[len(self._frame)]

    def advance(self, token: int) -> None:
        """Take `token` (ValueError for one the mask refused)."""
        slot = len(self._frame)
        if token == self.end_of_speech and slot == 0 and not self.finished:
            self.finished = True
            return
        code = token - self.audio_start - slot * self.codebook
        if self.finished or not 0 <= code < self.codebook or (slot == 0 and len(self.frames) >= self.max_frames):
            raise ValueError(f"token {token} cannot follow {len(self.frames)} frames and {slot} tokens")
        self._frame.append(code)
        if len(self._frame) == self.per_frame:
            self.frames.append(self._frame)
            self._frame = []
