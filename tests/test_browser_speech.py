"""Speech in the page, in headless Chromium: the microphone and the speaker (issue 32).

Chromium's fake capture device plays a synthetic clip (0.6 s of silence, 1.4 s of a voiced sound,
2 s of silence, looped) into getUserMedia. One browser session for the module:
- the capture worklet (static/capture_worklet.js) alone, in an OfflineAudioContext at 44.1 and 48
  kHz: its 16 kHz output equals an ideal band-limited resample of the same signal (numpy's FFT) to
  60 dB, and the tones above 8 kHz that sample dropping would fold into the band are gone;
- push to talk: the microphone button held through a sound, a silence longer than the hands-free
  hangover and the next sound (the level meter says each), then let go: the recording sent to the
  worker holds both sounds and follows the clip (aligned to the ideal resample, 30 dB);
- hands-free: a tap, and the recording ends by itself after the sound (static/vad.js), trimmed to it;
  each recording is transcribed into the message box by the worker's transcription model (tests/
  fixtures/whisper-f16, random weights, held to 12 tokens): the very text the desktop's engine makes
  of the same samples;
- the speaker button of an answer (the tiny chat model's), pressed while it streams: its sentences
  are spoken by the speech model (tests/fixtures/kani-f32, random weights, seeded) and played; every
  sample reaching the audio output (a recorder worklet tapped beside each AudioContext's destination)
  is the engine's, in order, and the engine's PCM is the desktop's within 1e-3;
- static/openai.js: a 16 kHz file transcribed to transformers' ids and text (the fixture's reference),
  a 48 kHz stereo file decoded to 16 kHz mono, speech as pcm (the desktop's samples) while a chat
  answer streams (the same answer as alone) and as wav, and refusals named.
The loads and the 30-s Whisper windows on SwiftShader make it ~2 minutes. Screenshots in
tests/artifacts/speech-*.png."""

import asyncio
import base64
import dataclasses
import json
import re
import wave
from array import array
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from browser_harness import CHROMIUM, FLAGS, ROOT, app_server, check_protocol, record_protocol
from gpu_harness import device
from speech_harness import (
    CLIP_RATE,
    OUTPUT_TAP,
    PAUSE,
    SOUND,
    TAPPED,
    aligned_snr,
    clip,
    ideal_resample,
    snr_db,
    write_wav,
)
from test_openai_server import TINY, tiny_tool_model

from py_engine.audio.requests import parse_transcription, transcribed
from py_engine.audio.transcript import plain_text
from py_engine.speech import load_speaker, load_transcriber
from py_engine.speech.speaker import KANI_SAMPLING

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.browser, pytest.mark.slow]
expect = playwright_api.expect

ARTIFACTS = ROOT / "tests" / "artifacts"
TRANSCRIBER = ROOT / "tests" / "fixtures" / "whisper-f16"
WHISPER_REFERENCE = json.loads((TRANSCRIBER / "reference.json").read_text())
TOKENS = 12  # a transcript's most tokens (the random model would write a window's 448)
SPEAKER = ROOT / "tests" / "fixtures" / "kani-f32"
MOONSHINE = ROOT / "tests" / "fixtures" / "moonshine-f32"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    chat = tiny_tool_model(tmp_path_factory.mktemp("speech-chat"))
    with app_server("--no-default", "--model", str(chat), str(TRANSCRIBER), str(SPEAKER), str(MOONSHINE)) as (url, _):
        yield url


@pytest.fixture(scope="module")
def session(server, tmp_path_factory):
    """(page, protocol traffic, page errors): one Chromium whose fake microphone plays clip()."""
    wav = tmp_path_factory.mktemp("speech") / "clip.wav"
    write_wav(wav, clip(), CLIP_RATE)
    media = ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]
    args = [*FLAGS, *media, f"--use-file-for-fake-audio-capture={wav}", "--autoplay-policy=no-user-gesture-required"]
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=args)
        context = browser.new_context(viewport={"width": 1100, "height": 760}, permissions=["microphone"])
        traffic = record_protocol(context)
        context.add_init_script(OUTPUT_TAP)
        context.add_init_script(SETTINGS)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(server + "/")
        expect(page.get_by_test_id("mic-button")).to_be_visible(timeout=30_000)
        yield page, traffic, errors
        browser.close()


