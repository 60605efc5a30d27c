"""/v1/audio on the desktop (app/audio_api.py), driven by the real `openai` package against the real
server (python -m app's Starlette app under uvicorn, here in a thread): transcriptions of uploaded
files in every response format and speech streamed as it is made, with a stand-in Transcriber and
Speaker put where py_engine.speech's loaders are (the models' own numbers are their tests'; these
check the HTTP side: the upload decoded and streamed to the model, the formats, the errors)."""

import asyncio
import contextlib
import json
import sys
import threading
import time
import types
import urllib.request
from array import array
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from test_audio_files import LongWav, encoded

import py_engine
from app.__main__ import bind
from app.models import ModelRegistry
from app.openai_api import Models
from app.server import create_app
from py_engine.audio.wav import read_wav
from py_engine.catalog import SPEECH_MODELS
from py_engine.speech.speaker import KANI_SAMPLING

openai = pytest.importorskip("openai")
uvicorn = pytest.importorskip("uvicorn")


@dataclass
class Segment:
    start: float
    end: float
    text: str


class FakeTranscriber:
    """Hears how many samples came (and in how many chunks) and says two segments over them."""

    sample_rate = 16000

    def __init__(self, model_id):
        self.model_id, self.heard = model_id, []

    async def transcribe(self, audio, *, language=None, timestamps=False, prompt=None, max_tokens=None):
        chunks = [len(chunk) async for chunk in audio]
        self.heard.append({"samples": sum(chunks), "chunks": len(chunks), "language": language, "prompt": prompt})
        self.heard[-1]["timestamps"] = timestamps
        seconds = sum(chunks) / self.sample_rate
        yield Segment(0.0, seconds / 2, " Hello")
        yield Segment(seconds / 2, seconds, " world.")


class FakeSpeaker:
    """Three chunks of a ramp; the second waits until the client says it has the first (`heard`)."""

    sample_rate = 22050
    voices = ("tara", "leo")

    def __init__(self, model_id):
        self.model_id, self.heard, self.voice_asked = model_id, threading.Event(), []
        self.chunks = [array("f", [(i - 500) / 1000 for i in range(n)]) for n in (1000, 700, 301)]
        self.waited = []

    async def speak(self, text, *, voice=None, max_frames=None, sampling=None):
        self.voice_asked.append(voice)
        self.options = {"max_frames": max_frames, "sampling": sampling}
        yield self.chunks[0]
        self.waited.append(await asyncio.to_thread(self.heard.wait, 120))
        for chunk in self.chunks[1:]:
            yield chunk


@pytest.fixture
def server(tmp_path, monkeypatch):
    """(client, the fakes by model id) over a server with a speech-to-text and a text-to-speech folder."""
    folders = {}
    for name, arch in [("whisper-fake", "WhisperForConditionalGeneration"), ("kani-fake", "FakeSpeaker")]:
        folder = folders[name] = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"architectures": [arch]}))
        (folder / "model.safetensors").write_bytes(b"")
    loaded = {}

    async def load(model, device, *, model_id=None, kind):
        assert Path(model) == folders[model_id] and device == "the device"
        loaded[model_id] = kind(model_id)
        return loaded[model_id]

    speech = types.ModuleType("py_engine.speech")
    speech.load_transcriber = lambda *a, **k: load(*a, **k, kind=FakeTranscriber)
    speech.load_speaker = lambda *a, **k: load(*a, **k, kind=FakeSpeaker)
    monkeypatch.setitem(sys.modules, "py_engine.speech", speech)
    monkeypatch.setattr(py_engine, "speech", speech, raising=False)
    registry = ModelRegistry(list(folders.values()), include_cache=False)
    models = Models(registry)
    models.device = "the device"  # no GPU is opened for the stand-ins
    with serving(create_app(registry, openai=models)) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120), loaded


@contextlib.contextmanager
def serving(app):
    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive(), "the server did not start"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join()


