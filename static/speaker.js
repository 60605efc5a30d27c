// Answers read aloud: a speaker button under each answer. Pressed while the answer streams, it
// reads each sentence as soon as it is complete (the rest follows as it comes); pressed after, the
// whole answer; pressed again, or on another answer, it stops. Sentences go to the worker's speech
// model (the server's: speech_client.js speechModel) one at a time, and the PCM it streams back (chunks
// as its codec decodes frames) is played gaplessly by static/player_worklet.js in an AudioContext
// at the speech's own rate, so what reaches the output is the engine's samples.
//
// Settings (localStorage "wisp.speech", static/microphone.js): {voice, max_frames, seed} go with each
// sentence (max_frames: Wisp's bound on a sentence's codec frames; seed: the same speech each time).

import { speechSettings } from "./microphone.js";
import { speak } from "./speech_client.js";
import { announce, el } from "./ui.js";

const DEFAULT_RATE = 22050; // Kani-TTS-2's NanoCodec; another model's rate replaces the context
const SPEAKER_ICON = '<svg class="icon" aria-hidden="true" viewBox="0 0 24 24"><path d="M3 9v6h4l5 5V4L7 9zm13.5 3A4.5 4.5 0 0 0 14 8v8a4.5 4.5 0 0 0 2.5-4M14 3.2v2.1a7 7 0 0 1 0 13.4v2.1a9 9 0 0 0 0-17.6"/></svg>';
const STOP_ICON = '<svg class="icon" aria-hidden="true" viewBox="0 0 24 24"><rect x="6" y="6" width="12" height="12" rx="2"/></svg>';

/** Complete sentences of `text` from `from` on: {sentences, next} (next: where the incomplete rest
 *  starts). A sentence ends at . ! ? … (and their CJK forms) followed by a space, or a line break;
 *  final: the answer is over, its rest is a sentence too. */
