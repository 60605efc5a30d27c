// The page's speech measured in Node on Dawn: the real worker/worker.js + Pyodide + py_engine wheel
// (build/web/), a clip sent as the page sends one (static/speech_client.js transcribe: the worker's
// `transcribe` message, py_engine/web/speech.py), or a text spoken as the page asks (speech_client.js
// speak: the `speak` message), the model's files through the weight store (OPFS on disk).
// benchmarks/dawn_speech.py drives it (it writes the model and the clip's samples); it prints one
// JSON object on stdout.
//
//   node benchmarks/dawn/speech.mjs --model HF_DIR --pcm FILE.f32 --tokens N [--language en] [--runs 5]
//        [--dawn-backend vulkan|opengles] [--webgpu /tmp/webgpu] [--dawn-toggle T ...]
//   node benchmarks/dawn/speech.mjs --model KANI_DIR --text TEXT --frames N [--seed S] [--runs 3] [...]
//
// The first transcribe loads the model (its files stored, uploaded; the pipelines compiled on first
// use): `first_ms`, with the worker's `load_ms`. Then --runs more, each timed from the page's call to
// its `speech` event (`clip_ms`: their median), with the model's own clocks read in the worker after
// each (Seq2Seq.stats: the first token, encode included, and the later tokens). Then a window's encode
// alone (the front-end and the encoder, waited for), --runs times, in the worker (worker.js?test's
// test_exec, which runs Python there).
//
// Speaking (--frames): the first speak loads the model, then --runs more, each timed from the page's
// call to its `speech` event (`wall_seconds`: their median) and to its first `speech_audio` chunk
// (`first_pcm_ms`), bounded by max_frames with the body's seed; the worker's clocks read after each:
// its codec's decode calls (a clock put around NanoCodec's decode, as benchmarks/speech_rtf.py puts
// one) and the codec-LM's stats (tokens, host and constraint seconds).

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { openDawn } from "./dawn_gpu.mjs";
import { openPage } from "./page.mjs";

const log = (...a) => console.error("[dawn-speech]", ...a);
const { values: args } = parseArgs({ options: {
  model: { type: "string" }, pcm: { type: "string" }, tokens: { type: "string" }, language: { type: "string" },
  text: { type: "string" }, frames: { type: "string" }, seed: { type: "string", default: "0" },
  runs: { type: "string", default: "5" },
  "dawn-backend": { type: "string", default: "vulkan" }, webgpu: { type: "string", default: "/tmp/webgpu" },
  "dawn-toggle": { type: "string", multiple: true, default: [] },
} });
if (!args.model || !(args.pcm && args.tokens) === !(args.text && args.frames)) {
  console.error("usage: node benchmarks/dawn/speech.mjs --model HF_DIR (--pcm FILE.f32 --tokens N | --text TEXT --frames N)");
  process.exit(2);
}
const ms = (t) => Math.round(100 * t) / 100;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Python in the worker (worker.js?test's test_exec): the value of its last expression. */
function inWorker(client) {
  let n = 0;
  return (code) => new Promise((resolve, reject) => {
    const id = `bench-exec-${++n}`;
    const answer = (ev) => {
      if (ev.detail?.id !== id) return;
      client.removeEventListener("test_result", answer);
      if (ev.detail.error) reject(new Error(ev.detail.error)); else resolve(ev.detail.result);
    };
    client.addEventListener("test_result", answer);
    client._post({ type: "test_exec", id, code });
  });
}

// The loaded transcriber's clocks (Seq2Seq.stats of its last transcribe), and its adapter and features.
const STATS = `
import json
from py_engine.web.worker import STATE
transcriber = STATE.speech.loaded["transcription"][2]
stats = transcriber.model.stats
json.dumps([stats.first_token_seconds, stats.seconds_per_token, stats.tokens])
`;
const DEVICE = `
from py_engine.web.worker import STATE
caps = STATE.device.caps
json.dumps({"adapter": caps.adapter, "shader_f16": caps.shader_f16, "kind": type(transcriber).__name__})
`;

/** A window's encode alone, in the worker: Whisper's log-mel + encoder over its 30-s window
 *  (WhisperTranscriber.encode_window's work), Moonshine's front-end + encoder over the clip. */
function encodeCode(pcm, runs) {
  const b64 = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength).toString("base64");
  return `
import base64, time
from array import array
samples = array("f")
samples.frombytes(base64.b64decode("${b64}"))
model = transcriber.model
if hasattr(transcriber, "rows"):  # Whisper
    from py_engine.speech.log_mel import window_bytes
    def encode():
        model.encode({"pcm": window_bytes(samples)}, transcriber.rows)
else:
    from py_engine.speech.moonshine_model import encode_window
    def encode():
        encode_window(model, samples)
times = []
for _ in range(${runs} + 1):
    start = time.perf_counter()
    encode()
    await model.sync()
    times.append(time.perf_counter() - start)
json.dumps(times[1:])
`;
}

