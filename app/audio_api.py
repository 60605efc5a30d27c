"""OpenAI's audio endpoints on the desktop, on the models /v1 serves (app/openai_api.py's Models: one
speech-to-text and one text-to-speech model in memory, the GPU's lock shared with the chat):

    POST /v1/audio/transcriptions   multipart: file, model, language, prompt, response_format (json, text,
                                    srt, vtt, verbose_json), temperature (0), timestamp_granularities[] (segment);
                                    Wisp's max_tokens (the most tokens of the transcript)
    POST /v1/audio/translations     the same without language: the speech in English (Whisper's translate task)
    POST /v1/audio/speech           JSON: model, input, voice, response_format (wav, pcm), speed (1),
                                    stream_format (audio); Wisp's: temperature, top_p, repetition_penalty,
                                    seed (the codec tokens' sampling, default the model's), max_frames

An upload is read within a cap while it arrives (starlette's multipart parser spools the file to
disk past 1 MB), decoded by FFmpeg a chunk at a time as the model transcribes (py_engine/audio/
files.py): a 2-hour file is never whole in memory. Speech is sent as the model makes it: a WAV
header whose sizes say "unknown length" (as a live stream's), then PCM16 chunk by chunk; "pcm" is
the bare samples. Both are at the model's own sample rate, told in the X-Sample-Rate header
(OpenAI's pcm is 24 kHz; Kani-TTS-2's NanoCodec makes 22,050 Hz)."""

from __future__ import annotations

from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from py_engine.api.request_error import RequestError
from py_engine.audio.files import open_audio
from py_engine.audio.requests import choose_voice, parse_speech, parse_transcription, sampling_params, transcribed
from py_engine.audio.transcript import render
from py_engine.audio.wav import AudioFileError, sample_bytes, wav_header
from py_engine.memory.limits import MIB

from .request_body import json_body, too_large

UPLOAD_CAP = 1024 * MIB  # 2 hours of 16-bit 44.1 kHz stereo WAV is 1.2 GB: compress longer recordings
MEDIA_TYPES = {"json": "application/json", "verbose_json": "application/json", "text": "text/plain"}
MEDIA_TYPES |= {"srt": "application/x-subrip", "vtt": "text/vtt"}


def capped(request: Request, cap: int) -> Request:
    """The request again, its body refused (413) once more than `cap` bytes have come, as
    request_body.read_capped refuses a JSON body, but passed on as it arrives (to the multipart parser)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise RequestError(too_large(int(declared), cap), None, 413)
    size = 0

    async def receive():
        nonlocal size
        message = await request.receive()
        size += len(message.get("body", b""))
        if size > cap:
            raise RequestError(too_large(size, cap, so_far=True), None, 413)
        return message

    return Request(request.scope, receive)


async def upload_form(request: Request):
    """(the uploaded file, the other fields as name -> [values]) of a multipart request."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise RequestError("send the audio as multipart/form-data (a 'file' and the fields)")
    try:
        form = await capped(request, UPLOAD_CAP).form(max_files=1, max_fields=32, max_part_size=64 * 1024)
    except HTTPException as exc:  # the multipart parser's own refusals (too many parts, a malformed body)
        raise RequestError(f"the multipart body: {exc.detail}") from None
    fields, upload = {}, None
    for name, value in form.multi_items():
        if isinstance(value, UploadFile):
            if name != "file":
                raise RequestError(f"a file in field '{name}': the audio goes in 'file'", name)
            upload = value
        else:
            fields.setdefault(name, []).append(value)
    if upload is None:
        raise RequestError("'file' is required: the audio file (wav, mp3, ogg, flac, m4a, webm)", "file")
    return form, upload, fields


def audio_routes(models, error_response) -> list[Route]:
    async def transcriptions(request: Request, task: str = "transcribe") -> Response:
        form = None
        try:
            form, upload, fields = await upload_form(request)
            asked = parse_transcription(fields, task)
            audio = open_audio(upload.file, upload.filename or "file")  # checked before a model loads
            try:
                async with models.lock:
                    transcriber = await models.speech_model("transcriber", asked.model)
                    segments = await transcribed(transcriber, audio.chunks(transcriber.sample_rate), asked)
            finally:
                audio.close()
            body = render(segments, asked.response_format, asked.language, audio.seconds, task)
            if isinstance(body, dict):
                return JSONResponse(body)
            return PlainTextResponse(body, media_type=MEDIA_TYPES[asked.response_format])
        except AudioFileError as exc:  # the upload is the request's: 400, as OpenAI's for a file it cannot read
            return error_response(RequestError(str(exc), "file"))
        except Exception as exc:  # noqa: BLE001 - every failure becomes OpenAI's error object
            return error_response(exc)
        finally:
            if form is not None:
                await form.close()

    async def speech(request: Request) -> Response:
        try:
            asked = parse_speech(await json_body(request))
        except Exception as exc:  # noqa: BLE001
            return error_response(exc)
        await models.lock.acquire()
        streaming = False
        try:
            speaker = await models.speech_model("speaker", asked.model)
            voice = choose_voice(asked.voice, tuple(speaker.voices), asked.model)
            pcm = speaker.speak(
                asked.input, voice=voice, max_frames=asked.max_frames, sampling=sampling_params(asked.sampling)
            )
            first = await anext(pcm, None)  # an error before the first samples is still an HTTP status
            head = wav_header(speaker.sample_rate) if asked.response_format == "wav" else b""
            streaming = True  # the stream releases the lock when it ends
            media = "audio/wav" if asked.response_format == "wav" else "audio/pcm"
            headers = {"X-Sample-Rate": str(speaker.sample_rate)}
            return StreamingResponse(_sound(head, first, pcm, models.lock), media_type=media, headers=headers)
        except Exception as exc:  # noqa: BLE001
            return error_response(exc)
        finally:
            if not streaming:
                models.lock.release()

    async def translations(request: Request) -> Response:
        return await transcriptions(request, "translate")

    return [
        Route("/v1/audio/transcriptions", transcriptions, methods=["POST"]),
        Route("/v1/audio/translations", translations, methods=["POST"]),
        Route("/v1/audio/speech", speech, methods=["POST"]),
    ]


async def _sound(head: bytes, first, pcm, lock):
    """The response body: the header, then each chunk of samples as PCM16 as the model yields it;
    the lock is held until the speech ends or the client leaves."""
    try:
        yield head + (sample_bytes(first) if first is not None else b"")
        async for chunk in pcm:
            yield sample_bytes(chunk)
    finally:
        await pcm.aclose()
        lock.release()
