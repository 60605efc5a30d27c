// The speaker's AudioWorklet (static/speaker.js adds it): PCM chunks played back to back, gapless,
// as the worker's speech model decodes them. Its context runs at the speech's own rate (22,050 Hz
// for Kani-TTS-2's codec), so the samples reach the output as the engine made them.
//
// Playback starts once `prebuffer` samples are queued (or the speech has ended): a model slower
// than real time then stops in longer, rarer pauses instead of stuttering; an underrun (the queue
// ran dry before the end) waits for the prebuffer again.
//
// Messages to it: {type: "pcm", pcm: Float32Array}, {type: "end"} (no more will come), {type:
// "stop"} (silence now, for good). From it: {type: "progress", played, underruns} every ~100 ms
// and {type: "ended", played, underruns} once the last queued sample has played.

class PlayerProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.prebuffer = options?.processorOptions?.prebuffer ?? Math.round(sampleRate * 0.25);
    this.queue = [];
    this.offset = 0; // samples of queue[0] already played
    this.queued = 0;
    this.playing = false;
    this.ended = false;
    this.stopped = false;
    this.played = 0;
    this.underruns = 0;
    this.sinceReport = 0;
    this.port.onmessage = (ev) => {
      const msg = ev.data;
      if (msg.type === "pcm" && !this.ended) {
        this.queue.push(msg.pcm);
        this.queued += msg.pcm.length;
      } else if (msg.type === "end") {
        this.ended = true;
      } else if (msg.type === "stop") {
        this.stopped = true;
      }
    };
  }

  process(_inputs, outputs) {
    if (this.stopped) return false;
    const channels = outputs[0];
    const out = channels[0];
    if (!this.playing && this.queued > 0 && (this.queued >= this.prebuffer || this.ended)) this.playing = true;
    if (this.ended && this.queued === 0 && !this.playing) { // nothing (more) to play
      this.port.postMessage({ type: "ended", played: this.played, underruns: this.underruns });
      return false;
    }
    let i = 0;
    while (this.playing && i < out.length && this.queue.length) {
      const chunk = this.queue[0];
      const n = Math.min(out.length - i, chunk.length - this.offset);
      out.set(chunk.subarray(this.offset, this.offset + n), i);
      i += n;
      this.offset += n;
      this.queued -= n;
      if (this.offset === chunk.length) {
        this.queue.shift();
        this.offset = 0;
      }
    }
    this.played += i;
    for (let c = 1; c < channels.length; c++) channels[c].set(out);
    if (this.playing && i < out.length) { // the queue ran dry within this quantum
      if (this.ended) {
        this.port.postMessage({ type: "ended", played: this.played, underruns: this.underruns });
        return false;
      }
      this.underruns += 1; // mid-speech: wait for the prebuffer again
      this.playing = false;
    }
    this.sinceReport += out.length;
    if (this.sinceReport >= sampleRate / 10) {
      this.sinceReport = 0;
      this.port.postMessage({ type: "progress", played: this.played, underruns: this.underruns });
    }
    return true;
  }
}

registerProcessor("wisp-player", PlayerProcessor);
