// The microphone's AudioWorklet (static/microphone.js adds it): the capture, whatever the context's
// rate, mixed down to mono and resampled to 16 kHz float32 (what the speech models take), sent to
// the page in chunks of 50 ms with their level (RMS and peak) for the meter and the end detection.
//
// The resampler is a band-limited one, not sample dropping: a Kaiser-windowed sinc low-pass (80 dB
// stopband, cut at 94% of the lower rate's Nyquist) evaluated in polyphase form for the rational
// ratio 16000/rate (44.1 kHz: 160 phases, a new output every 441/160 inputs; 48 kHz: 1 phase, every
// 3rd). Each output sample is centred on its input time (the filter's future taps are waited for),
// so output n is the input at n * rate / 16000; a flush pads the tail with zeros.
//
// Messages to the processor: "flush" (send what is left, then stop). From it: {pcm: Float32Array,
// rms, peak, last} (rms and peak of that chunk; last: after a flush).
//
// Resampler is exported for the tests; a worklet's global scope has no `export` consumer, and the
// page's main thread has no registerProcessor, hence the guard at the bottom.

export const CAPTURE_RATE = 16000;
const STOPBAND_DB = 80;
const CUTOFF = 0.94; // of the lower rate's Nyquist frequency
const TRANSITION_HZ = 900; // from the cut-off to the full stopband attenuation, each side
const MAX_PHASES = 1024; // an odd rate (a ratio of more phases) is approximated to this many
const CHUNK = 800; // 50 ms at 16 kHz

function gcd(a, b) {
  while (b) [a, b] = [b, a % b];
  return a;
}

// The modified Bessel function I0, by its power series (converges fast for the β used here).
function besselI0(x) {
  let sum = 1, term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 64 && term > sum * 1e-14; k++) {
    term *= q / (k * k);
    sum += term;
  }
  return sum;
}

export class Resampler {
  constructor(inRate, outRate = CAPTURE_RATE) {
    inRate = Math.round(inRate);
    const g = gcd(inRate, outRate);
    this.phases = outRate / g; // L: output samples per M inputs
    this.step = inRate / g; // M
    if (this.phases > MAX_PHASES) { // the rate is off by under 1/(2 MAX_PHASES) of a step: inaudible
      this.step = Math.round((inRate * MAX_PHASES) / outRate);
      this.phases = MAX_PHASES;
    }
    const cutoff = (CUTOFF * 0.5 * Math.min(inRate, outRate)) / inRate; // cycles per input sample
    const transition = TRANSITION_HZ / inRate;
    const taps = Math.ceil((STOPBAND_DB - 7.95) / (2.285 * 2 * Math.PI * transition)) + 1;
    this.half = Math.ceil(taps / 2); // W: taps d = -W+1 .. W around each output's input time
    const beta = 0.1102 * (STOPBAND_DB - 8.7);
    const i0Beta = besselI0(beta);
    const width = 2 * this.half;
    this.table = new Float32Array(this.phases * width);
    for (let p = 0; p < this.phases; p++) {
      const frac = p / this.phases;
      let sum = 0;
      for (let j = 0; j < width; j++) {
        const tau = frac - (j - this.half + 1); // output time minus the tap's input time
        const u = tau / this.half;
        const window = Math.abs(u) >= 1 ? 0 : besselI0(beta * Math.sqrt(1 - u * u)) / i0Beta;
        const x = 2 * cutoff * tau;
        const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
        const h = 2 * cutoff * sinc * window;
        this.table[p * width + j] = h;
        sum += h;
      }
      for (let j = 0; j < width; j++) this.table[p * width + j] /= sum; // unity gain at DC, every phase
    }
    // The input so far from absolute index `start` (W zeros before the first sample: the past is silence)
    this.buffer = new Float32Array(4096);
    this.start = -this.half;
    this.length = this.half;
    this.base = 0; // the next output's input time: base + phase / phases
    this.phase = 0;
  }

  /** The outputs that `input` (a Float32Array at the input rate) completes, as a new Float32Array. */
  push(input) {
    this._append(input);
    const width = 2 * this.half;
    const end = this.start + this.length;
    const max = Math.max(0, Math.ceil(((end - this.half - this.base) * this.phases - this.phase) / this.step) + 1);
    const out = new Float32Array(max);
    let n = 0;
    while (this.base + this.half < end) {
      const first = this.base - this.half + 1 - this.start;
      const row = this.phase * width;
      let acc = 0;
      for (let j = 0; j < width; j++) acc += this.buffer[first + j] * this.table[row + j];
      out[n++] = acc;
      this.phase += this.step;
      this.base += Math.floor(this.phase / this.phases);
      this.phase %= this.phases;
    }
    this._drop(this.base - this.half + 1);
    return n === max ? out : out.subarray(0, n);
  }

  /** The last outputs: the input's tail filtered as if silence followed. */
  flush() {
    return this.push(new Float32Array(this.half + 1));
  }

  _append(input) {
    if (this.length + input.length > this.buffer.length) {
      const bigger = new Float32Array(2 * (this.length + input.length));
      bigger.set(this.buffer.subarray(0, this.length));
      this.buffer = bigger;
    }
    this.buffer.set(input, this.length);
    this.length += input.length;
  }

  _drop(keepFrom) {
    const drop = keepFrom - this.start;
    if (drop <= 0) return;
    this.buffer.copyWithin(0, drop, this.length);
    this.length -= drop;
    this.start = keepFrom;
  }
}

if (typeof registerProcessor === "function") {
  class CaptureProcessor extends AudioWorkletProcessor {
    constructor(options) {
      super();
      this.resampler = new Resampler(sampleRate, options?.processorOptions?.rate ?? CAPTURE_RATE);
      this.mono = new Float32Array(128);
      this.chunk = new Float32Array(CHUNK);
      this.fill = 0;
      this.done = false;
      this.port.onmessage = (ev) => {
        if (ev.data !== "flush" || this.done) return;
        this.take(this.resampler.flush());
        this.send(true);
        this.done = true;
      };
    }

    process(inputs) {
      if (this.done) return false;
      const channels = inputs[0] || [];
      const frames = channels[0]?.length ?? 128; // no input connected (yet): silence, time goes on
      if (this.mono.length !== frames) this.mono = new Float32Array(frames);
      this.mono.fill(0);
      for (const channel of channels) {
        for (let i = 0; i < frames; i++) this.mono[i] += channel[i] / channels.length;
      }
      this.take(this.resampler.push(this.mono));
      return true;
    }

    take(samples) {
      let at = 0;
      while (at < samples.length) {
        const n = Math.min(CHUNK - this.fill, samples.length - at);
        this.chunk.set(samples.subarray(at, at + n), this.fill);
        this.fill += n;
        at += n;
        if (this.fill === CHUNK) this.send(false);
      }
    }

    send(last) {
      const pcm = this.chunk.slice(0, this.fill);
      let sum = 0, peak = 0;
      for (const v of pcm) {
        sum += v * v;
        peak = Math.max(peak, Math.abs(v));
      }
      const rms = pcm.length ? Math.sqrt(sum / pcm.length) : 0;
      this.port.postMessage({ pcm, rms, peak, last }, [pcm.buffer]);
      this.fill = 0;
    }
  }
  registerProcessor("wisp-capture", CaptureProcessor);
}