# Greedy, short answers; a sentence spoken in at most MAX_FRAMES codec frames (the random speech model never ends)
MAX_FRAMES, SEED = 16, 5
SETTINGS = (
    'localStorage.setItem("wisp.sampling", JSON.stringify({temperature: 0, top_p: 1, repetition_penalty: 1, max_new_tokens: 24}));'
    f'localStorage.setItem("wisp.speech", JSON.stringify({{max_frames: {MAX_FRAMES}, seed: {SEED}, max_tokens: {TOKENS}}}));'
)


OFFLINE = """async ({rate, samples}) => {
  const ctx = new OfflineAudioContext(1, samples.length + rate, rate);  // a second more: the filter's tail
  await ctx.audioWorklet.addModule("/static/capture_worklet.js");
  const buffer = ctx.createBuffer(1, samples.length, rate);
  buffer.copyToChannel(Float32Array.from(samples), 0);
  const source = ctx.createBufferSource();
  source.buffer = buffer;
  const node = new AudioWorkletNode(ctx, "wisp-capture", {processorOptions: {rate: 16000}});
  const parts = [];
  node.port.onmessage = (ev) => parts.push(ev.data.pcm);
  source.connect(node);
  node.connect(ctx.destination);
  source.start();
  await ctx.startRendering();
  const want = Math.floor(samples.length * 16000 / rate);
  const have = () => parts.reduce((n, p) => n + p.length, 0);
  while (have() < want) await new Promise((r) => setTimeout(r, 10));  // the port's last messages
  return parts.flatMap((p) => Array.from(p)).slice(0, want);
}"""


@pytest.mark.parametrize("rate", [44100, 48000])
def test_the_capture_worklet_resamples_band_limited(session, rate):
    page, _, errors = session
    t = np.arange(2 * rate) / rate
    speech = (
        0.2 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 3000 * t + 1) + 0.05 * np.sin(2 * np.pi * 6500 * t)
    )
    above = 0.2 * np.sin(2 * np.pi * 9000 * t) + 0.1 * np.sin(2 * np.pi * 11000 * t)  # fold to 7 and 5 kHz if dropped
    signal = ((speech + above) * np.hanning(len(t))).astype(np.float32)
    out = np.array(page.evaluate(OFFLINE, {"rate": rate, "samples": signal.tolist()}))
    reference = ideal_resample(signal.astype(float), rate)
    assert len(out) == len(reference) == 32000
    assert snr_db(out, reference) > 60, snr_db(out, reference)
    dropped = signal[:: rate // 16000][: len(reference)] if rate % 16000 == 0 else None
    if dropped is not None:  # the check tells: sample dropping folds the tones above 8 kHz into the band
        assert snr_db(dropped, reference) < 10
    assert not errors, errors


def transcribe_messages(traffic) -> list:
    return [data for to, data in traffic if to == "worker" and data.get("type") == "transcribe"]


def wait_level(page, loud: bool):
    """Until the meter reads the sound (loud) or the silence: audio time, whatever the clock."""
    page.wait_for_function(
        "(loud) => { const db = Number(document.querySelector('#mic-level').dataset.db);"
        " return loud ? db > -30 : db < -80; }",
        arg=loud,
        timeout=30_000,
    )


def test_push_to_talk_records_while_held_and_the_meter_follows(session):
    page, traffic, errors = session
    button = page.get_by_test_id("mic-button")
    box = button.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    expect(page.get_by_test_id("mic-level")).to_be_visible()
    wait_level(page, loud=True)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "speech-microphone.png"))
    assert button.get_attribute("aria-pressed") == "true"
    wait_level(page, loud=False)  # the pause: longer than the hands-free hangover, and still held
    wait_level(page, loud=True)  # the loop's next sound
    page.mouse.up()
    page.wait_for_function(
        "() => document.querySelector('#mic-button').dataset.state !== 'listening'"
        " && document.querySelector('#mic-button').dataset.state !== 'hearing'"
    )
    [sent] = transcribe_messages(traffic)
    audio = np.array(sent["audio"], dtype=np.float64)
    loud = np.abs(audio) > 0.05
    edges = np.flatnonzero(np.diff(loud.astype(int)) != 0)
    assert len(audio) > (PAUSE + 0.2) * 16000  # both sounds and the pause between them
    gaps = np.diff(np.flatnonzero(loud))
    assert gaps.max() > 0.9 * PAUSE * 16000, (len(edges), gaps.max())  # the pause, kept whole
    period = ideal_resample(clip(), CLIP_RATE, periodic=True)
    assert aligned_snr(audio, period) > 30
    expect(button).to_have_attribute("data-state", "idle", timeout=120_000)  # its first load, then its words:
    expect(page.get_by_test_id("prompt-input")).to_have_value(desktop_transcript(audio))  # the desktop's for it
    assert not errors, errors


