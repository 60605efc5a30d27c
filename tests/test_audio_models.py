"""/v1/audio and the CLI end to end on the engine itself (lavapipe) with the speech fixtures: tiny
random Moonshine (tests/fixtures/moonshine-f32) transcribes its clip, uploaded as FLAC and decoded by
FFmpeg, to transformers' greedy text; tiny random Kani-TTS-2 with NanoCodec (tests/fixtures/kani-f32)
speaks its two reference requests, greedy for 12 frames, to kani-tts-2's and NeMo's PCM."""

import asyncio
import io
import json
from array import array
from pathlib import Path

import numpy as np
import pytest
from test_audio_api import serving
from test_audio_files import encoded

from app.models import ModelRegistry
from app.server import create_app
from py_engine.audio.files import open_audio
from py_engine.audio.wav import read_wav
from py_engine.cli import main

av = pytest.importorskip("av")
openai = pytest.importorskip("openai")
pytestmark = pytest.mark.slow  # whole models on lavapipe: ~15 s together
FIXTURES = Path(__file__).parent / "fixtures"
MOONSHINE, KANI, WHISPER = FIXTURES / "moonshine-f32", FIXTURES / "kani-f32", FIXTURES / "whisper-f16"
CLIP = json.loads((MOONSHINE / "reference.json").read_text())["clips"]["speech"]
HEARD = json.loads((WHISPER / "reference.json").read_text())["cases"]  # on the same clip (speech)
SPOKEN = {r["text"]: r for r in json.loads((KANI / "reference.json").read_text())["requests"]}
PCM16 = 1 / 32768  # the wav and pcm formats' step


@pytest.fixture(scope="module")
def client():
    registry = ModelRegistry([MOONSHINE, KANI, WHISPER], include_cache=False)
    with serving(create_app(registry)) as url:
        yield openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)


def flac_of(wav_path: Path) -> bytes:
    """The clip's 16-bit samples, losslessly as FLAC."""
    wav = read_wav(wav_path.read_bytes())
    ints = np.round(np.asarray(wav.samples) * 32768).astype(np.int16)
    out = io.BytesIO()
    with av.open(out, "w", format="flac") as container:
        stream = container.add_stream("flac", rate=wav.sample_rate, layout="mono")
        frame = av.AudioFrame(format="s16", layout="mono", samples=len(ints))
        frame.planes[0].update(ints.tobytes())
        frame.sample_rate = wav.sample_rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return out.getvalue()


def test_moonshine_transcribes_an_uploaded_flac(client):
    flac = flac_of(MOONSHINE / CLIP["file"])

    async def decoded():
        return array("f", [v async for chunk in open_audio(io.BytesIO(flac), "speech.flac").chunks() for v in chunk])

    wav = read_wav((MOONSHINE / CLIP["file"]).read_bytes())
    assert asyncio.run(decoded()) == wav.samples  # FFmpeg gives the model exactly the samples transformers had
    got = client.audio.transcriptions.create(
        model="moonshine-f32", file=("speech.flac", flac), response_format="verbose_json"
    )
    assert got.text == CLIP["text"].strip()
    assert [(s.start, s.end) for s in got.segments] == [(0.0, 2.5)] and got.duration == 2.5


@pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning")  # the openai package's mark on translations
def test_whisper_transcribes_and_translates(client):
    """Whisper's reference cases on the speech clip without timestamps: a given language, a detected one
    and a prompt, each for its case's tokens (Wisp's max_tokens); a translation; an unknown language."""
    wav = (MOONSHINE / CLIP["file"]).read_bytes()
    for case in ("speech_en", "speech_detect", "speech_prompt"):
        want = HEARD[case]
        assert want["clip"] == "speech" and len(want["segments"]) == 1
        asked = {"language": want["args"]["language"]} if "language" in want["args"] else {}
        asked |= {"prompt": want["prompt"]} if want["prompt"] else {}
        got = client.audio.transcriptions.create(
            model="whisper-f16",
            file=("speech.wav", wav),
            extra_body={"max_tokens": want["max_new_tokens"]},  # json: no timestamps, as the cases
            **asked,
        )
        assert got.text == want["text"].strip(), case
    english = client.audio.translations.create(
        model="whisper-f16", file=("speech.wav", wav), response_format="text", extra_body={"max_tokens": 4}
    )
    assert isinstance(english, str)
    with pytest.raises(openai.BadRequestError, match="'moonshine-f32' does not translate"):
        client.audio.translations.create(model="moonshine-f32", file=("speech.wav", wav))
    with pytest.raises(openai.BadRequestError, match="language 'xx' is not one this model knows"):
        client.audio.transcriptions.create(model="whisper-f16", file=("speech.wav", wav), language="xx")


def test_odd_audio_gets_a_transcript(client):
    """The issue's bad-input cases that are audio: each a transcript (whatever a random model says), no error."""
    odd = {
        "surround.wav": encoded("wav", "pcm_f32le", 96000, layout="7.1"),  # 96 kHz, 8 channels
        "silence.flac": encoded("flac", "flac", 16000, layout="mono", wave=lambda t: 0 * t),
        "clipped.wav": encoded("wav", "pcm_s16le", 16000, layout="mono", wave=lambda t: np.sign(np.sin(t * 900))),
    }
    for name, data in odd.items():
        got = client.audio.transcriptions.create(
            model="moonshine-f32", file=(name, data), response_format="verbose_json"
        )
        assert isinstance(got.text, str) and got.duration == 1.0, name


def test_kani_speaks_the_references(client):
    for text, voice, penalty in [("ash", None, 1.0), ("birch bark", "birch", None)]:
        wisp = {"temperature": 0, "max_frames": 12} | ({"repetition_penalty": penalty} if penalty else {})
        body = client.audio.speech.create(
            model="kani-f32", input=text, voice=voice or "alloy", response_format="pcm", extra_body=wisp
        ).content
        got = np.frombuffer(body, np.int16) / 32768
        want = np.asarray(SPOKEN[text]["pcm"])
        assert len(got) == len(want) == 72
        assert np.abs(got - want).max() <= PCM16 / 2 + 1e-6, text


def test_the_cli_on_the_fixtures(tmp_path, capsys):
    assert main(["transcribe", str(MOONSHINE / CLIP["file"]), "--model", str(MOONSHINE)]) == 0
    assert capsys.readouterr().out == CLIP["text"].strip() + "\n"
    out = tmp_path / "ash.wav"
    argv = ["speak", "ash", "-o", str(out), "--model", str(KANI), "--max-frames", "12"]
    assert main([*argv, "--temperature", "0", "--repetition-penalty", "1"]) == 0
    wav = read_wav(out.read_bytes())
    assert (wav.sample_rate, wav.frames) == (22050, 72)
    assert np.abs(np.asarray(wav.samples) - SPOKEN["ash"]["pcm"]).max() <= PCM16 / 2 + 1e-6
