// The page's memory measured in Node on Dawn: the real worker/worker.js + Pyodide + py_engine wheel
// (build/web/), its memory messages sent by the page's own client (static/client.js), the documents'
// store in OPFS on disk (opfs.mjs: the log store's synchronous access handles). benchmarks/dawn_memory.py
// drives it (it makes the PDF and the synthetic export); it prints one JSON object on stdout.
//
//   node benchmarks/dawn/memory.mjs --model HF_DIR --pdf FILE --fill FILE --fill-index JSON
//        [--sizes 1000,10000,100000] [--runs 10] [--dawn-backend vulkan|opengles] [--webgpu /tmp/webgpu]
//
// 1. The worker boots (its wasm memory read through the ?test hook), a warm-up text is added to another
//    collection (the embedder's first load, every pipeline's first use: `embedder_load_ms`).
// 2. The PDF goes in through memory_add as the Documents panel sends it, timed by clocks put around the
//    worker's own functions (CLOCKS): read (the PDF reader), chunk, embed, store (the log's append),
//    index (the GPU's vectors); passages/s and tokens/s (prompt tokens, as memory_ingest.py counts
//    them) over the embedding. Then the collection's export, timed.
// 3. The collection filled to each size through memory_import (client.js memoryImport: the page's path,
//    batches of lines read from the file in pieces): FILE's documents of a fixed number of passages
//    (transfer.py's lines, random unit vectors), sliced lazily from disk (--fill-index: the header and
//    each line's byte offset). At each size: the import's time (and its store and index parts), the
//    median of --runs recalls (k 8, token_budget 2048, as memory_ingest.py's), the OPFS log's bytes
//    and the wasm memory.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

import { openDawn } from "./dawn_gpu.mjs";
import { openPage } from "./page.mjs";

const log = (...a) => console.error("[dawn-memory]", ...a);
const { values: args } = parseArgs({ options: {
  model: { type: "string" }, pdf: { type: "string" }, fill: { type: "string" }, "fill-index": { type: "string" },
  sizes: { type: "string", default: "1000,10000,100000" }, runs: { type: "string", default: "10" },
  "dawn-backend": { type: "string", default: "vulkan" }, webgpu: { type: "string", default: "/tmp/webgpu" },
  "dawn-toggle": { type: "string", multiple: true, default: [] },
} });
if (!args.model || !args.pdf || !args.fill || !args["fill-index"]) {
  console.error("usage: node benchmarks/dawn/memory.mjs --model HF_DIR --pdf FILE --fill FILE --fill-index JSON");
  process.exit(2);
}
const COLLECTION = "bench";
const ms = (t) => Math.round(10 * t) / 10;
const mb = (bytes) => Math.round(bytes / 1e5) / 10;
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

// Clocks inside the worker's Python (test_exec), as memory_ingest.py's Timed embedder: the page's
// events cannot time phases here (the page and the worker share this thread, so an event is seen only
// once the worker's Python yields). Wrapped in place: the reader, the chunker, the embedder's embed,
// the log store's append, the index's placing. CLOCKS() reads them (seconds; texts and prompt tokens).
const CLOCKS = `
import json, time
from py_engine.web.worker import STATE
from py_engine.memory import collection, documents, log_store
CLOCKS = dict(read=0.0, chunk=0.0, embed=0.0, store=0.0, index=0.0, texts=0, tokens=0)
def timed(key, fn):
    def run(*args, **options):
        start = time.perf_counter()
        try:
            return fn(*args, **options)
        finally:
            CLOCKS[key] += time.perf_counter() - start
    return run
documents.read_document = timed("read", documents.read_document)
collection.chunk_text = timed("chunk", collection.chunk_text)
log_store.LogStore.add_many = timed("store", log_store.LogStore.add_many)
collection.Collection._place = timed("index", collection.Collection._place)
inner = STATE.memory.embedder.embed
async def embed(texts, **options):
    start = time.perf_counter()
    out = await inner(texts, **options)
    CLOCKS["embed"] += time.perf_counter() - start
    CLOCKS["texts"] += len(texts)
    CLOCKS["tokens"] += out.prompt_tokens
    return out
STATE.memory.embedder.embed = embed
`;
const READ_CLOCKS = "json.dumps(CLOCKS)";

/** The PDF through memory_add, as the Documents panel sends it; where its time went (the clocks). */
async function addPdf(client, embedder, clocks) {
  const data = fs.readFileSync(args.pdf), before = await clocks(), start = performance.now();
  const buffer = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
  const event = await client.memoryAdd(COLLECTION, embedder,
    { name: path.basename(args.pdf), data: buffer, media_type: "application/pdf" });
  const total = performance.now() - start, spent = since(before, await clocks());
  return { passages: event.added.passages, chars: event.added.chars, pdf_mb: Math.round(data.length / 1e3) / 1e3, total_ms: ms(total),
           read_ms: spent.read, chunk_ms: spent.chunk, embed_ms: spent.embed, store_ms: spent.store,
           index_ms: spent.index, prompt_tokens: spent.tokens,
           passages_per_s: Math.round(spent.texts / (spent.embed / 1e4)) / 10,
           tokens_per_s: Math.round(spent.tokens / (spent.embed / 1000)), log_mb: mb(event.bytes) };
}

