"""What test_browser_speech.py plays and hears: the clip Chromium's fake microphone plays, an ideal
band-limited resample to hold a resampler to, the SNR of a recording against a looped clip whatever
its offset, and a recorder of what each AudioContext sends to the speakers."""

import wave

import numpy as np

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


# What reaches the speakers: every node connected to an AudioContext's destination is connected, at
# the same moment, to a recorder worklet beside it (the connection to the destination waits for the
# recorder's module), so each context's output is recorded sample for sample from its first one.
OUTPUT_TAP = """(() => {
  const RECORDER = `registerProcessor("wisp-test-tap", class extends AudioWorkletProcessor {
    process(inputs) { this.port.postMessage((inputs[0] && inputs[0][0]) ? inputs[0][0].slice() : new Float32Array(128)); return true; }
  });`;
  const url = URL.createObjectURL(new Blob([RECORDER], { type: "text/javascript" }));
  const connect = AudioNode.prototype.connect;
  self.__wispTaps = [];
  AudioNode.prototype.connect = function (target, ...rest) {
    if (!(target instanceof AudioDestinationNode)) return connect.call(this, target, ...rest);
    const ctx = this.context;
    ctx.__tap ??= ctx.audioWorklet.addModule(url).then(() => {
      const tap = new AudioWorkletNode(ctx, "wisp-test-tap");
      const record = { rate: ctx.sampleRate, chunks: [] };
      self.__wispTaps.push(record);
      tap.port.onmessage = (ev) => record.chunks.push(ev.data);
      connect.call(tap, target);
      return tap;
    });
    ctx.__tap.then((tap) => { connect.call(this, target, ...rest); connect.call(this, tap); });
    return target;
  };
})();"""


TAPPED = """async ({rate, nonzero}) => {  // the output of the context at `rate`, once `nonzero` samples came
  const record = () => self.__wispTaps.find((t) => t.rate === rate);
  const count = () => (record()?.chunks ?? []).reduce((n, c) => n + c.filter((v) => v !== 0).length, 0);
  while (count() < nonzero) await new Promise((r) => setTimeout(r, 20));
  return record().chunks.flatMap((c) => Array.from(c));
}"""