// A clock around the loaded speaker's codec decode (once, after its load), and what it and the
// codec-LM's stats say of the last speak (the clock then zeroed).
const CODEC_CLOCK = `
import json, time
from py_engine.web.worker import STATE
speaker = STATE.speech.loaded["speech"][2]
codec, untimed_decode = speaker.codec, speaker.codec.decode
spent = {"codec": 0.0, "calls": 0}
async def timed_decode(frames, first=0):
    start = time.perf_counter()
    try:
        return await untimed_decode(frames, first)
    finally:
        spent["codec"] += time.perf_counter() - start
        spent["calls"] += 1
codec.decode = timed_decode
caps = STATE.device.caps
json.dumps({"adapter": caps.adapter, "shader_f16": caps.shader_f16, "hop": codec.hop,
            "prompt_tokens": len(speaker.prompt(${JSON.stringify(args.text ?? "")}))})
`;
const SPEAK_CLOCKS = `
stats = speaker.engine.stats
said = [spent["codec"], spent["calls"], stats.tokens, stats.host_seconds, stats.constraint_seconds]
spent.update(codec=0.0, calls=0)
json.dumps(said)
`;

async function speakRuns(client, model, python, result) {
  const runs = Number(args.runs), frames = Number(args.frames);
  const body = { input: args.text, max_frames: frames, seed: Number(args.seed) };
  const { speak } = await import(new URL("../../static/speech_client.js", import.meta.url).href);
  const once = async () => {
    const start = performance.now();
    let first = null, samples = 0;
    const onAudio = (chunk) => { first ??= performance.now() - start; samples += chunk.length; };
    const done = await speak(client, model, body, { float32: true, onAudio }).done;
    return { wall: performance.now() - start, first, samples, done };
  };
  const loaded = await once();
  Object.assign(result, { first_ms: ms(loaded.wall), load_ms: loaded.done.load_ms, sample_rate: loaded.done.sample_rate });
  result.device = JSON.parse(await python(CODEC_CLOCK));
  log(`loaded in ${result.load_ms} ms, first speak ${result.first_ms} ms on ${result.device.adapter}`);
  const rows = [];
  for (let r = 0; r < runs; r++) {
    const run = await once();
    const [codec, calls, tokens, host, constraint] = JSON.parse(await python(SPEAK_CLOCKS));
    rows.push({ ...run, frames: run.samples / result.device.hop, codec, calls, tokens, host, constraint });
  }
  const mid = (key) => median(rows.map((row) => row[key]));
  const wall = mid("wall") / 1000, made = mid("frames"), audio = made * result.device.hop / result.sample_rate;
  const round = (x, digits) => Math.round(x * 10 ** digits) / 10 ** digits;
  Object.assign(result, {
    max_frames: frames, seed: Number(args.seed), frames: rows.map((row) => row.frames),
    audio_seconds: round(audio, 3), wall_seconds: round(wall, 3), "rtf (wall / audio)": round(wall / audio, 4),
    "x real time (audio / wall)": round(audio / wall, 2), first_pcm_ms: ms(mid("first")),
    runs_seconds: rows.map((row) => round(row.wall / 1000, 3)),
    "worker: codec_ms_per_frame (its decode calls)": round(1000 * mid("codec") / made, 3),
    "worker: codec_calls": rows.at(-1).calls,
    "worker: codec_lm_ms_per_frame (wall less the codec's calls)": round((1000 * wall - 1000 * mid("codec")) / made, 3),
    "worker: codec_lm_last_run (tokens, host s, constraint s)": [rows.at(-1).tokens, round(rows.at(-1).host, 3), round(rows.at(-1).constraint, 3)],
  });
}

