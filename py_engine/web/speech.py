"""The page's speech (issue 32): the worker's speech_load / transcribe / speak messages (protocol.py).

A transcription model (py_engine.speech.load_transcriber: Whisper, Moonshine) and a speech model
(load_speaker: Kani-TTS-2 with its codec) load on first use, their files through the weight store
as any model's, onto the worker's device (the chat model's; one opened with the message's options
when none is open), and stay until that device goes (state.drop_device). One speech request runs at
a time (the lock), and not under the chat's busy guard: a sentence of an answer is spoken while the
rest of it is still being generated, the two interleaving at their GPU awaits.

Both take OpenAI's request body (static/openai.js's, or the page's own) with Wisp's fields (a
transcript's max_tokens; speech's max_frames, temperature, top_p, repetition_penalty, seed), checked
and put to the model by the desktop's audio/requests.py, so a field means in the page what it means
to /v1/audio, and is refused alike; a transcribe's task "translate" is /v1/audio/translations'. transcribe takes
16 kHz mono float32 samples (the page's microphone worklet, or a file the browser decoded) and hands
them to the transcriber in 30-second pieces, so a long recording never reaches the GPU whole; each
segment is a `transcript_segment` event as it is finished, and the `speech` event has the whole
transcript, its body in the response_format asked (audio/transcript.py, as the desktop renders it).
speak streams the speaker's PCM chunks as `speech_audio` events: float32 samples for the page's
player, or the bytes of the body's pcm / wav (audio/wav.py, as the desktop sends them); a `cancel`
stops it after the chunk under way."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
from array import array

from ..api.request_error import RequestError
from ..audio.pcm import float32_bytes, int16_bytes
from ..audio.transcript import plain_text, render
from ..audio.wav import wav_header

SAMPLE_RATE = 16000  # what transcribe's audio is sampled at (the page resamples to it)
WINDOW = 30 * SAMPLE_RATE  # the pieces handed to the transcriber
TASK_OF = {"transcribe": "transcription", "speak": "speech"}


@dataclasses.dataclass
class PageSpeech:
    """What the worker holds for speech (WorkerState.speech)."""

    loaded: dict = dataclasses.field(default_factory=dict)  # task -> (model id, its device, Transcriber | Speaker)
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)  # one speech request at a time

    def drop_gpu(self) -> None:
        """The device went: the models on it with it."""
        self.loaded.clear()


async def speech_message(state, message: dict) -> None:
    """speech_load, transcribe or speak, answered by one `speech` event."""
    from .recovery import settled

    kind, request = message["type"], message["id"]
    task = message["task"] if kind == "speech_load" else TASK_OF[kind]  # (a transcribe's task is another)
    state.speech = state.speech or PageSpeech()
    await settled(state)  # after a device loss: on the new device
    try:
        async with state.speech.lock:
            model, load_ms = await ensure_model(state, task, message)
            reply = {"model": message["model"]["id"], "task": task, "sample_rate": model.sample_rate}
            if load_ms is not None:
                reply["load_ms"] = load_ms
            if task == "speech":
                reply["voices"] = list(model.voices)
            if kind == "transcribe":
                reply |= await transcribe(state, model, message)
            elif kind == "speak":
                reply |= await speak(state, model, message)
            state.emit("speech", request, **reply)
    finally:
        state.cancelled.discard(request)


async def ensure_model(state, task: str, message: dict) -> tuple:
    """(the model, its load's ms or None when it was loaded already) for `task`."""
    from .files import RemoteModel
    from .memory import begin_store_for, open_device_for

    model, request = message["model"], message["id"]
    held = state.speech.loaded.get(task)
    if held is not None and held[0] == model["id"] and held[1] is state.device:
        return held[2], None
    start = time.perf_counter()
    state.speech.loaded.pop(task, None)
    device = state.device or await open_device_for(state, message.get("options") or {})
    await begin_store_for(model, request)
    label, files = model.get("name", model["id"]), dict(model["files"])
    options = {}
    if task == "speech":  # Kani-TTS-2's codec: its folder served with the model, read as a model of its own
        from ..speech.kani_files import CODEC_DIR

        inner = {rel: files.pop(rel) for rel in list(files) if rel.startswith(CODEC_DIR + "/")}
        codec = {rel.removeprefix(CODEC_DIR + "/"): size for rel, size in inner.items()}
        base = model["base"].rstrip("/") + f"/{CODEC_DIR}/"
        options["codec"] = await RemoteModel.open(
            f"{model['id']}.{CODEC_DIR}", f"{label} ({CODEC_DIR})", "hf", base, codec
        )
    source = await RemoteModel.open(model["id"], label, model["kind"], model["base"], files)
    if task == "speech":
        await keep_host_tensors(source)
    try:
        if task == "transcription":
            from ..speech.transcriber import load_transcriber as load
        else:
            from ..speech.speaker import load_speaker as load
        loaded = await load(source, device, model_id=model["id"], **options)
    except BaseException:
        for opened in (source, *options.values()):
            await opened.settle()  # its upload stops with the load
        raise
    state.speech.loaded[task] = (model["id"], device, loaded)
    return loaded, round(1000 * (time.perf_counter() - start))


async def keep_host_tensors(source) -> None:
    """The bytes Kani-TTS-2's loader reads on the host (kani_files.host_reads) fetched first: a
    RemoteModel holds only the files' headers (the weights stream to the GPU)."""
    from ..speech.kani_files import host_reads

    files, tensors = host_reads(source)
    for rel in files:
        await source.keep(rel, 0, source.size(rel))
    holder = {source.locate(rel): rel for rel in source.files()}
    for info in tensors:
        await source.keep(holder[info.path], info.start, info.nbytes)


def samples_of(audio) -> array:
    """The message's audio (a Float32Array: Pyodide hands it over as a buffer of floats) as array('f')."""
    if hasattr(audio, "to_py"):
        audio = audio.to_py()
    try:
        view = memoryview(audio)
    except TypeError:
        raise RequestError("'audio' must be a Float32Array of 16 kHz mono samples", "audio") from None
    if view.format != "f":
        raise RequestError(f"'audio' must hold float32 samples, not {view.format!r} items", "audio")
    samples = array("f")
    samples.frombytes(view.cast("B"))
    if not samples:
        raise RequestError("'audio' holds no samples", "audio")
    # One C loop over the sum, not a Python one over the samples (48 ms for 6 s of audio in Pyodide):
    # float32 values cannot overflow a double's sum, and a NaN or an infinity makes it non-finite.
    if not math.isfinite(sum(samples)):
        raise RequestError("'audio' holds a sample that is not a number (NaN or infinity)", "audio")
    return samples


async def windows(samples: array):
    """The samples in WINDOW-long pieces, as the transcriber takes a long recording."""
    for start in range(0, len(samples), WINDOW):
        yield samples[start : start + WINDOW]


def body_of(message: dict) -> dict:
    """The message's OpenAI body, its `model` the message's model where it names none."""
    body = message["body"]
    return {"model": message["model"]["id"], **body} if isinstance(body, dict) else body


def transcription_fields(body: dict) -> dict:
    """An OpenAI transcription body (static/openai.js: the desktop's form fields as JSON values) as
    form fields, name -> its values as text, for audio/requests.parse_transcription."""
    if not isinstance(body, dict):
        raise RequestError("the transcription's body must be an object")
    return {
        name: [str(v) for v in (value if isinstance(value, list) else [value])]
        for name, value in body.items()
        if value is not None
    }


async def transcribe(state, transcriber, message: dict) -> dict:
    from ..audio.requests import parse_transcription, transcribed

    request, task = message["id"], message.get("task") or "transcribe"
    asked = parse_transcription(transcription_fields(body_of(message)), task)  # the desktop's checks and errors
    samples = samples_of(message["audio"])

    def each(segment) -> None:
        state.emit("transcript_segment", request, **segment_json(segment))

    segments = await transcribed(transcriber, windows(samples), asked, each)  # as the desktop asks the model
    language = asked.language or getattr(transcriber, "language", None)  # the one it detected, where it says
    duration = len(samples) / SAMPLE_RATE
    return {
        "text": plain_text(segments),
        "segments": [segment_json(s) for s in segments],
        "language": language,
        "duration": duration,
        "body": render(segments, asked.response_format, language, duration, task),
    }


def segment_json(segment) -> dict:
    """A segment as the events carry it: its times and text, and its token ids where the model gives them."""
    out = {"start": segment.start, "end": segment.end, "text": segment.text}
    if getattr(segment, "tokens", None):
        out["tokens"] = list(segment.tokens)
    return out


async def speak(state, speaker, message: dict) -> dict:
    """The body's speech, streamed: float32 samples (the page's player: `float32`), or the bytes of
    its response_format (pcm: PCM16 little-endian; wav: a stream's header first, as the desktop's)."""
    from ..audio.requests import choose_voice, parse_speech, sampling_params

    request = message["id"]
    asked = parse_speech(body_of(message))  # the desktop's checks, its errors
    voice = choose_voice(asked.voice, tuple(speaker.voices), message["model"]["id"])
    rate = speaker.sample_rate
    float32 = bool(message.get("float32"))

    def send(data: bytes, samples: int) -> None:
        state.emit("speech_audio", request, audio=data, samples=samples, sample_rate=rate)

    if asked.response_format == "wav" and not float32:
        send(wav_header(rate), 0)  # its length is not known yet: a live stream's sizes
    total, stop = 0, "end"
    sampling = sampling_params(asked.sampling)  # Wisp's temperature, top_p, ..., seed over the model's own
    chunks = speaker.speak(asked.input, voice=voice, max_frames=asked.max_frames, sampling=sampling)
    async with contextlib.aclosing(chunks):
        async for chunk in chunks:
            send(float32_bytes(chunk) if float32 else int16_bytes(chunk), len(chunk))
            total += len(chunk)
            if request in state.cancelled:
                stop = "cancel"
                break
    return {"samples": total, "stop": stop}
