// The browser page's engine, measured in Node on Dawn (Chrome's WebGPU, npm `webgpu`): the page's role
// in the worker protocol, played by the page's own client (static/client.js's WispClient) against the
// real worker/worker.js + Pyodide + py_engine wheel (build/web/), on a GPU with no browser.
// benchmarks/dawn.py drives it; it prints one JSON object on stdout, progress on stderr.
//
//   node benchmarks/dawn/run.mjs --model FILE.gguf|HF_DIR --ids IDS [--new-tokens 16] [--context N]
//        [--dawn-backend vulkan|opengles|...] [--webgpu /tmp/webgpu] [--dawn-toggle T ...] [--store-dir DIR] [--f32]
//        [--reload] [--load-only] [--weights-only [--pieces RANGES_JSON]] [--inline-fetch] [--boot-first]
//
// IDS: a JSON file or inline JSON, {"ids": [...], "warm_ids": [...]} (or just the ids' list: the
// warm-up then uses them reversed). As benchmarks/browser.py does in Chromium: load with context
// (default ids + new tokens + 8), one greedy generation of warm_ids (every pipeline's first use), then
// the measured greedy generation of ids with ignore_eos, so exactly --new-tokens tokens.
// opengles (no GPU here: llvmpipe through EGL) gets a compatibility-mode adapter (featureLevel
// "compatibility"); other backends the core adapter Chrome gives. The weight store writes to a fresh
// temporary directory (removed at the end) unless --store-dir names one to keep between runs.
// `load` reports where the load's time went (the worker's `loaded` event: worker/load_clock.js) and
// the CPU seconds each of the harness's threads spent in it (threads_cpu_s: cpu.mjs); --reload loads
// the model a second time in the same worker (from the store the first load filled: `reload`),
// --load-only skips the generations (no ids needed). --weights-only streams only the weights (no
// Pyodide: worker/gpu.js's loadWeights through the store; RANGES_JSON [[file, start, length], ...] the
// tensors, else every file whole) into two 64 MiB buffers: an 8B model on Dawn's null backend.
// --inline-fetch runs Node's fetch on the worker's thread instead of net.mjs's network thread.
// --boot-first boots the worker (Pyodide, the engine) before the load starts, as the page does when it
// opens (static/storage.js refreshStore asks the worker for the store's list): the first load is then
// timed from the user's Load, not from the page's opening.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { openDawn } from "./dawn_gpu.mjs";
import { openPage } from "./page.mjs";

const log = (...a) => console.error("[dawn]", ...a);
const { values: args } = parseArgs({ options: {
  model: { type: "string" }, ids: { type: "string" }, "new-tokens": { type: "string", default: "16" },
  context: { type: "string" }, "dawn-backend": { type: "string", default: "vulkan" },
  webgpu: { type: "string", default: "/tmp/webgpu" }, "store-dir": { type: "string" },
  "dawn-toggle": { type: "string", multiple: true, default: [] }, f32: { type: "boolean", default: false },
  reload: { type: "boolean", default: false }, "load-only": { type: "boolean", default: false },
  "weights-only": { type: "boolean", default: false }, pieces: { type: "string" },
  "inline-fetch": { type: "boolean", default: false }, "boot-first": { type: "boolean", default: false },
} });
if (!args.model || !(args.ids || args["load-only"] || args["weights-only"])) {
  console.error("usage: node benchmarks/dawn/run.mjs --model FILE.gguf --ids IDS_JSON [--new-tokens N] "
                + "[--dawn-backend vulkan]");
  process.exit(2);
}

