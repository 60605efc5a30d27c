"""Kani-TTS-2 end to end on the tiny random fixture (tools/make_kani_fixture.py: kani-tts-2's own model
code under transformers 5.24, NeMo's codec): the engine's logits, frame positions, greedy tokens and
the PCM its Speaker streams, against the reference."""

import asyncio
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from gpu_harness import device

from py_engine.decode.token_choice import SamplingParams
from py_engine.errors import ModelFileError, WispError
from py_engine.models.kani_tts import frame_positions
from py_engine.runtime.memory import ModelTooLargeError
from py_engine.speech.kani_files import read_kani_files
from py_engine.speech.kani_frames import FrameGrammar
from py_engine.speech.speaker import FIRST_CHUNK, load_speaker

FIXTURE = Path(__file__).parent / "fixtures" / "kani-f32"
REFERENCE = json.loads((FIXTURE / "reference.json").read_text())
REQUESTS = REFERENCE["requests"]  # "ash": no voice, no penalty; "birch bark": voice "birch", penalty 1.1


@pytest.fixture(scope="module")
def speaker():
    dev, _ = device()
    return asyncio.run(load_speaker(FIXTURE, dev))


def speak(speaker, request, **overrides):
    """(the PCM chunks, the engine's token count when the first chunk came) of a greedy request."""
    options = dict(voice=request["voice"], max_frames=request["max_frames"])
    sampling = SamplingParams(repetition_penalty=request["repetition_penalty"])

    async def run():
        chunks, fed = [], None
        async for pcm in speaker.speak(request["text"], sampling=sampling, **(options | overrides)):
            fed = len(speaker.engine.tokens) if fed is None else fed
            chunks.append(np.array(pcm))
        return chunks, fed

    return asyncio.run(run())


@pytest.mark.parametrize("request_index", [0, 1], ids=["no-voice", "voice-and-penalty"])
def test_speak_matches_kani_and_nemo(speaker, request_index):
    request = REQUESTS[request_index]
    assert speaker.prompt(request["text"]) == request["prompt_ids"]
    chunks, fed_at_first_chunk = speak(speaker, request)
    skipped = 1 if request["voice"] else 0  # the speaker embedding's row
    assert speaker.engine.tokens[len(request["prompt_ids"]) + skipped :] == request["generated"]
    pcm = np.concatenate(chunks)
    assert pcm.shape == (len(request["codes"]) * speaker.codec.hop,)
    assert np.abs(pcm - np.array(request["pcm"])).max() < 1e-3  # measured 8.6e-8
    # Streamed: the first chunk (FIRST_CHUNK frames) came while the model was still writing frames.
    assert len(chunks[0]) == FIRST_CHUNK * speaker.codec.hop
    assert fed_at_first_chunk < len(speaker.engine.tokens)


def test_logits_follow_the_reference(speaker):
    """The first request's prompt, then its tokens one decode forward each: the logits of kani's
    forward at each of the first steps (the frame positions and learnable RoPE of a decode row)."""
    request, want = REQUESTS[0], np.load(FIXTURE / "reference_logits.npy")
    engine = speaker.engine
    engine.reset()
    engine.place_images(0, request["prompt_ids"], -1)

    async def run():
        rows = [await engine.prompt_logits(request["prompt_ids"])]
        for token in request["generated"][: len(want) - 1]:
            rows.append(list((await engine.rows_logits([token]))[0]))
        return np.array(rows)

    got = asyncio.run(run())
    assert np.abs(got - want).max() < 1e-3 * np.abs(want).max()


def test_frame_positions_are_kanis():
    """compute_frame_level_positions' positions (checked by the tool against kani's generation state
    machine): text + 1 each, a frame of 4 audio tokens + audio_step (0.5)."""
    for request in REQUESTS:
        tokens = request["prompt_ids"] + request["generated"]
        if request["voice"]:  # the speaker row after the first token, counted as text (the engine feeds a PAD)
            tokens = tokens[:1] + [307] + tokens[1:]
        positions = frame_positions(tokens, 0, len(tokens), 310, 4, 0.5)
        assert positions[:1] + positions[1 + bool(request["voice"]) :] == request["positions"]
    assert frame_positions([1, 2, 310, 400, 450, 500, 311], 2, 5, 310, 4, 0.5) == [2.0, 2.0, 2.0, 2.0, 2.5]


