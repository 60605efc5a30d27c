"""Text to speech: `speaker = await load_speaker(folder, device)`, then `async for pcm in
speaker.speak("Hello.")`: mono float PCM chunks (array('f') in [-1, 1] at speaker.sample_rate) as the
codec decodes the frames the model writes, so the first sound comes long before the sentence ends.

The model is Kani-TTS-2 (kani_files.py reads its folder: the LFM2 codec-LM, its tokenizer and voices,
and NanoCodec's converted decoder). Its codec-LM runs in the engine's decode loop (kani_engine.py:
Kani's frame positions and learnable RoPE), each token drawn under the frame mask (kani_frames.py);
every finished frame goes to the codec (nanocodec.py), which decodes new frames in windows with the
context they depend on: the chunks joined are the samples of one whole decode. Chunks start small
(FIRST_CHUNK frames, 0.32 s of speech at 12.5 frames/s) and double up to the codec's window.

Licences: Kani-TTS-2 (kani-tts-2-en, an LFM2-350M fine-tune) is under Liquid AI's LFM1.0 license
("other", not Apache); NanoCodec (nvidia/nemo-nano-codec-22khz-0.6kbps-12.5fps) under the NVIDIA Open
Model License. Neither is downloaded here: this host cannot reach the Hugging Face hub, so the engine is
checked against tiny random fixtures made with kani-tts-2's and NeMo's own code (tests/fixtures/kani-f32).
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import AsyncIterator
from contextlib import aclosing

from ..decode.token_choice import SamplingParams
from ..errors import WispError
from .kani_engine import KaniEngine
from .kani_files import END_OF_TEXT, SPEAKER_PROJECTION, KaniFiles, host_floats, read_kani_files
from .kani_frames import FrameGrammar
from .nanocodec import NEW_FRAMES, codec_plan, load_codec

CONTEXT = 4096  # the KV cache's tokens: a prompt and ~1000 frames (80 s of speech)
PREFILL_ROWS = 128
FIRST_CHUNK = 4
# kani-tts-2's defaults (KaniTTS.__call__): temperature 1.0, top_p 0.95, repetition penalty 1.1.
KANI_SAMPLING = SamplingParams(temperature=1.0, top_p=0.95, repetition_penalty=1.1)


async def load_speaker(
    model,
    device,
    *,
    codec=None,
    model_id: str | None = None,
    context: int = CONTEXT,
    progress=None,
    gpu_budget: int | None = None,
    packed_kv: bool = False,
    max_binding: int = 0,
) -> Speaker:
    """A Speaker of `model` (a Kani-TTS-2 folder, or read_kani_files' KaniFiles) on `device`. codec:
    NanoCodec's converted folder (default the model's nanocodec/). context: the KV cache's tokens (the
    longest prompt plus 4 per frame). model_id: the name Speaker.model_id reports (default the folder's).
    progress, gpu_budget, packed_kv, max_binding: as Engine.load's, over both models (the codec's share
    of gpu_budget is planned first; progress counts the codec's bytes after the codec-LM's)."""
    files = model if isinstance(model, KaniFiles) else read_kani_files(model, codec)
    codec_need = codec_plan(files.codec, files.codec.cfg.context_frames + NEW_FRAMES).footprint.total
    engine = await KaniEngine.load(
        files.source,
        device,
        read=(files.cfg, files.tensors, None),
        max_rows=PREFILL_ROWS,
        context=context,
        max_binding=max_binding,
        progress=progress,
        packed_kv=packed_kv,
        gpu_budget=None if gpu_budget is None else gpu_budget - codec_need,
        precision="exact",
        image_rows=1,  # the speaker embedding's row, spliced in as a picture's (GraphBuilder.splice_images)
    )
    engine.use_kani(files.settings, files.alphas)
    landed = engine.weight_bytes

    def codec_progress(done: int, expected: int) -> None:
        progress(landed + done, landed + expected)

    decoder = await load_codec(files.codec, device, progress=codec_progress if progress else None)
    name = model_id or files.source.label.rstrip("/").rpartition("/")[2]
    return Speaker(files, engine, decoder, name)


class Speaker:
    def __init__(self, files: KaniFiles, engine: KaniEngine, codec, model_id: str):
        """Use load_speaker."""
        self.files, self.engine, self.codec, self.model_id = files, engine, codec, model_id
        self.settings = files.settings
        self.sample_rate = codec.sample_rate
        self.voices = tuple(files.voices)
        self.languages = files.settings.languages
        self._rows = {name: self._speaker_row(vector) for name, vector in files.voices.items()}
        self._lock = asyncio.Lock()  # one request at a time: they share the engine's caches

    def _speaker_row(self, vector: list[float]) -> bytes:
        """speaker_emb_projection(vector): the hidden-size row the model reads after its first token."""
        info = self.files.tensors[SPEAKER_PROJECTION]
        hidden, dim = info.shape
        weight = host_floats(self.files.source, info, hidden * dim)
        return array(
            "f", [sum(w * v for w, v in zip(weight[r * dim : (r + 1) * dim], vector)) for r in range(hidden)]
        ).tobytes()

    def prompt(self, text: str, language: str | None = None) -> list[int]:
        """kani-tts-2's prompt (KaniModel.get_input_ids): START_OF_HUMAN, the text's tokens (the
        tokenizer's START_OF_TEXT first), END_OF_TEXT, END_OF_HUMAN; then the answer's START_OF_AI and
        START_OF_SPEECH, which the model would write itself, fed instead."""
        if language is not None:
            if language not in self.languages:
                known = ", ".join(self.languages) or "none"
                raise WispError(f"{self.model_id} has no language tag {language!r} (its tags: {known})")
            text = f"{language}: {text}"
        k = self.settings
        ids = self.files.tokenizer.encode(text, add_special_tokens=True)
        return [k.special(3), *ids, END_OF_TEXT, k.special(4), k.special(5), k.start_of_speech]

    async def speak(
        self,
        text: str,
        *,
        voice: str | None = None,
        max_frames: int | None = None,
        language: str | None = None,
        sampling: SamplingParams | None = None,
    ) -> AsyncIterator[array]:
        """PCM chunks of `text` spoken (in `voice`, one of self.voices; None: the model's own), at
        most max_frames codec frames (default: as many as the context holds), drawn with `sampling`
        (default kani-tts-2's: temperature 1, top_p 0.95, repetition penalty 1.1)."""
        if voice is not None and voice not in self._rows:
            raise WispError(f"{self.model_id} has no voice {voice!r} (its voices: {', '.join(self.voices) or 'none'})")
        prompt = self.prompt(text, language)
        fed = prompt[:1] + [self.settings.special(7)] + prompt[1:] if voice else prompt  # the speaker row: a PAD
        room = (self.engine.context - len(fed) - 1) // self.settings.per_frame
        if room < 1:
            raise WispError(f"the text is {len(prompt)} tokens: too long for a context of {self.engine.context}")
        frames = room if max_frames is None else min(max_frames, room)
        if frames < 1:
            raise ValueError(f"max_frames must be at least 1, not {max_frames}")
        async with self._lock, aclosing(self._speak(prompt, fed, voice, frames, sampling or KANI_SAMPLING)) as chunks:
            async for pcm in chunks:  # closed with this generator (a cancel): the decode loop stops there
                yield pcm

    async def _speak(self, prompt: list[int], fed: list[int], voice, frames: int, sampling) -> AsyncIterator[array]:
        engine, k = self.engine, self.settings
        engine.reset()
        engine.place_images(0, fed, k.special(7) if voice else -1)
        if voice:
            engine.device.write_buffer(engine.image_embeds, 0, self._rows[voice])
        grammar = FrameGrammar(engine.cfg.vocab_size, k.audio_start, k.per_frame, k.codebook, k.end_of_speech, frames)
        tokens = engine.generate(
            fed, frames * k.per_frame + 1, sampling, stop_ids=(k.end_of_speech,), context_ids=prompt, constraint=grammar
        )
        decoded, chunk = 0, FIRST_CHUNK
        try:
            async for _ in tokens:
                if len(grammar.frames) - decoded >= chunk:
                    yield await self.codec.decode(grammar.frames, decoded)
                    decoded, chunk = (
                        len(grammar.frames),
                        min(2 * chunk, self.codec.max_rows - self.codec.context_frames),
                    )
        finally:
            await tokens.aclose()
        if decoded < len(grammar.frames):
            yield await self.codec.decode(grammar.frames, decoded)
