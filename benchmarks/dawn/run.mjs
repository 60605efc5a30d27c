// The browser page's engine, measured in Node on Dawn (Chrome's WebGPU, npm `webgpu`): the page's role
// in the worker protocol, played by the page's own client (static/client.js's WispClient) against the
// real worker/worker.js + Pyodide + py_engine wheel (build/web/), on a GPU with no browser.
// benchmarks/dawn.py drives it; it prints one JSON object on stdout, progress on stderr.
//
//   node benchmarks/dawn/run.mjs --model FILE.gguf|HF_DIR --ids IDS [--new-tokens 16] [--context N]
//        [--dawn-backend vulkan|opengles|...] [--webgpu /tmp/webgpu] [--dawn-toggle T ...] [--store-dir DIR] [--f32]
//        [--reload] [--load-only]
//
// IDS: a JSON file or inline JSON, {"ids": [...], "warm_ids": [...]} (or just the ids' list: the
// warm-up then uses them reversed). As benchmarks/browser.py does in Chromium: load with context
// (default ids + new tokens + 8), one greedy generation of warm_ids (every pipeline's first use), then
// the measured greedy generation of ids with ignore_eos, so exactly --new-tokens tokens.
// opengles (no GPU here: llvmpipe through EGL) gets a compatibility-mode adapter (featureLevel
// "compatibility"); other backends the core adapter Chrome gives. The weight store writes to a fresh
// temporary directory (removed at the end) unless --store-dir names one to keep between runs.
// `load` reports where the load's time went (the worker's `loaded` event: worker/load_clock.js);
// --reload loads the model a second time in the same worker (from the store the first load filled:
// `reload`), --load-only skips the generations (no ids needed).

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
} });
if (!args.model || !(args.ids || args["load-only"])) {
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
async function timedLoad(client, ref, options) {
  const start = performance.now();
  const loaded = await client.load(ref, options, { onProgress: progressLogger() });
  const ms = performance.now() - start, w = loaded.weights ?? { bytes: 0, ms: 0, phases: {} };  // an older wheel: none
  log(`loaded in ${Math.round(ms)} ms on ${loaded.adapter.name} [${loaded.adapter.features.join(", ")}]`);
  const load = {
    ms: Math.round(ms), worker_ms: loaded.load_ms, bytes: w.bytes, mb_s: mbs(w.bytes, ms / 1000),
    weights_ms: w.ms, weights_mb_s: mbs(w.bytes, w.ms / 1000),
    phases: Object.fromEntries(Object.entries(w.phases).map(([k, v]) => [k, { ...v, mb_s: mbs(v.bytes, v.s) }])),
  };
  log(`weights: ${JSON.stringify(load)}`);
  return { loaded, load };
}

async function main() {
  const { ids, warm } = args["load-only"] ? { ids: [], warm: [] } : readIds(args.ids);
  const newTokens = Number(args["new-tokens"]);
  const context = Number(args.context || ids.length + newTokens + 8);
  const storeDir = args["store-dir"] || fs.mkdtempSync(path.join(os.tmpdir(), "wisp-opfs-"));
  process.on("unhandledRejection", (err) => log("unhandled rejection (a browser logs it and goes on):", err));
  process.on("exit", () => { if (!args["store-dir"]) fs.rmSync(storeDir, { recursive: true, force: true }); });

  const { gpu, featureLevel } = await openDawn(args.webgpu, args["dawn-backend"], args["dawn-toggle"]);
  const page = await openPage({ model: args.model, gpu, storeDir });
  log(`serving ${page.model.id} at ${page.origin}; store in ${storeDir}`);
  const { client, model } = page;
  let booted = null;
  client.addEventListener("booted", (e) => { booted = e.detail.pyodide_ms; });
  client.addEventListener("crash", (e) => log("worker crash:", e.detail?.message));
  const options = { context, ...(args.f32 ? { f32: true } : {}) };
  const { loaded, load } = await timedLoad(client, page.modelRef(model), options);
  const reload = args.reload ? (await timedLoad(client, page.modelRef(model), options)).load : undefined;
  const about = {
    engine: "worker.js + Pyodide on Dawn (Node)", dawn_backend: args["dawn-backend"], feature_level: featureLevel,
    adapter: loaded.adapter.name, features: loaded.adapter.features, submit: loaded.adapter.submit,
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
