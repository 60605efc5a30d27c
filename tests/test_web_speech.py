"""The worker's speech messages (py_engine/web/speech.py) under CPython, with stand-in models (the
real ones: tests/test_browser_speech.py in the page): a transcription streams its segments and
answers with its body in the response_format asked, its audio handed over in 30-second pieces; a
speech streams float32 samples for the page's player, or the pcm / wav body's bytes, and a cancel
stops it after the chunk under way; OpenAI's fields are checked as the desktop checks them (one
`request` error naming the field). Speech is not refused while a chat answer holds the GPU, and its
models go with the device. Every event fits protocol.py's table."""

import asyncio
import struct
from array import array
from dataclasses import dataclass

from py_engine.web.protocol import check_event
from py_engine.web.speech import WINDOW, PageSpeech
from py_engine.web.state import WorkerState
from py_engine.web.worker import handle

WHISPER = {"id": "whisper-tiny", "name": "Whisper", "kind": "hf", "base": "/models/w/", "files": {"config.json": 2}}
KANI = {"id": "kani", "name": "Kani", "kind": "hf", "base": "/models/k/", "files": {"config.json": 2}}


@dataclass
class Segment:
    start: float
    end: float
    text: str
    tokens: tuple = ()


class Transcriber:
    """A segment per piece of audio it is handed: its length, so the test sees the pieces."""

    model_id = "whisper-tiny"
    sample_rate = 16000
    language = "en"

    def __init__(self):
        self.asked = []

    async def transcribe(self, audio, *, language=None, timestamps=False, prompt=None, max_tokens=None):
        self.asked.append({"language": language, "timestamps": timestamps, "prompt": prompt, "max_tokens": max_tokens})
        at = 0.0
        async for piece in audio:
            yield Segment(at, at + len(piece) / 16000, f" {len(piece)} samples", (len(piece) % 1000, 7))
            at += len(piece) / 16000


class Speaker:
    sample_rate = 22050
    voices = ("leo", "mia")

    def __init__(self):
        self.voice = "unset"

    async def speak(self, text, *, voice=None, max_frames=None, sampling=None):
        self.voice, self.sampling = voice, sampling
        for n in range(max_frames or 3):
            yield array("f", [n / 10, -0.5, 1.5])  # one sample out of range: clipped in PCM16


def worker(serving=None) -> WorkerState:
    """A worker whose speech models are loaded on its device (as after their first requests)."""
    state = WorkerState(post=lambda event: state.events.append(check_event(event) and event))
    state.events, state.device, state.serving = [], object(), serving
    state.speech = PageSpeech()
    state.speech.loaded = {
        "transcription": (WHISPER["id"], state.device, Transcriber()),
        "speech": (KANI["id"], state.device, Speaker()),
    }
    return state


def send(state, kind, model, **fields) -> list[dict]:
    state.events.clear()
    asyncio.run(handle({"type": kind, "id": f"{kind}-1", "model": model, **fields}, state))
    return list(state.events)


def test_a_transcription_streams_segments_and_answers_in_the_format_asked():
    state = worker(serving="gen-4")  # a chat answer holds the GPU: speech goes on beside it
    audio = array("f", [0.25]) * (WINDOW + 16000)  # 31 seconds: two pieces
    body = {
        "model": "whisper-tiny",
        "response_format": "verbose_json",
        "temperature": 0,
        "prompt": "Hi.",
        "max_tokens": 9,
    }
    *segments, done = send(state, "transcribe", WHISPER, audio=memoryview(audio), body=body)
    assert [(s["type"], s["text"], s["tokens"]) for s in segments] == [
        ("transcript_segment", " 480000 samples", [0, 7]),
        ("transcript_segment", " 16000 samples", [0, 7]),
    ]
    assert done["type"] == "speech" and done["task"] == "transcription" and "load_ms" not in done
    assert done["text"] == "480000 samples 16000 samples" and done["duration"] == 31.0
    assert done["body"]["segments"][1] == {
        "id": 1,
        "start": 30.0,
        "end": 31.0,
        "text": " 16000 samples",
        "tokens": [0, 7],
        "temperature": 0.0,
    }
    transcriber = state.speech.loaded["transcription"][2]
    assert transcriber.asked == [{"language": None, "timestamps": True, "prompt": "Hi.", "max_tokens": 9}]
    srt = send(state, "transcribe", WHISPER, audio=array("f", [0.0] * 16000), body={"response_format": "srt"})[-1]
    assert srt["body"] == "1\n00:00:00,000 --> 00:00:01,000\n16000 samples\n\n"


