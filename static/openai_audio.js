// wisp.audio (static/openai.js): OpenAI's audio endpoints over the page's worker, in the shapes of
// OpenAI's JS SDK: transcriptions.create resolves with the transcript (an object for json /
// verbose_json, a string for text / srt / vtt) and speech.create with a fetch Response whose body
// streams the audio as the model makes it (wav: a stream's header, sizes unknown, then PCM16; pcm:
// the bare PCM16), its rate in the X-Sample-Rate header, as the desktop's /v1/audio/speech sends it.
// The worker checks both bodies with the desktop's Python (py_engine/audio/requests.py).
//
// A file to transcribe is decoded by the browser's own decoder: decodeAudioData in an
// OfflineAudioContext at 48 kHz (a file of another rate is converted by the browser; its resampler
// is weaker near the new Nyquist, but that band goes below), the channels averaged into one (a
// surround file too: Web Audio's down-mix drops the channels of layouts it does not know), then the
// microphone's band-limited resampler (capture_worklet.js) takes it to 16 kHz: an ideal resample's
// samples to 90 dB, where decoding straight at 16 kHz gave 35 dB. A WAV file is decoded at its own
// rate (its header says it), so a 16 kHz recording reaches the model sample for sample, as on the
// desktop: Moonshine's raw-waveform front-end turned a close token otherwise.

import { WispError } from "./client.js";
import { CAPTURE_RATE, Resampler } from "./capture_worklet.js";
import { speak, speechModel, transcribe } from "./speech_client.js";

const DECODE_RATE = 48000;

/** A file's samples as 16 kHz mono: a File or Blob, a fetch Response, an ArrayBuffer or bytes. */
export async function decodeAudio(file) {
  const name = file?.name ?? "the file";
  let bytes;
  if (typeof Blob !== "undefined" && file instanceof Blob) bytes = await file.arrayBuffer();
  else if (typeof Response !== "undefined" && file instanceof Response) bytes = await file.arrayBuffer();
  else if (file instanceof ArrayBuffer) bytes = file.slice(0);
  else if (ArrayBuffer.isView(file)) bytes = file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength);
  else throw new WispError("request", "'file' is required: the audio (a File, Blob, Response or bytes)");
  if (!bytes.byteLength) throw new WispError("request", `${name} is empty: there is no audio in it`);
  const rate = wavRate(bytes) ?? DECODE_RATE;
  let decoded;
  try {
    decoded = await new OfflineAudioContext(1, 1, rate).decodeAudioData(bytes);
  } catch (err) {
    throw new WispError("request", `${name} could not be decoded as audio by this browser (${err.message || err.name})`);
  }
  const mono = new Float32Array(decoded.length);
  for (let c = 0; c < decoded.numberOfChannels; c++) {
    const channel = decoded.getChannelData(c);
    for (let i = 0; i < mono.length; i++) mono[i] += channel[i] / decoded.numberOfChannels;
  }
  if (rate === CAPTURE_RATE) return mono;
  const resampler = new Resampler(rate, CAPTURE_RATE);
  const head = resampler.push(mono), tail = resampler.flush();
  const out = new Float32Array(Math.round((mono.length * CAPTURE_RATE) / rate));
  out.set(head.subarray(0, out.length));
  if (head.length < out.length) out.set(tail.subarray(0, out.length - head.length), head.length);
  return out;
}

/** A RIFF/WAVE file's sample rate from its fmt chunk (one Web Audio accepts), else null. */
function wavRate(bytes) {
  const view = new DataView(bytes);
  const tag = (at) => String.fromCharCode(...new Uint8Array(bytes, at, 4));
  if (bytes.byteLength < 12 || tag(0) !== "RIFF" || tag(8) !== "WAVE") return null;
  for (let at = 12; at + 8 <= bytes.byteLength; at += 8 + view.getUint32(at + 4, true) + (view.getUint32(at + 4, true) & 1)) {
    if (tag(at) !== "fmt ") continue;
    if (at + 16 > bytes.byteLength) return null;
    const rate = view.getUint32(at + 12, true);
    return rate >= 8000 && rate <= 384000 ? rate : null;
  }
  return null;
}

async function modelFor(wisp, id, task) {
  const models = await wisp._list();
  const model = models.find((m) => m.id === id);
  if (!id || !model || model.task !== task) {
    const served = speechModel(models, task);
    const what = task === "transcription" ? "speech-to-text" : "text-to-speech";
    throw new WispError("request", `'model' must be a ${what} model served here${served ? ` (e.g. '${served.id}')` : ": there is none"}`);
  }
  return model;
}

/** wisp.audio.transcriptions.create({file, model, language, prompt, response_format, temperature,
 *  timestamp_granularities, max_tokens (Wisp's)}): OpenAI's transcription (the json, text, srt, vtt or
 *  verbose_json body); translations.create (no language): the same in English (Whisper's task). */
export async function createTranscription(wisp, { file, ...body } = {}, task = "transcribe") {
  const model = await modelFor(wisp, body.model, "transcription");
  const pcm = await decodeAudio(file);
  const done = await transcribe(wisp.client, model, pcm, body, { task });
  return done.body;
}

/** wisp.audio.speech.create({model, input, voice, response_format; Wisp's max_frames, temperature,
 *  top_p, repetition_penalty, seed}): a Response streaming the audio. */
export async function createSpeech(wisp, body = {}) {
  const model = await modelFor(wisp, body.model, "speech");
  let controller = null;
  let speech = null;
  const stream = new ReadableStream({
    start: (c) => { controller = c; },
    cancel: () => speech?.cancel(),
  });
  return new Promise((resolve, reject) => {
    let answered = false;
    const answer = (rate) => {  // once: the stream is the body of one Response
      if (answered) return;
      answered = true;
      resolve(new Response(stream, { headers: {
        "Content-Type": body.response_format === "pcm" ? "audio/pcm" : "audio/wav", "X-Sample-Rate": String(rate) } }));
    };
    speech = speak(wisp.client, model, body, {
      onAudio: (bytes, rate) => {  // the first chunk: the Response (its headers), as an HTTP answer's
        answer(rate);
        controller.enqueue(bytes);
      },
    });
    speech.done.then((done) => {
      answer(done.sample_rate);
      controller.close();
    }, (err) => {
      reject(err);  // before any audio: the request fails, as the desktop's with its status
      controller.error(err);
    });
  });
}
