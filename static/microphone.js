// The microphone: what the user says, transcribed into the message box.
//
// Microphone.record() opens the capture (getUserMedia, no echo cancellation, noise suppression or
// gain control: the speech models were trained on plain recordings) into static/capture_worklet.js,
// which hands back 16 kHz mono float32 in 50 ms chunks with their level. Two ways to talk:
//   push to talk   hold the microphone button; letting go ends the recording;
//   hands-free     tap it (a press shorter than TAP_MS, or Enter / Space): it listens until you
//                  have spoken and stopped (static/vad.js: energy with a hangover), or a second tap.
// A hands-free recording keeps PREROLL_MS before the speech and TAIL_MS after it. The level meter
// beside the button follows each chunk. The recording goes to the worker's transcriber (the
// server's transcription model: speech_client.js speechModel) and its text into the message box, at the
// cursor.
//
// Settings (localStorage "wisp.speech", JSON; all optional): {language: "en" (default: the model
// detects it), max_tokens (the most tokens of a transcript), vad: {thresholdDb, marginDb, onsetMs,
// hangoverMs, idleMs, maxMs} (vad.js's)}.

import { CAPTURE_RATE } from "./capture_worklet.js";
import { loadSpeech, transcribe as transcribeSpeech } from "./speech_client.js";
import { announce } from "./ui.js";
import { EndDetector } from "./vad.js";

const TAP_MS = 250;
const PREROLL_MS = 300;
const TAIL_MS = 300;
const CONSTRAINTS = { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false };
const METER_FLOOR_DB = -60;

export function speechSettings() {
  try {
    return JSON.parse(localStorage.getItem("wisp.speech") || "{}") || {};
  } catch {
    return {};
  }
}

/** One recording: done resolves with {pcm (16 kHz Float32Array), reason: "stop" | "end" | "idle"}. */
class Recording {
  constructor(node, stream, context, { handsFree, vad, onLevel, onSpeech }) {
    this.node = node;
    this.stream = stream;
    this.context = context;
    this.handsFree = handsFree;
    this.detector = new EndDetector(vad);
    this.onLevel = onLevel;
    this.onSpeech = onSpeech;
    this.chunks = [];
    this.reason = null;
    this.done = new Promise((resolve) => { this._resolve = resolve; });
    node.port.onmessage = (ev) => this._chunk(ev.data);
  }

  /** Hands-free from now on (a tap): the end detection, fed from the start, may end it at once. */
  listen() {
    this.handsFree = true;
    this._decide(this.detector.state);
  }

  stop(reason = "stop") {
    if (this.reason) return;
    this.reason = reason;
    this.node.port.postMessage("flush");
  }

  _chunk({ pcm, rms, last }) {
    this.chunks.push(pcm);
    const db = 20 * Math.log10(rms + 1e-9);
    if (this.onLevel) this.onLevel(db);
    const before = this.detector.state;
    const state = this.detector.push(pcm);
    if (state === "speech" && before !== "speech" && this.onSpeech) this.onSpeech();
    if (this.handsFree) this._decide(state);
    if (last) this._finish();
  }

  _decide(state) {
    if (state === "end" || state === "idle") this.stop(state);
  }

  _finish() {
    this.node.port.onmessage = null;
    this.node.disconnect();
    for (const track of this.stream.getTracks()) track.stop(); // the browser's recording indicator goes off
    this.context.suspend().catch(() => {}); // its audio thread idles until the next recording
    const total = this.chunks.reduce((n, c) => n + c.length, 0);
    let from = 0, to = total;
    const { speechStart, speechEnd } = this.detector;
    if (this.reason !== "stop" && speechStart !== null) { // hands-free: the utterance, a little around it
      from = Math.max(0, speechStart - (PREROLL_MS * CAPTURE_RATE) / 1000);
      to = Math.min(total, speechEnd + (TAIL_MS * CAPTURE_RATE) / 1000);
    }
    const pcm = new Float32Array(to - from);
    let at = 0;
    for (const chunk of this.chunks) {
      const lo = Math.max(from - at, 0), hi = Math.min(to - at, chunk.length);
      if (hi > lo) pcm.set(chunk.subarray(lo, hi), at + lo - from);
      at += chunk.length;
    }
    this._resolve({ pcm, reason: this.reason, speech: speechStart !== null });
  }
}

export class Microphone {
  constructor() {
    this.context = null;
    this.ready = null;
  }

  /** Start recording (call it in the user's gesture: the audio context starts there). */
  async record({ handsFree = false, vad = {}, onLevel = null, onSpeech = null } = {}) {
    if (!this.context) {
      this.context = new AudioContext();
      this.ready = this.context.audioWorklet.addModule("/static/capture_worklet.js");
    }
    const resumed = this.context.resume();
    if (!navigator.mediaDevices?.getUserMedia) throw new Error("This browser offers no microphone to this page.");
    const stream = await navigator.mediaDevices.getUserMedia({ audio: CONSTRAINTS });
    try {
      await Promise.all([this.ready, resumed]);
      const source = this.context.createMediaStreamSource(stream);
      const node = new AudioWorkletNode(this.context, "wisp-capture", { processorOptions: { rate: CAPTURE_RATE } });
      source.connect(node);
      node.connect(this.context.destination); // silent: pulled along by the destination
      return new Recording(node, stream, this.context, { handsFree, vad, onLevel, onSpeech });
    } catch (err) {
      for (const track of stream.getTracks()) track.stop();
      throw err;
    }
  }
}