def test_hands_free_ends_by_itself_after_the_speech(session):
    page, traffic, errors = session
    button = page.get_by_test_id("mic-button")
    prompt = page.get_by_test_id("prompt-input")
    prompt.fill("")
    before = len(transcribe_messages(traffic))
    button.click()  # a tap: hands-free
    expect(button).to_have_attribute("data-state", "hearing", timeout=30_000)
    page.wait_for_function(
        "() => !['listening', 'hearing'].includes(document.querySelector('#mic-button').dataset.state)",
        timeout=30_000,
    )
    sent = transcribe_messages(traffic)[before:]
    assert len(sent) == 1
    audio = np.array(sent[0]["audio"], dtype=np.float64)
    # the utterance with 0.3 s before and after it: at most the whole sound, at least 0.1 s of it
    assert 0.1 * 16000 < len(audio) <= (SOUND + 0.6) * 16000 + 320, len(audio)
    tail = audio[-int(0.25 * 16000) :]
    assert np.sqrt(np.mean(tail**2)) < 1e-3  # it ends in the quiet after the speech
    expect(button).to_have_attribute("data-state", "idle", timeout=120_000)
    # the model's words for that recording (a random model's: noise) went into the message box, as the
    # desktop's engine transcribes the same samples
    expect(prompt).to_have_value(desktop_transcript(audio), timeout=5_000)
    page.screenshot(path=str(ARTIFACTS / "speech-transcript.png"))
    assert not errors, errors
    seen = check_protocol(traffic)
    assert seen["transcribe"] == 2 and seen["speech"] >= 2 and seen["transcript_segment"] >= 1, seen


def on_the_desktop(work):
    """`work(device)`'s coroutine run by the desktop's engine (lavapipe), in a thread of its own:
    Playwright's event loop holds this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(work(device(False)[0]))).result()


def desktop_transcript(audio: np.ndarray) -> str:
    async def run(dev):
        transcriber = await load_transcriber(TRANSCRIBER, dev)
        samples = array("f", audio.astype(np.float32))
        asked = parse_transcription({"model": [TRANSCRIBER.name], "max_tokens": [str(TOKENS)]})  # the page's body
        return plain_text(await transcribed(transcriber, samples, asked))

    return on_the_desktop(run)


def desktop_speech(texts: list[str], frames: int) -> list[np.ndarray]:
    async def run(dev):
        speaker = await load_speaker(SPEAKER, dev)
        sampling = dataclasses.replace(KANI_SAMPLING, seed=SEED)
        return [
            np.concatenate([np.array(c) async for c in speaker.speak(t, max_frames=frames, sampling=sampling)])
            for t in texts
        ]

    return on_the_desktop(run)


def pcm_events(traffic, request: str) -> np.ndarray:
    """The samples a speak request's speech_audio events brought the page (float32 bytes, as a list)."""
    chunks = [
        np.array(d["audio"], np.uint8).view("<f4")
        for to, d in traffic
        if to == "page" and d.get("type") == "speech_audio" and d["id"] == request
    ]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


def test_an_answer_is_read_aloud_and_the_output_is_the_engines(session):
    page, traffic, errors = session
    page.get_by_test_id("load-button").click()
    expect(page.get_by_test_id("load-button")).to_contain_text("Loaded", timeout=120_000)
    page.get_by_test_id("prompt-input").fill("Read me something.")
    page.get_by_test_id("send-button").click()
    speaker = page.get_by_test_id("speak-button").last
    speaker.click()  # while the answer streams: its sentences are read as they complete
    expect(speaker).to_have_class(re.compile("is-active"))
    expect(page.locator("article.msg-assistant").last).to_have_attribute("aria-busy", "false", timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "speech-speaker.png"))  # the answer, read on
    expect(speaker).not_to_have_class(re.compile("is-active"), timeout=180_000)  # read to its end
    asked = [d for to, d in traffic if to == "worker" and d.get("type") == "speak"]
    assert asked and all(
        d["float32"] and (d["body"]["max_frames"], d["body"]["seed"]) == (MAX_FRAMES, SEED) for d in asked
    )
    engine = [pcm_events(traffic, d["id"]) for d in asked]
    assert all(len(pcm) for pcm in engine)
    made = np.concatenate(engine)
    out = np.array(page.evaluate(TAPPED, {"rate": 22050, "nonzero": int(np.count_nonzero(made))}), np.float32)
    # what reached the destination is the engine's samples, in order, none lost, changed or repeated
    # (the player's underruns insert silence: exact zeros, left out of both)
    assert np.array_equal(out[out != 0], made[made != 0])
    desktop = desktop_speech([d["body"]["input"] for d in asked], MAX_FRAMES)
    for pcm, want in zip(engine, desktop):  # and the engine in the page is the desktop's
        assert len(pcm) == len(want) and np.abs(pcm - want).max() < 1e-3
    assert not errors, errors