export function sentencesIn(text, from = 0, final = false) {
  const sentences = [];
  const end = /[.!?…。！？]+["')\]]*(?=\s)|\n+/g;
  end.lastIndex = from;
  let start = from;
  for (let m = end.exec(text); m; m = end.exec(text)) {
    sentences.push(text.slice(start, m.index + m[0].length));
    start = m.index + m[0].length;
  }
  if (final && start < text.length) {
    sentences.push(text.slice(start));
    start = text.length;
  }
  return { sentences: sentences.map(speakable).filter((s) => /[\p{L}\p{N}]/u.test(s)), next: start };
}

/** What of a Markdown sentence is said: no code, emphasis marks, heading or list marks, link URLs. */
export function speakable(markdown) {
  return markdown
    .replace(/```[\s\S]*?(```|$)/g, " ")
    .replace(/`([^`]*)`/g, "$1")
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/^\s*(#{1,6}|[-*+]|\d+[.)])\s+/gm, "")
    .replace(/[*_~]{1,3}([^*_~]+)[*_~]{1,3}/g, "$1")
    .replace(/\s+/g, " ")
    .trim();
}

/** PCM chunks out of the speakers, back to back (player_worklet.js), at `rate`. */
export class Player {
  constructor(rate = DEFAULT_RATE) {
    this.context = new AudioContext({ sampleRate: rate, latencyHint: "playback" });
    this.node = null;
    this.ready = this.context.audioWorklet.addModule("/static/player_worklet.js").then(() => {
      this.node = new AudioWorkletNode(this.context, "wisp-player", { outputChannelCount: [1] });
      this.node.connect(this.context.destination);
    });
    this.resumed = this.context.resume(); // in the click's gesture
    this.ended = new Promise((resolve) => { this._ended = resolve; });
    this.ready.then(() => {
      this.node.port.onmessage = (ev) => {
        if (ev.data.type === "ended") this._ended(ev.data);
      };
    });
  }

  get rate() { return this.context.sampleRate; }

  async push(pcm) {
    await this.ready;
    this.node.port.postMessage({ type: "pcm", pcm }, [pcm.buffer]);
  }

  async end() {
    await this.ready;
    this.node.port.postMessage({ type: "end" });
  }

  async stop() {
    await this.ready.catch(() => {});
    this.node?.port.postMessage({ type: "stop" });
    this._ended({ stopped: true });
    await this.context.close().catch(() => {});
  }
}

let deps = null;
let reading = null; // the Reading under way

/** { client: () => the page's WispClient, speaker: () => model | null, showError(kind, message) }. */
export function initSpeaker(options) {
  deps = options;
}

/** Stop the answer being read, if any (a new chat). */
export function stopReading() {
  reading?.stop();
}

/** An answer's view (messages.js addAssistantMessage) with a speaker button: its text followed as
 *  it streams (setText), so a reading started early keeps up with it. */
export function withSpeaker(view) {
  if (!deps?.speaker()) return view;
  const answer = { text: "", final: false, reading: null };
  const button = el("button", "icon-button speak", "");
  button.type = "button";
  button.dataset.testid = "speak-button";
  button.addEventListener("click", () => {
    if (answer.reading) answer.reading.stop();
    else new Reading(answer, button).start();
  });
  view.article.querySelector(".msg-foot").prepend(button);
  showButton(button, false);
  const follow = (text, final) => {
    answer.text = text;
    answer.final = final;
    answer.reading?.more();
  };
  return {
    ...view,
    setText(text) { view.setText(text); follow(text, false); },
    finish(statsText, title, fullText) { view.finish(statsText, title, fullText); follow(fullText, true); },
    fail(message, partial) { view.fail(message, partial); follow(partial, true); },
  };
}

function showButton(button, active) {
  button.innerHTML = active ? STOP_ICON : SPEAKER_ICON;
  button.classList.toggle("is-active", active);
  const label = active ? "Stop reading aloud" : "Read the answer aloud";
  button.setAttribute("aria-label", label);
  button.title = label;
}

/** One answer being read: its sentences queued as they complete, spoken one at a time. */
class Reading {
  constructor(answer, button) {
    this.answer = answer;
    this.button = button;
    this.next = 0; // where the answer's unread text starts
    this.queue = [];
    this.player = new Player(deps.speakerRate ?? DEFAULT_RATE);
    this.current = null; // the worker's speak under way
    this.stopped = false;
    this.running = false;
  }

  start() {
    if (reading) reading.stop();
    reading = this;
    this.answer.reading = this;
    showButton(this.button, true);
    announce("Reading the answer aloud.");
    this.more();
  }

  /** The answer grew (or ended): its new complete sentences join the queue. */
  more() {
    if (this.stopped) return;
    const { sentences, next } = sentencesIn(this.answer.text, this.next, this.answer.final);
    this.next = next;
    this.queue.push(...sentences);
    if (!this.running) this.run();
  }

  async run() {
    this.running = true;
    const { voice = null, max_frames: maxFrames = null, seed = null } = speechSettings();
    try {
      while (!this.stopped && this.queue.length) {
        const sentence = this.queue.shift();
        this.current = speak(deps.client(), deps.speaker(), { input: sentence, voice, max_frames: maxFrames, seed }, {
          float32: true, onAudio: (pcm, rate) => this.play(pcm, rate),
        });
        await this.current.done;
        this.current = null;
      }
    } catch (err) {
      if (!this.stopped) deps.showError("speech", `Reading aloud failed: ${err.message}`);
      this.stop();
      return;
    } finally {
      this.running = false;
    }
    if (this.stopped || !this.answer.final || this.next < this.answer.text.length) return;
    await this.player.end(); // the whole answer is queued: done once it has played
    await this.player.ended;
    this.player.stop(); // its audio context closed
    this.finish();
  }

  play(pcm, rate) {
    if (this.stopped) return;
    if (rate !== this.player.rate) { // another model's rate: a context at that rate from here on
      deps.speakerRate = rate;
      this.player.stop();
      this.player = new Player(rate);
    }
    this.player.push(pcm);
  }

  stop() {
    if (this.stopped) return;
    this.stopped = true;
    this.current?.cancel();
    this.player.stop();
    this.finish();
  }

  finish() {
    this.stopped = true;
    if (reading === this) reading = null;
    this.answer.reading = null;
    showButton(this.button, false);
  }
}