/** The clocks' differences: milliseconds (texts and tokens as counts). */
function since(before, after) {
  const out = {};
  for (const [k, v] of Object.entries(after)) out[k] = ["texts", "tokens"].includes(k) ? v - before[k] : ms(1000 * (v - before[k]));
  return out;
}

async function main() {
  const sizes = args.sizes.split(",").map(Number), runs = Number(args.runs);
  const fillIndex = JSON.parse(fs.readFileSync(args["fill-index"], "utf8"));
  const storeDir = fs.mkdtempSync(path.join(os.tmpdir(), "wisp-opfs-"));
  process.on("exit", () => fs.rmSync(storeDir, { recursive: true, force: true }));
  const { gpu, featureLevel } = await openDawn(args.webgpu, args["dawn-backend"], args["dawn-toggle"]);
  const page = await openPage({ model: args.model, gpu, storeDir, test: true });
  const { client } = page, embedder = page.model, python = inWorker(client);
  client.addEventListener("crash", (e) => log("worker crash:", e.detail?.message));
  const wasm = async () => mb(await python("from py_engine.web.worker import wasm_memory_bytes\nwasm_memory_bytes()"));
  const booted = new Promise((resolve) => client.addEventListener("booted", (e) => resolve(e.detail.pyodide_ms), { once: true }));
  client.start();
  const result = { engine: "worker.js + Pyodide on Dawn (Node)", dawn_backend: args["dawn-backend"], feature_level: featureLevel,
                   model: embedder.id, pyodide_boot_ms: await booted, wasm_memory_mb: { booted: await wasm() } };

  let t = performance.now();
  await client.memoryAdd("warm", embedder, { name: "warm.txt", text: "warm-up: the kernels compiled before anything is timed" });
  result.embedder_load_ms = ms(performance.now() - t);
  await client.memoryRecall("warm", embedder, { query: "warm-up", k: 1 });  // the search's kernels too
  await python(CLOCKS);
  const clocks = async () => JSON.parse(await python(READ_CLOCKS));
  result.adapter = await python("from py_engine.web.worker import STATE\nSTATE.device.caps.adapter");
  log(`embedder ready in ${result.embedder_load_ms} ms on ${result.adapter}`);

  result.pdf = await addPdf(client, embedder, clocks);
  t = performance.now();
  const exported = await client.memoryExport(COLLECTION, embedder);
  result.pdf.export_ms = ms(performance.now() - t);
  const [first, ...docs] = (await exported.blob.text()).trim().split("\n");
  result.dimensions = JSON.parse(first).dimensions;
  result.pdf.export_lines = docs.length + 1;
  result.wasm_memory_mb.after_pdf = await wasm();
  log(`pdf: ${JSON.stringify(result.pdf)}`);

  const file = await fs.openAsBlob(args.fill), perDoc = fillIndex.passages_per_document, starts = fillIndex.starts;
  const header = JSON.stringify({ ...JSON.parse(fillIndex.header), model: embedder.id });  // the page's model: kept as they are
  let passages = result.pdf.passages, used = 0;
  result.scale = {};
  for (const size of sizes) {
    const wanted = Math.min(starts.length - 1 - used, Math.max(0, Math.ceil((size - passages) / perDoc)));
    const piece = new Blob([header + "\n", file.slice(starts[used], starts[used + wanted])]);
    const before = await clocks();
    t = performance.now();
    const { imported } = await client.memoryImport(COLLECTION, embedder, piece, { name: path.basename(args.fill) });
    const importMs = performance.now() - t, spent = since(before, await clocks());
    used += wanted;
    passages += imported * perDoc;
    const times = [];
    for (let r = 0; r < runs; r++) {
      const start = performance.now();
      await client.memoryRecall(COLLECTION, embedder, { query: `where does the train ${r} leave`, k: 8, token_budget: 2048 });
      times.push(performance.now() - start);
    }
    const listed = await client.memoryList(COLLECTION, embedder);
    result.scale[size] = { passages, imported_documents: imported, import_ms: ms(importMs),
                           import_passages_per_s: Math.round((imported * perDoc) / (importMs / 1000)),
                           import_mb: mb(piece.size), import_store_ms: spent.store, import_index_ms: spent.index,
                           recall_ms: ms(median(times)), first_recall_ms: ms(times[0]),
                           log_mb: mb(listed.bytes), wasm_memory_mb: await wasm() };
    log(`${size}: ${JSON.stringify(result.scale[size])}`);
  }
  await page.close();
  return result;
}

main().then((result) => {
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(0));
}, (err) => {
  log(`failed: ${err?.kind ? `[${err.kind}] ` : ""}${err?.message || err}`);
  process.exit(1);
});