SENTENCES = """async (text) => {
  const { sentencesIn } = await import("/static/speaker.js");
  const said = [];
  let next = 0;
  for (let n = 1; n <= text.length; n++) {  // as the answer streams, a character at a time
    const found = sentencesIn(text.slice(0, n), next);
    said.push(...found.sentences.map((s) => [n, s]));
    next = found.next;
  }
  said.push(...sentencesIn(text, next, true).sentences.map((s) => [text.length, s]));
  return said;
}"""


def test_an_answer_is_read_a_sentence_at_a_time_as_it_streams(session):
    page, _, errors = session
    text = "Hello there. **Bold** move! Pi is 3.14 and `x`.\n- a list item\nThe rest, unfinished"
    said = page.evaluate(SENTENCES, text)
    assert said == [
        [13, "Hello there."],  # once the space after it came: "3.14" or "Dr." mid-sentence is no end
        [28, "Bold move!"],
        [48, "Pi is 3.14 and x."],
        [62, "a list item"],
        [len(text), "The rest, unfinished"],  # the answer's end ends it
    ]
    assert not errors, errors


API = """async ({transcriber, speaker, chat, files}) => {
  const { Wisp } = await import("/static/openai.js");
  const wisp = new Wisp();
  const file = (f) => new File([Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0))], f.name, { type: "audio/wav" });
  const json = await wisp.audio.transcriptions.create({ file: file(files[0]), model: transcriber, language: "en", max_tokens: 10 });
  const { decodeAudio } = await import("/static/openai_audio.js");
  const stereo = Array.from(await decodeAudio(file(files[1])));  // what a transcription of it would take
  // speech beside a chat answer: the worker serves both at once, neither refused as busy
  const stream = await wisp.chat.completions.create({ model: chat, messages: [{ role: "user", content: "Read me something." }],
    max_tokens: 24, temperature: 0, stream: true });
  const during = wisp.audio.speech.create({ model: speaker, input: "ash", response_format: "pcm", max_frames: 12, seed: 5 });
  let said = "";
  for await (const chunk of stream) said += chunk.choices[0]?.delta?.content ?? "";
  const res = await during;
  const pcm = Array.from(new Uint8Array(await res.arrayBuffer()));
  const wav = await wisp.audio.speech.create({ model: speaker, input: "ash", max_frames: 4, seed: 5 });
  const head = Array.from(new Uint8Array(await wav.arrayBuffer()).slice(0, 44));
  const refusals = [];
  for (const ask of [
    () => wisp.audio.speech.create({ model: speaker, input: "ash", response_format: "mp3" }),
    () => wisp.audio.transcriptions.create({ file: file(files[0]), model: transcriber, temperature: 0.5 }),
    () => wisp.audio.transcriptions.create({ file: new File([], "empty.wav"), model: transcriber }),
    () => wisp.audio.transcriptions.create({ file: new File([new Uint8Array(64)], "noise.wav"), model: transcriber }),
    () => wisp.audio.transcriptions.create({ file: file(files[0]), model: speaker }),
  ]) {
    try { await ask(); refusals.push(null); } catch (err) { refusals.push([err.kind, err.message]); }
  }
  return { json, stereo, said, pcm, rate: res.headers.get("X-Sample-Rate"), type: res.headers.get("Content-Type"),
           head, refusals };
}"""


def answered_id(traffic, n: int) -> str:
    """The request id of the n-th chat `response` the page heard."""
    return [d["id"] for to, d in traffic if to == "page" and d.get("type") == "response"][n]


