"""`python -m py_engine transcribe FILE` and `speak TEXT -o out.wav` (py_engine/audio/commands.py),
run in-process with the stand-in Transcriber and Speaker of test_audio_api in py_engine.speech's
place and no GPU device: each transcript format printed as segments come, the WAV written as
chunks come, and bad input one line on stderr with exit code 2."""

import sys
import types

import pytest
from test_audio_api import FakeSpeaker, FakeTranscriber
from test_audio_files import encoded

import py_engine
from py_engine.audio.wav import read_wav
from py_engine.cli import main


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """(a speech-to-text folder, a text-to-speech folder, the stand-ins loaded) with no device opened."""
    loaded = {}

    def loader(kind):
        async def load(model, device, **_):
            assert device == "the device"
            loaded[kind] = kind(model.name)
            if kind is FakeSpeaker:
                loaded[kind].heard.set()  # nothing here streams: its second chunk need not wait
            return loaded[kind]

        return load

    async def open_device(**_):
        return "the device"

    speech = types.ModuleType("py_engine.speech")
    speech.load_transcriber, speech.load_speaker = loader(FakeTranscriber), loader(FakeSpeaker)
    monkeypatch.setitem(sys.modules, "py_engine.speech", speech)
    monkeypatch.setattr(py_engine, "speech", speech, raising=False)
    monkeypatch.setattr("py_engine.gpu.open_device", open_device)
    for name in ("whisper-fake", "kani-fake"):
        (tmp_path / name).mkdir()
    return tmp_path / "whisper-fake", tmp_path / "kani-fake", loaded


def test_transcribe_in_each_format(folders, tmp_path, capsys):
    whisper, _, loaded = folders
    clip = tmp_path / "talk.ogg"
    clip.write_bytes(encoded("ogg", "libopus", 48000, seconds=2.0))
    model = ["--model", str(whisper)]
    assert main(["transcribe", str(clip), *model]) == 0
    assert capsys.readouterr().out == "Hello world.\n"
    heard = loaded[FakeTranscriber].heard[-1]
    assert heard["samples"] == 32000 and heard["timestamps"] is False
    assert main(["transcribe", str(clip), *model, "--timestamps", "--language", "EN", "--prompt", "Hi."]) == 0
    assert capsys.readouterr().out == "[00:00.000 --> 00:01.000] Hello\n[00:01.000 --> 00:02.000] world.\n"
    assert loaded[FakeTranscriber].heard[-1] | {"samples": 0} == {
        "samples": 0,
        "chunks": 1,
        "language": "en",
        "prompt": "Hi.",
        "timestamps": True,
    }
    assert main(["transcribe", str(clip), *model, "--format", "srt"]) == 0
    assert capsys.readouterr().out.startswith("1\n00:00:00,000 --> 00:00:01,000\nHello\n\n2\n")
    assert main(["transcribe", str(clip), *model, "--format", "vtt"]) == 0
    assert capsys.readouterr().out.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:01.000\nHello\n\n")
    assert main(["transcribe", str(clip), *model, "--format", "json"]) == 0
    assert '"text": "Hello world."' in capsys.readouterr().out


def test_speak_writes_a_wav_file(folders, tmp_path, capsys):
    _, kani, loaded = folders
    out = tmp_path / "out.wav"
    assert main(["speak", "Hello there.", "-o", str(out), "--model", str(kani), "--voice", "tara"]) == 0
    wav = read_wav(out.read_bytes(), str(out))
    assert (wav.sample_rate, wav.channels, wav.frames) == (22050, 1, 2001)
    want = [v for chunk in loaded[FakeSpeaker].chunks for v in chunk]
    assert max(abs(a - b) for a, b in zip(wav.samples, want)) <= 1 / 32768
    assert loaded[FakeSpeaker].voice_asked == ["tara"]
    assert "s of speech in" in capsys.readouterr().err


def test_bad_input_is_one_line(folders, tmp_path, capsys):
    whisper, kani, _ = folders
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    cases = [
        (["transcribe", str(empty), "--model", str(whisper)], f"error: {empty}: the file is empty (0 bytes)\n"),
        (["transcribe", str(tmp_path / "none.mp3")], f"error: {tmp_path / 'none.mp3'}: No such file or directory\n"),
        (
            ["speak", "Hi.", "-o", str(tmp_path / "x.wav"), "--model", str(kani), "--voice", "bob"],
            "error: --voice bob: kani-fake has no such voice (its voices: tara, leo)\n",
        ),
        (["speak", "Hi.", "-o", str(tmp_path / "x.wav"), "--model", "no-such-model"], "error: no-such-model: no such"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        assert capsys.readouterr().err.startswith(message), argv