async function main() {
  const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "wisp-opfs-"));
  process.on("exit", () => fs.rmSync(storeDir, { recursive: true, force: true }));
  const { gpu, featureLevel } = await openDawn(args.webgpu, args["dawn-backend"], args["dawn-toggle"]);
  const page = await openPage({ model: args.model, gpu, storeDir, test: true });
  const { client, model } = page, python = inWorker(client);
  client.addEventListener("crash", (e) => log("worker crash:", e.detail?.message));
  const booted = new Promise((resolve) => client.addEventListener("booted", (e) => resolve(e.detail.pyodide_ms), { once: true }));
  client.start();
  const result = { engine: "worker.js + Pyodide on Dawn (Node)", dawn_backend: args["dawn-backend"],
                   feature_level: featureLevel, model: model.id, pyodide_boot_ms: await booted };
  if (args.frames) await speakRuns(client, model, python, result);
  else await transcribeRuns(client, model, python, result);
  await page.close();
  return result;
}

async function transcribeRuns(client, model, python, result) {
  const runs = Number(args.runs), tokens = Number(args.tokens);
  const bytes = fs.readFileSync(args.pcm);
  const pcm = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  const { transcribe } = await import(new URL("../../static/speech_client.js", import.meta.url).href);
  result.clip_seconds = Math.round(1000 * pcm.length / 16000) / 1000;
  const body = args.language ? { language: args.language } : {};
  const once = async () => {
    const start = performance.now();
    const done = await transcribe(client, model, pcm.slice(), body, { maxTokens: tokens });
    return { wall: performance.now() - start, done };
  };
  const first = await once();
  result.first_ms = ms(first.wall);
  result.load_ms = first.done.load_ms;
  result.device = JSON.parse(await python(`${STATS}\n${DEVICE}`));
  log(`loaded in ${result.load_ms} ms, first transcribe ${result.first_ms} ms on ${result.device.adapter}`);
  const walls = [], firsts = [], perToken = [], decoded = [];
  for (let r = 0; r < runs; r++) {
    const { wall, done } = await once();
    const [firstToken, later, count] = JSON.parse(await python(STATS));
    walls.push(wall); firsts.push(firstToken); perToken.push(later || 0); decoded.push(count);
    if (r === runs - 1) result.text = done.text;
  }
  const encodes = JSON.parse(await python(encodeCode(pcm, runs)));
  const clip = median(walls);
  Object.assign(result, {
    decoded_tokens: decoded, runs_ms: walls.map(ms), clip_ms: ms(clip), rtf: Math.round(1e4 * clip / 1000 / result.clip_seconds) / 1e4,
    encode_ms: ms(1000 * median(encodes)),
    "first_token_ms (encode included)": ms(1000 * median(firsts)),
    "ms_per_token (after the first)": Math.round(1e6 * median(perToken)) / 1e3,
  });
}

main().then((result) => {
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(0));
}, (err) => {
  log(`failed: ${err?.kind ? `[${err.kind}] ` : ""}${err?.message || err}`);
  process.exit(1);
});
