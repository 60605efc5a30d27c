"""OpenAI's audio requests checked, host-agnostic (the desktop's /v1/audio, and any host that takes
the same fields): a transcription's form fields, a speech request's JSON body. What Wisp cannot
serve is refused by name (RequestError, HTTP 400), never silently ignored."""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field, replace

from ..api.request_error import RequestError
from .transcript import FORMATS

MAX_PROMPT = 4096  # characters of a transcription's prompt
MAX_INPUT = 4096  # characters of text to speak, as OpenAI's
SPEECH_FORMATS = ("wav", "pcm")
# OpenAI's own voices: a client written for OpenAI names one; a model without it speaks in its default voice.
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse")
TRANSCRIPTION_FIELDS = {
    "model",
    "language",
    "prompt",
    "response_format",
    "temperature",
    "timestamp_granularities[]",
    "timestamp_granularities",
    "stream",
    "max_tokens",  # Wisp's: the most tokens of the transcript
}
TRANSLATION_FIELDS = {"model", "prompt", "response_format", "temperature", "max_tokens"}  # no language: it is English


@dataclass
class TranscriptionRequest:
    model: str
    language: str | None = None
    prompt: str | None = None
    response_format: str = "json"
    timestamps: bool = False  # segments with their times: verbose_json, srt, vtt or timestamp_granularities
    max_tokens: int | None = None
    task: str = "transcribe"  # or "translate" (into English: /v1/audio/translations)


@dataclass
class SpeechRequest:
    model: str
    input: str
    voice: str | None = None
    response_format: str = "wav"
    sampling: dict = field(default_factory=dict)  # Wisp's: SamplingParams fields over the model's defaults
    max_frames: int | None = None  # Wisp's: the most codec frames (the model's context by default)


def _one(fields: dict[str, list[str]], name: str, default=None):
    values = fields.get(name)
    if not values:
        return default
    if len(values) > 1:
        raise RequestError(f"'{name}' was given {len(values)} times", name)
    return values[0]


def parse_transcription(fields: dict[str, list[str]], task: str = "transcribe") -> TranscriptionRequest:
    """A transcription's (or, task "translate", a translation's) form fields other than the file
    (name -> its values, in order)."""
    unknown = sorted(set(fields) - (TRANSCRIPTION_FIELDS if task == "transcribe" else TRANSLATION_FIELDS))
    if unknown:
        raise RequestError(f"unknown field '{unknown[0]}'", unknown[0])
    model = _one(fields, "model")
    if not model:
        raise RequestError("'model' is required: a speech-to-text model (GET /v1/models)", "model")
    response_format = _one(fields, "response_format", "json")
    if response_format not in FORMATS:
        raise RequestError(f"'response_format' must be one of {', '.join(FORMATS)}", "response_format")
    temperature = _one(fields, "temperature", "0")
    try:
        greedy = float(temperature) == 0
    except ValueError:
        raise RequestError("'temperature' must be a number", "temperature") from None
    if not greedy:
        raise RequestError("only temperature 0 is served (greedy decoding, as the references are)", "temperature")
    granularities = fields.get("timestamp_granularities[]", []) + fields.get("timestamp_granularities", [])
    for granularity in granularities:
        if granularity != "segment":
            raise RequestError(
                f"timestamp granularity '{granularity}' is not served: 'segment' only", "timestamp_granularities"
            )
    if _one(fields, "stream", "false").lower() not in ("false", "0"):
        raise RequestError("streamed transcripts are not served: ask without 'stream'", "stream")
    language = _one(fields, "language") or None
    if language is not None and not (language.isascii() and language.isalpha() and len(language) <= 32):
        raise RequestError("'language' must be a language's code (ISO-639-1, e.g. 'en') or name", "language")
    prompt = _one(fields, "prompt") or None
    if prompt is not None and len(prompt) > MAX_PROMPT:
        raise RequestError(f"'prompt' is longer than {MAX_PROMPT} characters", "prompt")
    max_tokens = _one(fields, "max_tokens")
    if max_tokens is not None and not (max_tokens.isdigit() and 1 <= int(max_tokens) <= 1_000_000):
        raise RequestError("'max_tokens' must be a whole number of tokens >= 1", "max_tokens")
    timestamps = response_format in ("verbose_json", "srt", "vtt") or bool(granularities)
    language = language and language.lower()
    tokens = max_tokens and int(max_tokens)
    return TranscriptionRequest(model, language, prompt, response_format, timestamps, tokens, task)


