// Hands-free listening's end detection (static/microphone.js): has the user spoken, and stopped?
// Energy-based, on 20 ms frames of the 16 kHz capture: a frame is speech when its level (dBFS)
// is above both a fixed threshold and the noise floor plus a margin (the floor follows the quietest
// frames at once and rises slowly: a noisy room raises the bar). Speech starts after `onsetMs` of speech
// frames in a row (a click or a cough is not an utterance), and ends after `hangoverMs` of
// non-speech frames in a row (the pauses inside a sentence are shorter). All of it counts samples,
// never the clock, so the same audio always ends at the same sample.
//
//   const detector = new EndDetector({ hangoverMs: 1200 });
//   for (const chunk of chunks) { const state = detector.push(chunk); if (state === "end") break; }
//   detector.speechStart, detector.speechEnd   // sample indices of the utterance (preroll not included)

export const VAD_DEFAULTS = {
  rate: 16000,
  frameMs: 20,
  thresholdDb: -50, // a frame quieter than this is never speech
  marginDb: 12, // above the noise floor
  floorRiseDbPerS: 3, // how fast the floor forgets a quiet moment
  onsetMs: 100,
  hangoverMs: 900,
  idleMs: 8000, // no speech at all this long: "idle" (the page stops listening)
  maxMs: 30000, // one utterance at most this long (Whisper's window): "end"
};

export function levelDb(samples, from = 0, to = samples.length) {
  let sum = 0;
  for (let i = from; i < to; i++) sum += samples[i] * samples[i];
  return 10 * Math.log10(sum / Math.max(1, to - from) + 1e-12);
}

export class EndDetector {
  constructor(options = {}) {
    this.options = { ...VAD_DEFAULTS, ...options };
    const o = this.options;
    this.frame = Math.round((o.rate * o.frameMs) / 1000);
    this.pending = new Float32Array(this.frame);
    this.fill = 0;
    this.samples = 0; // frames' samples seen
    this.floor = this.options.thresholdDb - this.options.marginDb; // a quiet room's, until the frames say otherwise
    this.run = 0; // speech frames in a row (before the start) / quiet frames in a row (after it)
    this.speechStart = null;
    this.speechEnd = null; // the end of the last speech frame
    this.state = "waiting"; // waiting | speech | end | idle
  }

  /** Feed 16 kHz samples; returns the state after them: "waiting" (no speech yet), "speech",
   *  "end" (speech then `hangoverMs` of quiet, or `maxMs` of speech) or "idle" (none in `idleMs`). */
  push(samples) {
    let at = 0;
    while (at < samples.length && (this.state === "waiting" || this.state === "speech")) {
      const n = Math.min(this.frame - this.fill, samples.length - at);
      this.pending.set(samples.subarray(at, at + n), this.fill);
      this.fill += n;
      at += n;
      if (this.fill === this.frame) {
        this.fill = 0;
        this._frame(levelDb(this.pending));
      }
    }
    return this.state;
  }

  _frame(db) {
    const o = this.options;
    const frameS = this.frame / o.rate;
    this.floor = Math.min(db, this.floor + o.floorRiseDbPerS * frameS);
    const speech = db > o.thresholdDb && db > this.floor + o.marginDb;
    this.samples += this.frame;
    const ms = (frames) => frames * o.frameMs;
    if (this.state === "waiting") {
      this.run = speech ? this.run + 1 : 0;
      if (ms(this.run) >= o.onsetMs) {
        this.state = "speech";
        this.speechStart = this.samples - this.run * this.frame;
        this.speechEnd = this.samples;
        this.run = 0;
      } else if ((this.samples / o.rate) * 1000 >= o.idleMs) {
        this.state = "idle";
      }
      return;
    }
    if (speech) {
      this.run = 0;
      this.speechEnd = this.samples;
    } else {
      this.run += 1;
    }
    if (ms(this.run) >= o.hangoverMs || ((this.samples - this.speechStart) / o.rate) * 1000 >= o.maxMs) {
      this.state = "end";
    }
  }
}