def test_the_voice_changes_the_speech(speaker):
    request = REQUESTS[1]
    speak(speaker, request, voice=None, max_frames=2)
    assert speaker.engine.tokens[len(request["prompt_ids"]) :] != request["generated"][:8]


def test_bad_requests_are_refused(speaker):
    with pytest.raises(WispError, match="no voice 'oak'"):
        speak(speaker, REQUESTS[0], voice="oak")
    with pytest.raises(WispError, match="no language tag"):
        asyncio.run(anext(speaker.speak("ash", language="en")))
    with pytest.raises(WispError, match="too long"):
        asyncio.run(anext(speaker.speak("ash " * 600)))


def test_files_read_without_a_device():
    files = read_kani_files(FIXTURE)
    k = files.settings
    assert (k.text_vocab, k.audio_start, k.per_frame, k.codebook, k.audio_step) == (300, 310, 4, 48, 0.5)
    assert sorted(files.alphas) == [1, 3] and len(set(files.alphas.values())) == 2
    assert sorted(files.voices) == ["ash", "birch"] and "ash" not in files.tensors


def test_frame_grammar():
    """Slot k takes codebook k's tokens; END_OF_SPEECH only at a frame's start; after max_frames,
    END_OF_SPEECH alone."""
    grammar = FrameGrammar(vocab=502, audio_start=310, per_frame=4, codebook=48, end_of_speech=302, max_frames=2)

    def allowed() -> set:
        bits = int.from_bytes(grammar.mask(), "little")
        return {i for i in range(502) if bits >> i & 1}

    assert allowed() == {302, *range(310, 358)}
    for slot, code in enumerate([5, 0, 47, 9]):
        grammar.advance(310 + slot * 48 + code)
        assert allowed() == (
            {302, *range(310, 358)} if slot == 3 else set(range(310 + 48 * (slot + 1), 358 + 48 * (slot + 1)))
        )
    assert grammar.frames == [[5, 0, 47, 9]]
    grammar.advance(310)
    with pytest.raises(ValueError):
        grammar.advance(302)  # END_OF_SPEECH inside a frame
    for slot in range(1, 4):
        grammar.advance(310 + slot * 48)
    assert allowed() == {302} and not grammar.finished
    grammar.advance(302)
    assert grammar.finished and grammar.frames == [[5, 0, 47, 9], [0, 0, 0, 0]]


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"architectures": ["Lfm2ForCausalLM"]}, "KaniTTS2ForCausalLM"),
        ({"tokens_per_frame": 8}, "tokens_per_frame"),
        ({"audio_tokens_start": 320}, "audio_tokens_start"),
        ({"text_vocab_size": 400, "audio_tokens_start": 410}, "vocab_size should be at least 602"),
        (
            {"use_learnable_rope": True, "layer_types": ["full_attention", "full_attention", "conv", "full_attention"]},
            "alpha_weight",
        ),
    ],
)
def test_bad_folders_name_the_problem(tmp_path, change, problem):
    shutil.copytree(FIXTURE, tmp_path / "kani")
    config = json.loads((FIXTURE / "config.json").read_text()) | change
    (tmp_path / "kani" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelFileError, match=problem):
        read_kani_files(tmp_path / "kani")


def test_a_cancel_leaves_the_speaker_ready(speaker):
    """The listener stops after the first chunk: the lock is free and the next request is the reference's."""
    request = REQUESTS[0]

    async def first_chunk():
        chunks = speaker.speak(request["text"], max_frames=request["max_frames"], sampling=SamplingParams())
        first = await anext(chunks)
        await chunks.aclose()
        return first

    assert len(asyncio.run(first_chunk())) == FIRST_CHUNK * speaker.codec.hop
    chunks, _ = speak(speaker, request)
    assert speaker.engine.tokens[len(request["prompt_ids"]) :] == request["generated"]
    assert np.abs(np.concatenate(chunks) - np.array(request["pcm"])).max() < 1e-3


def test_a_budget_too_small_is_refused_before_any_upload():
    dev, _ = device()
    with pytest.raises(ModelTooLargeError):
        asyncio.run(load_speaker(FIXTURE, dev, gpu_budget=200_000))  # the codec alone plans 132 KB