// ---------- the button and the meter ----------

const ui = {};
let deps = null;
let recording = null; // the Recording under way, or the promise of one
let pressedAt = null;

/** The microphone button in the composer: { client: () => the page's WispClient, transcriber: () =>
 *  model | null, prompt (the textarea), showError(kind, message) }. The button shows once a transcription model is served. */
export function initMicrophone(options) {
  deps = { ...options, microphone: new Microphone() };
  ui.button = document.getElementById("mic-button");
  ui.meter = document.getElementById("mic-level");
  ui.fill = ui.meter.querySelector(".mic-level-fill");
  ui.button.addEventListener("pointerdown", (ev) => {
    if (ev.button !== 0) return;
    ev.preventDefault(); // the textarea keeps the focus
    ui.button.setPointerCapture(ev.pointerId); // letting go off the button still ends push to talk
    press();
  });
  ui.button.addEventListener("pointerup", () => release());
  ui.button.addEventListener("pointercancel", () => release());
  ui.button.addEventListener("click", (ev) => { // keyboard (no pointer): a tap
    if (ev.detail !== 0) return;
    press();
    release(0);
  });
  renderMicrophone();
}

/** The button shows when the server has a transcription model (and WebGPU is here to run it). */
export function renderMicrophone() {
  if (!ui.button) return;
  ui.button.hidden = !deps.transcriber();
}

function setState(state) {
  ui.button.dataset.state = state; // idle | listening | hearing | transcribing
  ui.button.setAttribute("aria-pressed", String(state === "listening" || state === "hearing"));
  ui.meter.hidden = !(state === "listening" || state === "hearing");
  const labels = { idle: "Speak (hold to talk, tap for hands-free)", listening: "Listening… (tap to stop)",
    hearing: "Hearing you… (tap to stop)", transcribing: "Transcribing…" };
  ui.button.title = labels[state];
  ui.button.setAttribute("aria-label", labels[state]);
}

function showLevel(db) {
  const share = Math.max(0, Math.min(1, (db - METER_FLOOR_DB) / -METER_FLOOR_DB));
  ui.fill.style.transform = `scaleX(${share.toFixed(3)})`;
  ui.meter.dataset.db = db.toFixed(1);
  ui.meter.setAttribute("aria-valuenow", String(Math.round(share * 100)));
}

function press() {
  const state = ui.button.dataset.state;
  if (state === "transcribing") return;
  if (recording) { // a tap while listening hands-free: stop now
    Promise.resolve(recording).then((r) => r?.stop());
    return;
  }
  pressedAt = performance.now();
  preload();
  const { vad = {} } = speechSettings();
  setState("listening");
  recording = deps.microphone.record({
    vad, onLevel: showLevel, onSpeech: () => setState("hearing"),
  }).then((r) => {
    recording = r;
    r.done.then(transcribe);
    return r;
  }, (err) => {
    recording = null;
    setState("idle");
    deps.showError("speech", `The microphone could not start: ${err.message || err}`);
    return null;
  });
}

// The transcription model's first load starts with the first recording, so it is (nearly) there
// when the recording ends; its error, if any, is the transcription's to tell.
let preloading = false;
function preload() {
  if (preloading) return;
  preloading = true;
  loadSpeech(deps.client(), deps.transcriber(), "transcription").catch(() => { preloading = false; });
}

function release(heldMs = performance.now() - pressedAt) {
  if (pressedAt === null) return;
  pressedAt = null;
  Promise.resolve(recording).then((r) => {
    if (!r) return;
    if (heldMs < TAP_MS) r.listen(); // a tap: hands-free, until the speech ends
    else r.stop(); // push to talk: letting go ends it
  });
}

async function transcribe({ pcm, reason }) {
  recording = null;
  showLevel(METER_FLOOR_DB);
  if (reason === "idle" || pcm.length === 0) {
    setState("idle");
    announce("No speech heard.");
    return;
  }
  setState("transcribing");
  try {
    const { language = null, max_tokens: maxTokens = null } = speechSettings();
    const done = await transcribeSpeech(deps.client(), deps.transcriber(), pcm, { language, max_tokens: maxTokens });
    insertText(done.text.trim());
  } catch (err) {
    deps.showError("speech", `Transcription failed: ${err.message}`);
  } finally {
    setState("idle");
  }
}

/** The transcript at the cursor (a space between it and the words around it). */
function insertText(text) {
  if (!text) {
    announce("No words recognised.");
    return;
  }
  const box = deps.prompt;
  const { selectionStart: start, selectionEnd: end, value } = box;
  const before = value.slice(0, start), after = value.slice(end);
  const piece = (before && !/\s$/.test(before) ? " " : "") + text + (after && !/^\s/.test(after) ? " " : "");
  box.value = before + piece + after;
  box.selectionStart = box.selectionEnd = before.length + piece.length;
  box.dispatchEvent(new Event("input", { bubbles: true })); // the page resizes it and enables Send
  box.focus();
  announce("Transcribed into the message box.");
}
