// Speech through the page's worker (py_engine/web/speech.py; the messages and events:
// py_engine/web/protocol.py): a transcription model (Whisper, Moonshine) turns 16 kHz mono PCM into
// text, a speech model (Kani-TTS-2) text into PCM, streamed. Each model loads on its first request
// (through the weight store, onto the chat model's device, or a device of its own when no chat
// model is loaded) and stays; the worker runs one speech request at a time, beside a chat answer.
//
//   const done = await transcribe(client, model, pcm, { language: "en" });   // done.text, done.segments
//   const speech = speak(client, model, { input: "Hello there." }, { float32: true, onAudio: (pcm, rate) => ... });
//   await speech.done;  speech.cancel();

import { modelRef, pageLoadOptions } from "./client.js";

/** The server's model for a speech task ("transcription" or "speech"), or null: /api/models' `task`. */
export function speechModel(models, task) {
  return (models || []).find((m) => m.task === task) || null;
}

/** Load `model` for `task` ("transcription" or "speech") ahead of its first request: resolves with
 *  the `speech` event {model, task, sample_rate, voices, load_ms (absent: it was loaded already)}. */
export function loadSpeech(client, model, task, { onProgress = null } = {}) {
  const msg = { type: "speech_load", model: modelRef(model), task, options: pageLoadOptions() };
  return client.request(msg, "speech", { onEvent: onProgress }).done;
}

/** Transcribe `pcm` (a Float32Array of 16 kHz mono samples in [-1, 1]; its buffer is transferred)
 *  with `model`. body: OpenAI's transcription fields but the file (language, prompt, response_format,
 *  temperature, timestamp_granularities; Wisp's max_tokens), checked as the desktop's
 *  /v1/audio/transcriptions checks them; task "translate": /v1/audio/translations' (into English).
 *  onSegment hears each segment {start, end, text, tokens} as the model finishes it; onProgress its
 *  model's first load. Resolves with the `speech` event: {text, segments, language, duration, body
 *  (the response in body.response_format)}. */
export function transcribe(client, model, pcm, body = {}, { task = null, maxTokens = null, onSegment = null, onProgress = null } = {}) {
  const asked = maxTokens == null ? body : { ...body, max_tokens: maxTokens };  // maxTokens: body.max_tokens
  const msg = { type: "transcribe", model: modelRef(model), audio: pcm, body: { ...asked, model: model.id },
                options: pageLoadOptions() };
  if (task) msg.task = task;
  const onEvent = (event) => {
    if (event.type === "transcript_segment") {
      if (onSegment) onSegment(event);
    } else if (onProgress) onProgress(event);
  };
  return client.request(msg, "speech", { onEvent, transfer: [pcm.buffer] }).done;
}

/** Speak with `model`: body is OpenAI's speech body (input, voice, response_format wav | pcm, ...;
 *  Wisp's max_frames, temperature, top_p, repetition_penalty, seed), checked as the desktop's
 *  /v1/audio/speech checks it. Returns {id, done, cancel}. onAudio(data, sampleRate) hears each
 *  chunk as the codec decodes it: the response_format's bytes (a Uint8Array: PCM16 little-endian, a
 *  WAV's header first), or with float32 its samples (a Float32Array: the page's player). done
 *  resolves with the `speech` event: {samples, sample_rate, stop}. */
export function speak(client, model, body, { float32 = false, onAudio = null, onProgress = null } = {}) {
  const msg = { type: "speak", model: modelRef(model), body: { ...body, model: model.id }, options: pageLoadOptions() };
  if (float32) msg.float32 = true;
  const onEvent = (event) => {
    if (event.type === "speech_audio") {
      if (onAudio) onAudio(float32 ? floats(event.audio) : event.audio, event.sample_rate);
    } else if (onProgress) onProgress(event);
  };
  return client.request(msg, "speech", { onEvent });
}

/** A chunk's bytes (a Uint8Array of little-endian float32) as samples. */
function floats(bytes) {
  const aligned = bytes.byteOffset % 4 === 0 ? bytes : bytes.slice();
  return new Float32Array(aligned.buffer, aligned.byteOffset, aligned.byteLength >> 2);
}