def test_bad_transcriptions_are_one_request_error_each():
    state = worker()
    one_second = array("f", [0.0] * 16000)
    cases = [
        ({"temperature": 0.7}, one_second, "temperature"),
        ({"response_format": "mp3"}, one_second, "response_format"),
        ({"timestamp_granularities": ["word"]}, one_second, "'word'"),
        ({}, one_second, "does not translate"),  # a translation: a model with tasks only
        ({}, array("f"), "no samples"),
        ({}, array("f", [0.0, float("nan")]), "NaN"),
        ({}, array("f", [float("inf"), float("-inf")]), "infinity"),  # their sum is NaN, not an error of its own
        ({}, array("h", [1, 2]), "float32"),
    ]
    for body, audio, named in cases:
        task = {"task": "translate"} if named == "does not translate" else {}
        [error] = send(state, "transcribe", WHISPER, audio=memoryview(audio), body=body, **task)
        assert error["type"] == "error" and error["kind"] == "request" and named in error["message"], error


def test_speech_streams_samples_or_the_bodys_bytes_and_stops_on_cancel():
    state = worker()
    body = {"input": "Hello.", "voice": "mia", "max_frames": 2, "seed": 11}
    *chunks, done = send(state, "speak", KANI, body=body, float32=True)
    assert state.speech.loaded["speech"][2].sampling.seed == 11  # the model's own sampling, its draws seeded
    assert [array("f", bytes(c["audio"])).tolist() for c in chunks] == [
        [0.0, -0.5, 1.5],
        [0.10000000149011612, -0.5, 1.5],
    ]
    assert {c["sample_rate"] for c in chunks} == {22050} and state.speech.loaded["speech"][2].voice == "mia"
    assert (done["samples"], done["stop"], done["voices"]) == (6, "end", ["leo", "mia"])

    header, first, *_ = send(state, "speak", KANI, body={"input": "Hello.", "response_format": "wav", "voice": "alloy"})
    assert header["audio"][:4] == b"RIFF" and struct.unpack("<I", header["audio"][40:44]) == (0xFFFFFFFF,)
    assert first["audio"] == struct.pack("<3h", 0, -16384, 32767)  # PCM16, the 1.5 clipped
    assert state.speech.loaded["speech"][2].voice is None  # an OpenAI voice it lacks: its default

    state.cancelled.add("speak-1")  # as a `cancel` arriving while the first chunk is made
    *chunks, stopped = send(state, "speak", KANI, body={"input": "Hello.", "response_format": "pcm"})
    assert len(chunks) == 1 and (stopped["samples"], stopped["stop"]) == (3, "cancel")
    assert "speak-1" not in state.cancelled


def test_bad_speech_requests_and_a_lost_device():
    state = worker()
    for body, named in [
        ({"input": "  "}, "'input'"),
        ({"input": "x" * 4097}, "longer than 4096"),
        ({"input": "Hi.", "voice": "nobody"}, "leo, mia"),
        ({"input": "Hi.", "response_format": "mp3"}, "wav or pcm"),
        ({"input": "Hi.", "speed": 1.5}, "speed"),
        ({"input": "Hi.", "max_frames": 0}, "max_frames"),
    ]:
        [error] = send(state, "speak", KANI, body=body)
        assert error["kind"] == "request" and named in error["message"], error
    state.drop_device()  # a lost device (or another model's load): the speech models go with it
    assert state.speech.loaded == {}
