"""Speech in and out: speech-to-text (transcriber.py: Whisper, Moonshine; the encoder-once,
decoder-over-frozen-K/V loop of seq2seq.py) and text-to-speech (speaker.py)."""

from .speaker import load_speaker
from .transcriber import Segment, load_transcriber

__all__ = ["Segment", "load_speaker", "load_transcriber"]