function readIds(text) {
  const value = JSON.parse(/^\s*[[{]/.test(text) ? text : fs.readFileSync(text, "utf8"));
  const ids = Array.isArray(value) ? value : value.ids;
  return { ids, warm: Array.isArray(value) ? [...ids].reverse() : (value.warm_ids || [...ids].reverse()) };
}

function progressLogger() {
  let last = "", lastAt = 0;
  return (p) => {
    const key = `${p.phase}`;
    const now = performance.now();
    if (key === last && now - lastAt < 2000 && p.done !== p.total) return;
    last = key; lastAt = now;
    const pct = p.total ? ` ${(100 * p.done / p.total).toFixed(0)}%` : "";
    log(`${p.phase}${pct}${p.file ? ` ${p.file}` : ""}`);
  };
}

const mbs = (bytes, s) => (s > 0 ? Math.round(bytes / s / 1e6) : null);

/** One load, timed from the page: the whole load (ms), the weights' streaming and its phases. */
async function timedLoad(page, ref, options) {
  const cpu = await page.threadsCpu(), start = performance.now();
  const loaded = await page.client.load(ref, options, { onProgress: progressLogger() });
  const ms = performance.now() - start, w = loaded.weights ?? { bytes: 0, ms: 0, phases: {} };  // an older wheel: none
  log(`loaded in ${Math.round(ms)} ms on ${loaded.adapter.name} [${loaded.adapter.features.join(", ")}]`);
  return { loaded, load: summary(ms, loaded.load_ms, w, cpuSince(cpu, await page.threadsCpu())) };
}

/** CPU seconds each of the harness's threads spent between two page.threadsCpu() tallies. */
function cpuSince(before, after) {
  const out = {};
  for (const [k, v] of Object.entries(after)) if (v !== null) out[k] = Math.round((v - (before[k] || 0)) * 100) / 100;
  return out;
}

function summary(ms, workerMs, w, cpu) {
  const load = {
    ms: Math.round(ms), worker_ms: workerMs, bytes: w.bytes, mb_s: mbs(w.bytes, ms / 1000),
    weights_ms: w.ms, weights_mb_s: mbs(w.bytes, w.ms / 1000),
    phases: Object.fromEntries(Object.entries(w.phases).map(([k, v]) => [k, { ...v, mb_s: mbs(v.bytes, v.s) }])),
    writer: w.writer ?? null, threads_cpu_s: cpu,
  };
  log(`weights: ${JSON.stringify(load)}`);
  return load;
}

/** The load's weight streaming alone, as loadWeights runs it in the worker (worker/gpu.js, worker/store.js:
 *  fetch or read-back, verify, store, upload), with no Pyodide and no engine: the model's tensor ranges
 *  (--pieces: [[file, start, length], ...]; else every file whole) written to GPU buffers of WINDOW bytes,
 *  each range's successive windows over the same buffers. The bytes and calls are the load's; the buffers
 *  fit Dawn's null backend (512 MB of buffers at most), which cannot hold an 8B model. */
const WINDOW = 64 << 20;
async function weightsOnly(page, timed) {
  const gpu = await import(new URL("../../worker/gpu.js", import.meta.url).href);
  const store = await import(new URL("../../worker/store.js", import.meta.url).href);
  globalThis.postMessage ??= () => {};  // the store's progress events: no page listens here
  const info = await gpu.requestDevice({ limits: "adapter" });
  const entry = page.model, ref = page.modelRef(entry);
  const ranges = args.pieces ? JSON.parse(fs.readFileSync(args.pieces, "utf8"))
    : Object.entries(entry.files).map(([name, size]) => [name, 0, size]);
  const buffers = [gpu.createBuffer(WINDOW, "storage", "window 0"), gpu.createBuffer(WINDOW, "storage", "window 1")];
  const plan = [];
  for (const [name, start, length] of ranges) {
    for (let o = 0; o < length; o += WINDOW) {
      plan.push([buffers[plan.length % 2], 0, `${ref.base}${name}`, start + o, Math.min(WINDOW, length - o)]);
    }
  }
  const once = async () => {
    const cpu = await page.threadsCpu(), start = performance.now();
    await store.begin(structuredClone(ref), "weights-only");
    await gpu.loadWeights(plan, null);
    await gpu.readBuffer(buffers[0], 0, 4);  // the queue's writes done
    const w = store.loadReport();
    return timed(performance.now() - start, w, cpuSince(cpu, await page.threadsCpu()));
  };
  const load = await once();
  const reload = args.reload ? await once() : undefined;
  return { engine: "worker/gpu.js + worker/store.js on Dawn (Node): the weights alone", dawn_backend: args["dawn-backend"],
           adapter: info.name, model: entry.id, load, reload };
}

async function main() {
  const { ids, warm } = args["load-only"] || args["weights-only"] ? { ids: [], warm: [] } : readIds(args.ids);
  const newTokens = Number(args["new-tokens"]);
  const context = Number(args.context || ids.length + newTokens + 8);
  const storeDir = args["store-dir"] || fs.mkdtempSync(path.join(os.tmpdir(), "wisp-opfs-"));
  process.on("unhandledRejection", (err) => log("unhandled rejection (a browser logs it and goes on):", err));
  process.on("exit", () => { if (!args["store-dir"]) fs.rmSync(storeDir, { recursive: true, force: true }); });

  const { gpu, featureLevel } = await openDawn(args.webgpu, args["dawn-backend"], args["dawn-toggle"]);
  const page = await openPage({ model: args.model, gpu, storeDir, inlineFetch: args["inline-fetch"] });
  log(`serving ${page.model.id} at ${page.origin}; store in ${storeDir}`);
  if (args["weights-only"]) {
    const result = await weightsOnly(page, (ms, w, cpu) => summary(ms, null, w, cpu));
    await page.close();
    return result;
  }
  const { client, model } = page;
  let booted = null;
  client.addEventListener("booted", (e) => { booted = e.detail.pyodide_ms; });
  client.addEventListener("crash", (e) => log("worker crash:", e.detail?.message));
  const options = { context, ...(args.f32 ? { f32: true } : {}) };
  if (args["boot-first"]) {
    const ready = new Promise((resolve) => client.addEventListener("booted", resolve, { once: true }));
    client.start();
    await ready;
  }
  const { loaded, load } = await timedLoad(page, page.modelRef(model), options);
  const reload = args.reload ? (await timedLoad(page, page.modelRef(model), options)).load : undefined;
  const about = {
    engine: "worker.js + Pyodide on Dawn (Node)", dawn_backend: args["dawn-backend"], feature_level: featureLevel,
    adapter: loaded.adapter.name, features: loaded.adapter.features, submit: loaded.adapter.submit,
    subgroup_min_size: loaded.adapter.subgroup_min_size,
    workarounds: loaded.adapter.workarounds, model: model.id, kv_cache: loaded.kv_cache, context: loaded.context,
    pyodide_boot_ms: booted, model_load_ms: load.ms, worker_load_ms: loaded.load_ms, load, reload,
    wasm_memory_mb: Math.round(loaded.wasm_memory_bytes / 1e5) / 10, gpu_bytes: loaded.gpu_bytes,
  };
  if (args["load-only"]) {
    await page.close();
    return about;
  }
  const run = async (prompt) => {
    const sampling = { temperature: 0, max_new_tokens: newTokens };
    const generation = client.generate({ ids: prompt, ignoreEos: true, sampling });
    for await (const _ of generation) { /* tokens stream */ }
    return generation.done;
  };
  const warmup = await run(warm);  // first use of every pipeline (another prompt: nothing reused from the cache)
  log(`warm-up: prefill ${warmup.prefill_tok_s} tok/s, decode ${warmup.decode_tok_s} tok/s`);
  const done = await run(ids);
  await page.close();
  return {
    ...about, prompt_tokens: ids.length, new_tokens: newTokens,
    prefill_tok_s: done.prefill_tok_s, decode_tok_s: done.decode_tok_s,
    host_ms_per_decode_token: done.host_ms_per_token,
    ttft_ms: done.ttft_ms, command_buffers: done.command_buffers, stop: done.stop,
    warmup: { prefill_tok_s: warmup.prefill_tok_s, decode_tok_s: warmup.decode_tok_s },
    tokens: done.tokens,
  };
}

main().then((result) => {
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(0));
}, (err) => {
  log(`failed: ${err?.kind ? `[${err.kind}] ` : ""}${err?.message || err}`);
  process.exit(1);
});