def test_openai_js_transcribes_files_and_streams_speech(session, tmp_path):
    page, traffic, errors = session
    case = WHISPER_REFERENCE["cases"]["speech_en"]  # transformers' greedy ids of the 2.5-s clip, in English
    clip16 = ROOT / WHISPER_REFERENCE["clips"]["speech"]
    t = np.arange(int(2.5 * 48000)) / 48000
    stereo = tmp_path / "stereo.wav"  # 48 kHz, two channels: the browser resamples, the page averages
    with wave.open(str(stereo), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(48000)
        left, right = (
            (0.3 * np.sin(2 * np.pi * 300 * t) * 32767).astype("<i2"),
            (0.1 * np.sin(2 * np.pi * 5000 * t) * 32767).astype("<i2"),
        )
        w.writeframes(np.stack([left, right], axis=1).tobytes())
    files = [{"name": p.name, "b64": base64.b64encode(p.read_bytes()).decode()} for p in (clip16, stereo)]
    got = page.evaluate(API, {"transcriber": TRANSCRIBER.name, "speaker": SPEAKER.name, "chat": TINY, "files": files})
    assert got["json"] == {"text": case["text"]}  # decoded (at 48 kHz) and resampled: the ids hold
    asked = next(
        d for to, d in traffic if to == "worker" and d.get("type") == "transcribe" and d["body"].get("max_tokens") == 10
    )
    pieces = [
        d for to, d in traffic if to == "page" and d.get("type") == "transcript_segment" and d["id"] == asked["id"]
    ]
    assert [(p["start"], p["end"], p["tokens"]) for p in pieces] == [(0.0, 30.0, case["segments"][0]["tokens"])]
    mono = np.array(got["stereo"])  # 2.5 s at 16 kHz: the channels' mean, resampled band-limited
    t16 = np.arange(40000) / 16000
    want = (0.3 * np.sin(2 * np.pi * 300 * t16) + 0.1 * np.sin(2 * np.pi * 5000 * t16)) / 2
    assert len(mono) == 40000 and snr_db(mono[800:-800], want[800:-800]) > 40  # the edges: the resampler's
    answered = [d["body"] for to, d in traffic if to == "page" and d.get("type") == "response"]
    assert got["said"] == answered[0]["choices"][0]["message"]["content"]  # the chat's answer as before, alone
    order = [(d["type"], d["id"]) for to, d in traffic if d.get("type") in ("speak", "response")]
    spoken = next(d["id"] for to, d in traffic if d.get("type") == "speak" and d["body"].get("max_frames") == 12)
    assert order.index(("speak", spoken)) < order.index(("response", answered_id(traffic, -1)))
    [want] = desktop_speech(["ash"], 12)
    pcm = np.frombuffer(bytes(got["pcm"]), "<i2") / 32768
    assert (got["rate"], got["type"]) == ("22050", "audio/pcm")
    assert len(pcm) == len(want) and np.abs(pcm - np.clip(want, -1, 32767 / 32768)).max() < 1e-3 + 1 / 32768
    assert bytes(got["head"][:4]) == b"RIFF" and bytes(got["head"][8:16]) == b"WAVEfmt "
    assert got["refusals"][0][0] == "request" and "wav or pcm" in got["refusals"][0][1]
    assert got["refusals"][1][0] == "request" and "temperature" in got["refusals"][1][1]
    assert got["refusals"][2] == ["request", "empty.wav is empty: there is no audio in it"]
    assert got["refusals"][3][0] == "request" and "noise.wav could not be decoded" in got["refusals"][3][1]
    assert got["refusals"][4][0] == "request" and "speech-to-text model" in got["refusals"][4][1]
    assert not errors, errors
    seen = check_protocol(traffic)
    assert {"speak", "transcribe", "speech", "speech_audio", "transcript_segment"} <= set(seen), seen


MOONSHINE_JS = """async ({model, b64}) => {
  const { Wisp } = await import("/static/openai.js");
  const file = new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], "speech.wav", { type: "audio/wav" });
  return await new Wisp().audio.transcriptions.create({ file, model, response_format: "verbose_json" });
}"""


def test_moonshine_transcribes_in_the_page(session):
    """The third family in the page: Moonshine's fixture (its raw-waveform front-end, no log-mel) gives
    transformers' greedy ids of its 2.5-s LibriVox clip, as on the desktop (test_moonshine)."""
    page, traffic, errors = session
    clip = json.loads((MOONSHINE / "reference.json").read_text())["clips"]["speech"]
    b64 = base64.b64encode((MOONSHINE / clip["file"]).read_bytes()).decode()
    got = page.evaluate(MOONSHINE_JS, {"model": MOONSHINE.name, "b64": b64})
    asked = [d["id"] for to, d in traffic if to == "worker" and d.get("type") == "transcribe"][-1]
    pieces = [d for to, d in traffic if to == "page" and d.get("type") == "transcript_segment" and d["id"] == asked]
    assert [p["tokens"] for p in pieces] == [clip["greedy"][1:]]
    assert got["text"] == clip["text"] and not errors, (got, errors)