def test_transcriptions_in_every_format(server):
    client, loaded = server
    mp3 = encoded("mp3", "libmp3lame", 44100, seconds=2.0)
    got = client.audio.transcriptions.create(model="whisper-fake", file=("talk.mp3", mp3))
    assert got.text == "Hello world."
    heard = loaded["whisper-fake"].heard[-1]
    assert abs(heard["samples"] - 32000) <= 1200 and heard["timestamps"] is False and heard["language"] is None
    text = client.audio.transcriptions.create(
        model="whisper-fake", file=("talk.mp3", mp3), response_format="text", language="EN", prompt="Greetings."
    )
    assert text.strip() == "Hello world."
    assert loaded["whisper-fake"].heard[-1] | {"samples": 0} == {
        "samples": 0,
        "chunks": 1,
        "language": "en",
        "prompt": "Greetings.",
        "timestamps": False,
    }
    wav = encoded("wav", "pcm_s16le", 16000, layout="mono", seconds=2.0)
    srt = client.audio.transcriptions.create(model="whisper-fake", file=("talk.wav", wav), response_format="srt")
    assert srt == "1\n00:00:00,000 --> 00:00:01,000\nHello\n\n2\n00:00:01,000 --> 00:00:02,000\nworld.\n\n"
    assert loaded["whisper-fake"].heard[-1]["timestamps"] is True
    vtt = client.audio.transcriptions.create(model="whisper-fake", file=("talk.wav", wav), response_format="vtt")
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nHello\n\n")
    verbose = client.audio.transcriptions.create(
        model="whisper-fake",
        file=("talk.wav", wav),
        response_format="verbose_json",
        timestamp_granularities=["segment"],
        temperature=0,
    )
    assert verbose.text == "Hello world." and verbose.duration == 2.0
    assert [(s.start, s.end, s.text) for s in verbose.segments] == [(0.0, 1.0, " Hello"), (1.0, 2.0, " world.")]


def test_a_long_upload_reaches_the_model_in_chunks(server):
    """70 s uploaded (8 kHz, 8-bit: 560 KB; spooled to disk past 1 MB, so bigger ones are never in memory
    whole) arrives at the model as 30-s chunks at 16 kHz, decoded as it listens."""
    client, loaded = server
    upload = LongWav(70)
    client.audio.transcriptions.create(model="whisper-fake", file=("long.wav", upload.read()))
    heard = loaded["whisper-fake"].heard[-1]
    assert heard["chunks"] == 3 and abs(heard["samples"] - 70 * 16000) <= 64


def test_bad_transcription_requests(server, monkeypatch):
    client, _ = server
    wav = encoded("wav", "pcm_s16le", 16000, layout="mono", seconds=0.5)
    refused = [
        ({"temperature": 0.4}, openai.BadRequestError, "only temperature 0"),
        ({"timestamp_granularities": ["word"]}, openai.BadRequestError, "granularity 'word' is not served"),
        ({"response_format": "xml"}, openai.BadRequestError, "'response_format' must be one of"),
        ({"model": "nobody"}, openai.NotFoundError, "no model 'nobody'"),
        ({"extra_body": {"max_tokens": 0}}, openai.BadRequestError, "'max_tokens' must be a whole number"),
        ({"extra_body": {"beam_size": 5}}, openai.BadRequestError, "unknown field 'beam_size'"),
        ({"file": ("empty.wav", b"")}, openai.BadRequestError, "empty.wav: the file is empty"),
        ({"file": ("notes.txt", b"just some text")}, openai.BadRequestError, "notes.txt: not an audio file"),
        ({"file": ("cut.wav", wav[:30])}, openai.BadRequestError, "cut.wav: a damaged or unreadable wav file"),
    ]
    for change, error, message in refused:
        asked = {"model": "whisper-fake", "file": ("talk.wav", wav)} | change
        with pytest.raises(error, match=message):
            client.audio.transcriptions.create(**asked)
    monkeypatch.setattr("app.audio_api.UPLOAD_CAP", 4096)
    with pytest.raises(openai.APIStatusError, match="this server reads at most 4 KiB") as caught:
        client.audio.transcriptions.create(model="whisper-fake", file=("talk.wav", wav))
    assert caught.value.status_code == 413


def test_speech_streams_as_it_is_made(server):
    client, loaded = server
    with client.audio.speech.with_streaming_response.create(
        model="kani-fake", voice="leo", input="Hello there.", response_format="pcm"
    ) as response:
        assert response.headers["x-sample-rate"] == "22050"
        pieces = response.iter_bytes()
        first = next(pieces)
        speaker = loaded["kani-fake"]
        speaker.heard.set()  # only now does the speaker make its second chunk
        body = first + b"".join(pieces)
    assert speaker.waited == [True] and speaker.voice_asked == ["leo"]
    assert speaker.options == {"max_frames": None, "sampling": None}  # the model's own
    assert len(first) < len(body) == 2 * 2001
    samples = array("h", body)
    want = [v for chunk in speaker.chunks for v in chunk]
    assert max(abs(s / 32768 - w) for s, w in zip(samples, want)) <= 1 / 32768