def transcribe_options(transcriber, asked: TranscriptionRequest) -> dict:
    """transcriber.transcribe's keyword arguments for `asked`. A model with tasks (Whisper) is always
    told its task, as OpenAI's endpoints name theirs: transformers' generate, given no language and no
    task, detects the language but puts no <|transcribe|> after it, and Whisper base then says nothing
    with timestamps on (tests/fixtures/speech's second clip: one empty segment at 0.04 s); told the
    task, it transcribes the clip. A translation needs a model with tasks (Moonshine has none)."""
    options = {"language": asked.language, "timestamps": asked.timestamps, "prompt": asked.prompt}
    options["max_tokens"] = asked.max_tokens
    if "task" in inspect.signature(transcriber.transcribe).parameters:
        options["task"] = asked.task
    elif asked.task != "transcribe":
        raise RequestError(f"'{transcriber.model_id}' does not translate (Whisper models do)", "model")
    return options


async def transcribed(transcriber, pcm, asked: TranscriptionRequest, each=None) -> list:
    """The segments of `pcm` (chunks at transcriber.sample_rate) as `asked`; each(segment) as each comes.
    The model's refusal of an option (a language it does not know, a prompt it cannot take: its
    ValueError) is the request's error."""
    segments = []
    try:
        async for segment in transcriber.transcribe(pcm, **transcribe_options(transcriber, asked)):
            segments.append(segment)
            if each is not None:
                each(segment)
    except ValueError as exc:
        raise RequestError(str(exc)) from None
    return segments


def parse_speech(body) -> SpeechRequest:
    """A speech request's JSON body."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    known = {"model", "input", "voice", "response_format", "speed", "stream_format", "instructions", "max_frames"}
    known |= set(SAMPLING_LIMITS)
    unknown = sorted(set(body) - known)
    if unknown:
        raise RequestError(f"unknown field '{unknown[0]}'", unknown[0])
    model, text = body.get("model"), body.get("input")
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required: a text-to-speech model (GET /v1/models)", "model")
    if not isinstance(text, str) or not text.strip():
        raise RequestError("'input' must be the text to speak", "input")
    if len(text) > MAX_INPUT:
        raise RequestError(f"'input' is longer than {MAX_INPUT} characters", "input")
    voice = body.get("voice")
    if isinstance(voice, dict):  # OpenAI's custom-voice form {"id": ...}
        voice = voice.get("id")
    if voice is not None and not isinstance(voice, str):
        raise RequestError("'voice' must be a voice's name", "voice")
    response_format = body.get("response_format") or "wav"
    if response_format not in SPEECH_FORMATS:
        raise RequestError(
            f"response_format '{response_format}' is not served: wav or pcm (16-bit, the model's sample rate)",
            "response_format",
        )
    speed = body.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not math.isclose(speed, 1.0):
        raise RequestError("only speed 1.0 is served", "speed")
    if body.get("stream_format", "audio") != "audio":
        raise RequestError("stream_format 'audio' only: the audio itself is streamed as it is made", "stream_format")
    if body.get("instructions"):
        raise RequestError("instructions are not served: the models here take none", "instructions")
    max_frames = body.get("max_frames")
    if max_frames is not None and (not _integer(max_frames) or max_frames < 1):
        raise RequestError("'max_frames' must be a whole number of codec frames >= 1", "max_frames")
    return SpeechRequest(model, text, voice or None, response_format, speech_sampling(body), max_frames)


# Wisp's extensions of a speech request: the sampling of the codec's tokens (default: the model's own,
# kani-tts-2's temperature 1, top_p 0.95, repetition penalty 1.1); temperature 0 and a seed reproduce a voice.
SAMPLING_LIMITS = {
    "temperature": lambda v: 0 <= v <= 2,
    "top_p": lambda v: 0 < v <= 1,
    "repetition_penalty": lambda v: 0 < v <= 2,
    "seed": lambda v: _integer(v) and 0 <= v < 2**63,
}


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def speech_sampling(body: dict) -> dict:
    """The sampling fields a speech request gives, checked: name -> value."""
    given = {}
    for name, allowed in SAMPLING_LIMITS.items():
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not allowed(value):
            raise RequestError(f"'{name}' is out of range ({value!r})", name)
        given[name] = value
    return given


def sampling_params(given: dict):
    """SamplingParams of speech_sampling's fields over Kani-TTS-2's own, or None (the model's own)."""
    if not given:
        return None
    from ..speech.speaker import KANI_SAMPLING

    return replace(KANI_SAMPLING, **given)


def choose_voice(voice: str | None, voices: tuple[str, ...], model_id: str) -> str | None:
    """The speaker's voice for a request's `voice`: its own by name, None (the model's default) for
    none or for one of OpenAI's names the model lacks; any other name is refused, listing the voices."""
    if voice is None or voice in voices:
        return voice
    if voice in OPENAI_VOICES:
        return None
    named = ", ".join(voices) if voices else "none besides its default"
    raise RequestError(f"'{model_id}' has no voice '{voice}' (its voices: {named})", "voice")
