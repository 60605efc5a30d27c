"""Speech in the page, in headless Chromium: the microphone and the speaker (issue 32).

Chromium's fake capture device plays a synthetic clip (0.6 s of silence, 1.4 s of a voiced sound,
2 s of silence, looped) into getUserMedia. One browser session for the module:
- the capture worklet (static/capture_worklet.js) alone, in an OfflineAudioContext at 44.1 and 48
  kHz: its 16 kHz output equals an ideal band-limited resample of the same signal (numpy's FFT) to
  60 dB, and the tones above 8 kHz that sample dropping would fold into the band are gone;
- push to talk: the microphone button held through a sound, a silence longer than the hands-free
  hangover and the next sound (the level meter says each), then let go: the recording sent to the
  worker holds both sounds and follows the clip (aligned to the ideal resample, 30 dB);
- hands-free: a tap, and the recording ends by itself after the sound (static/vad.js), trimmed to it.
Screenshots in tests/artifacts/speech-*.png."""

import wave

import numpy as np
import pytest
from browser_harness import CHROMIUM, FLAGS, ROOT, app_server, check_protocol, record_protocol

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.browser, pytest.mark.slow]
expect = playwright_api.expect

ARTIFACTS = ROOT / "tests" / "artifacts"
TRANSCRIBER = ROOT / "tests" / "fixtures" / "moonshine-f32"
CLIP_RATE = 44100
SILENCE, SOUND, PAUSE = 0.6, 1.4, 2.0  # seconds: the clip's parts (it loops)
PERIOD = SILENCE + SOUND + PAUSE


def voiced(seconds: float, rate: int) -> np.ndarray:
    """A vowel-like sound: harmonics of a gliding 140 Hz pitch under two formants, syllables at 4 Hz."""
    t = np.arange(int(seconds * rate)) / rate
    phase = 2 * np.pi * np.cumsum(140 + 20 * np.sin(2 * np.pi * 0.7 * t)) / rate
    harmonics = sum(np.sin(k * phase) / k * (1.6 if k in (5, 6, 17) else 1) for k in range(1, 30))
    envelope = (0.55 + 0.45 * np.sin(2 * np.pi * 4 * t - np.pi / 2)) * np.minimum(1, np.minimum(t, t[::-1]) / 0.02)
    return 0.12 * harmonics * envelope


def clip() -> np.ndarray:
    """One period of what the fake microphone plays."""
    quiet = lambda s: np.zeros(int(s * CLIP_RATE))  # noqa: E731
    return np.concatenate([quiet(SILENCE), voiced(SOUND, CLIP_RATE), quiet(PAUSE)])


def write_wav(path, samples: np.ndarray, rate: int):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes((np.clip(samples, -1, 1) * 32767).round().astype("<i2").tobytes())


def ideal_resample(samples: np.ndarray, rate: int, out_rate: int = 16000, periodic: bool = False) -> np.ndarray:
    """The band-limited resample: the spectrum cut at 8 kHz (the new Nyquist), then sampled at 16 kHz."""
    n = len(samples)
    m = round(n * out_rate / rate)
    size = n if periodic else 2 * n  # zero-padded: no wrap-around for a one-off signal
    spectrum = np.fft.rfft(samples, size)
    spectrum[np.fft.rfftfreq(size, 1 / rate) >= out_rate / 2] = 0
    out_size = m if periodic else 2 * m
    cut = np.zeros(out_size // 2 + 1, complex)
    cut[: min(len(cut), len(spectrum))] = spectrum[: len(cut)]
    return np.fft.irfft(cut, out_size)[:m] * out_size / size


def snr_db(signal: np.ndarray, reference: np.ndarray) -> float:
    return 10 * np.log10(np.sum(reference**2) / np.sum((signal - reference) ** 2))


def aligned_snr(recorded: np.ndarray, period: np.ndarray) -> float:
    """The recording against the looped clip (`period`, at 16 kHz) at the best offset, a fraction of a
    sample included (the capture starts anywhere in the loop, between two of our output samples)."""
    size = len(period)
    head = np.zeros(size)
    head[: min(size, len(recorded))] = recorded[:size]
    lag = int(np.argmax(np.fft.irfft(np.conj(np.fft.rfft(head)) * np.fft.rfft(period), size)))
    freqs = np.fft.rfftfreq(size)
    best = -np.inf
    for fraction in np.linspace(-1, 1, 41):
        shifted = np.fft.irfft(np.fft.rfft(period) * np.exp(2j * np.pi * freqs * (lag + fraction)), size)
        looped = np.resize(shifted, len(recorded))  # the loop, as long as the recording
        best = max(best, snr_db(recorded, looped))
    return best


@pytest.fixture(scope="module")
def server():
    with app_server("--no-default", "--model", str(TRANSCRIBER)) as (url, _):
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
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(server + "/")
        expect(page.get_by_test_id("mic-button")).to_be_visible(timeout=30_000)
        yield page, traffic, errors
        browser.close()


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
    speech = 0.2 * np.sin(2 * np.pi * 440 * t) + 0.1 * np.sin(2 * np.pi * 3000 * t + 1) + 0.05 * np.sin(2 * np.pi * 6500 * t)
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


def level(page) -> float:
    return float(page.get_by_test_id("mic-level").get_attribute("data-db") or -120)


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
    page.wait_for_function("() => document.querySelector('#mic-button').dataset.state !== 'listening'" " && document.querySelector('#mic-button').dataset.state !== 'hearing'")
    [sent] = transcribe_messages(traffic)
    audio = np.array(sent["audio"], dtype=np.float64)
    loud = np.abs(audio) > 0.05
    edges = np.flatnonzero(np.diff(loud.astype(int)) != 0)
    assert len(audio) > (PAUSE + 0.2) * 16000  # both sounds and the pause between them
    gaps = np.diff(np.flatnonzero(loud))
    assert gaps.max() > 0.9 * PAUSE * 16000, (len(edges), gaps.max())  # the pause, kept whole
    period = ideal_resample(clip(), CLIP_RATE, periodic=True)
    assert aligned_snr(audio, period) > 30
    assert not errors, errors


def test_hands_free_ends_by_itself_after_the_speech(session):
    page, traffic, errors = session
    button = page.get_by_test_id("mic-button")
    expect(button).to_have_attribute("data-state", "idle", timeout=120_000)  # the last one transcribed
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
    assert not errors, errors
    seen = check_protocol(traffic)
    assert seen["transcribe"] == 2