def test_speech_as_a_wav_file(server):
    client, loaded = server

    def release_when_asked():  # the stand-in waits for a signal this client does not stream to give
        while "kani-fake" not in loaded:
            time.sleep(0.01)
        loaded["kani-fake"].heard.set()

    threading.Thread(target=release_when_asked, daemon=True).start()
    wisp = {"temperature": 0, "seed": 7, "max_frames": 5}  # Wisp's fields: reproducible speech
    response = client.audio.speech.create(model="kani-fake", voice="alloy", input="Hi.", extra_body=wisp)
    wav = read_wav(response.content)
    assert (wav.sample_rate, wav.channels, wav.frames) == (22050, 1, 2001)
    speaker = loaded["kani-fake"]
    assert speaker.voice_asked == [None]  # OpenAI's voice name: the model's default voice
    assert speaker.options == {"max_frames": 5, "sampling": replace(KANI_SAMPLING, temperature=0, seed=7)}


def test_bad_speech_requests(server):
    client, _ = server
    refused = [
        ({"response_format": "mp3"}, "response_format 'mp3' is not served"),
        ({"speed": 1.5}, "only speed 1.0"),
        ({"voice": "nobody"}, r"'kani-fake' has no voice 'nobody' \(its voices: tara, leo\)"),
        ({"input": " "}, "'input' must be the text to speak"),
        ({"stream_format": "sse"}, "stream_format 'audio' only"),
        ({"instructions": "whisper"}, "instructions are not served"),
        ({"extra_body": {"temperature": 3}}, r"'temperature' is out of range \(3\)"),
        ({"extra_body": {"max_frames": 0}}, "'max_frames' must be a whole number"),
        ({"extra_body": {"pitch": 2}}, "unknown field 'pitch'"),
    ]
    for change, message in refused:
        with pytest.raises(openai.BadRequestError, match=message):
            client.audio.speech.create(**({"model": "kani-fake", "voice": "tara", "input": "Hi."} | change))


def test_speech_models_are_not_chat_models(server):
    client, _ = server
    listed = client.get("/models", cast_to=object)
    assert {m["id"] for m in listed["data"]} == {"whisper-fake", "kani-fake"}
    with urllib.request.urlopen(str(client.base_url).replace("/v1/", "/api/models")) as response:
        served = {m["id"]: m.get("task", "chat") for m in json.load(response)}
    assert served["whisper-fake"] == "transcription"  # the page's chat picker leaves it out


def test_a_kani_folder_is_served_with_its_codec(tmp_path):
    """The page loads Kani-TTS-2 from /models/<id>/...: its codec's files (nanocodec/) are listed too."""
    folder = tmp_path / "kani"
    (folder / "nanocodec").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["KaniTTS2ForCausalLM"]}))
    for name in ("model.safetensors", "voices.safetensors", "nanocodec/config.json", "nanocodec/model.safetensors"):
        (folder / name).write_bytes(b"{}")
    (folder / "nanocodec" / "notes.txt").write_text("not served")
    served = ModelRegistry([folder], include_cache=False).models()[0]
    assert served.task == "speech"
    assert sorted(served.files) == [
        "config.json",
        "model.safetensors",
        "nanocodec/config.json",
        "nanocodec/model.safetensors",
        "voices.safetensors",
    ]
    assert served.file("nanocodec/model.safetensors") == folder / "nanocodec" / "model.safetensors"


def test_catalog_speech_models_are_served_from_the_cache(tmp_path, monkeypatch):
    """A fetched whisper-base (py_engine fetch whisper-base) is listed, as the embedding models are."""
    folder = tmp_path / "whisper-base"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["WhisperForConditionalGeneration"]}))
    (folder / "model.safetensors").write_bytes(b"{}")
    monkeypatch.setattr(
        "app.models.cached_path", lambda name, cache_dir=None: folder if name == "whisper-base" else None
    )
    listed = {m.id: m for m in ModelRegistry().models()}
    assert set(listed) == {"whisper-base"} and listed["whisper-base"].task == "transcription"
    assert listed["whisper-base"].sha256["model.safetensors"] == next(
        f.sha256 for f in SPEECH_MODELS["whisper-base"].files if f.name == "model.safetensors"
    )
    assert [m.id for m in ModelRegistry(["whisper-base"], include_cache=False).models()] == ["whisper-base"]
