// WispClient: the page side of the worker protocol (page <-> worker/worker.js, a module worker;
// every message and event, with its fields: py_engine/web/protocol.py).
// One module worker, requests matched to replies by id (the page's own, sharedClient(), shares one
// engine between tabs: static/engine_link.js). Reused by the page, the tests and the benchmark.
//
//   const client = new WispClient();                       // the worker starts on first use
//   const client = sharedClient();                         // or the page's one (app.js, openai.js)
//   const loaded = await client.load(model, {context: 2048}, {onProgress: (p) => ...});
//   const gen = client.generate({messages, sampling});      // or {prompt}, or {ids}
//   for await (const t of gen) out += t.text;               // text pieces; or gen.onToken = fn
//   const done = await gen.done;                             // the answer's stats (stop: eos|stop|length|cancel)
//   gen.cancel();  client.unload();  client.terminate();
//
// The worker has one generation message, `openai` (an OpenAI request body: static/openai.js sends
// them through client.openai); generate() is the same request seen as text, for the page's chat.
// Memory (the user's documents, kept by the worker in OPFS): memoryList / memoryAdd / memoryDelete /
// memoryRecall / memoryExport / memoryImport, each naming the collection and the embedding model
// (memoryModel() picks it). Speech (transcribe, speak: static/speech_client.js) goes through request().
//
// Errors: a request's `error` event rejects its promise with a WispError {kind, message, id};
// an `error` without a known id, and a worker crash (kind "crash", every pending request rejected
// too), are dispatched as "error" / "crash" events. A lost GPU device is no crash: the generation
// on it fails (kind "device-lost"), and the worker reloads the model by itself, narrated by
// "device_lost" events {status: "reloading" | "reloaded" | "failed"} (py_engine/web/recovery.py).
// Every worker message is also dispatched as an event of its own type (detail: the message), e.g.
// client.addEventListener("progress", ...).

import { WispError } from "./errors.js";
import { engineLink } from "./engine_link.js";
import { Generation } from "./generation.js";
import { modelRef } from "./models.js";
import { importBatches } from "./memory_import.js";
import { detectPlatform } from "./platform.js";
import { PROBE_STEPS, SubmitCalibration } from "./submit_probe.js";

export { Generation };
export { WispError };
export { fetchModels, MEMORY_MODEL, memoryModel, modelRef, modelSize } from "./models.js";

/** What every load tells the worker about the page: the WebGPU implementation (decided here from
 *  the user agent: a worker has no maxTouchPoints) and the URL's ?group=N / ?group=all override of
 *  the submit strategy (py_engine/gpu/submit_strategy.py). */
export function pageLoadOptions(scope = globalThis) {
  const options = { platform: detectPlatform(scope.navigator) };
  const params = new URLSearchParams(scope.location?.search || "");
  if (params.get("group")) options.group = params.get("group");
  // ?gpu_budget_mb=N: refuse models whose GPU footprint exceeds N MB (WebKit has 1200 by default)
  if (params.get("gpu_budget_mb")) options.gpu_budget_mb = params.get("gpu_budget_mb");
  // ?precision=exact: f32 arithmetic in every GEMV (default fast: int8 activations, py_engine/runtime/linear_plan.py)
  if (params.get("precision")) options.precision = params.get("precision");
  return options;
}

/** Is WebGPU exposed here? {ok, reason: null | "insecure-context" | "no-api"} (no adapter request). */
export function webgpuSupport(scope = globalThis) {
  if (scope.navigator?.gpu) return { ok: true, reason: null };
  return { ok: false, reason: scope.isSecureContext === false ? "insecure-context" : "no-api" };
}

let nextId = 1;
let pageClient = null;

/** The page's one engine: the chat (app.js) and static/openai.js on the same page share this
 *  WispClient, and every tab of the origin shares its engine (static/engine_link.js: one worker
 *  holds one model; a second worker would load it again, twice the time and the GPU memory). */
export function sharedClient() {
  pageClient ??= new WispClient({ createWorker: (url) => engineLink(url) });
  return pageClient;
}

export class WispClient extends EventTarget {
  constructor({ url = "/worker/worker.js", createWorker = null } = {}) {
    super();
    this.url = url;
    this.createWorker = createWorker || ((u) => new Worker(u, { type: "module" }));
    this.worker = null;
    this.booted = null;   // the `booted` event, once seen
    this.loaded = null;   // the `loaded` event of the current model
    this._pending = new Map(); // id → {kind: "load"|"generate"|"store"|"probe", resolve, reject, onProgress, gen}
    // WebKit: the submit probe's answer, once per worker (its device), and the first-forward guard
    this._submit = new SubmitCalibration((size, steps) => this.probe(size, { steps }));
  }

  get started() { return this.worker !== null; }

  /** Start the worker (idempotent). load() calls it. */
  start() {
    if (this.worker) return this;
    const w = this.createWorker(this.url);
    w.onmessage = (ev) => this._onMessage(ev.data);
    w.onerror = (ev) => {
      if (ev.preventDefault) ev.preventDefault();
      const where = ev.filename ? ` (${ev.filename.split("/").pop()}:${ev.lineno})` : "";
      this._crash(ev.message ? `${ev.message}${where}` : "The engine's worker could not start or stopped unexpectedly.");
    };
    w.onmessageerror = () => this._crash("The engine sent a message the page could not read.");
    // engine_link.js's LockLink: another tab took the engine over; this one waits for it again
    if ("onmoved" in w) w.onmoved = (message) => this._moved(message);
    this.worker = w;
    return this;
  }

  /** Load a model ({id, name, kind, files} from /api/models); resolves with the `loaded` event.
   *  options: {context, f32, precision}; platform and group default to pageLoadOptions(). On WebKit without a
   *  group, the submit probe (static/submit_probe.js) calibrates the group first: options.probe. */
  load(model, options = {}, { onProgress = null } = {}) {
    this.start();
    const id = `load-${nextId++}`;
    this.loaded = null;
    const loadOptions = { ...pageLoadOptions(), ...options };
    return new Promise((resolve, reject) => {
      // pending from the start: boot progress (id null) goes to the pending load, probe or not
      this._pending.set(id, { kind: "load", resolve, reject, onProgress });
      this._submit.options(loadOptions).then((probe) => {
        if (!this._pending.has(id)) return;  // terminated meanwhile
        const sent = probe ? { ...loadOptions, probe } : loadOptions;
        this._post({ type: "load", id, model: modelRef(model), options: sent });
      }, (err) => { if (this._pending.delete(id)) reject(err); });
    });
  }

  /** One submit probe in the worker: size "all" | N dispatches per command buffer; resolves with
   *  the `probe` event. */
  probe(size, { steps = PROBE_STEPS } = {}) {
    this.start();
    const id = `probe-${nextId++}`;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { kind: "probe", resolve, reject });
      this._post({ type: "probe", id, group: size === "all" ? 0 : size, steps });
    });
  }

  /** Start a generation on the loaded model: {messages:[{role, content}]} (a chat completion),
   *  {prompt} or {ids} (a text completion; token ids for models without a tokenizer), plus sampling
   *  {temperature (default 0), top_k, top_p, repetition_penalty, seed, lookup, max_new_tokens
   *  (default 512)}; ignoreEos: no stop id ends it (benchmarks decode a fixed count); memory (a chat's,
   *  Wisp's extension) with embedder (the memory's embedding model): passages of the user's documents
   *  go before the conversation and the response cites them (`done`'s response.memory). An `openai`
   *  request seen as text: a Generation over text pieces, whose `done` has the answer's stats. */
  generate({ messages = null, prompt = null, ids = null, sampling = {}, ignoreEos = false, memory = null, embedder = null } = {},
           { onToken = null } = {}) {
    const { max_new_tokens: maxTokens = 512, ...rest } = Object.fromEntries(
      Object.entries(sampling).filter(([, v]) => v != null));  // absent: the defaults
    const body = { model: this.loaded?.model ?? "", stream: true, temperature: 0, ...rest, max_tokens: maxTokens };
    if (ignoreEos) body.ignore_eos = true;
    if (messages) body.messages = messages; else body.prompt = ids ?? prompt ?? "";
    if (memory) body.memory = memory;
    const extra = embedder ? { embedder: modelRef(embedder) } : {};
    const gen = this._request(messages ? "chat.completions" : "completions", body, "gen", true, extra);
    gen.onToken = onToken;
    return gen;
  }

  /** An OpenAI request to the loaded model (static/openai.js): endpoint "chat.completions",
   *  "completions" or "embeddings", body as OpenAI's (embedder: the memory's embedding model, for a
   *  body with `memory`). Returns a Generation whose iteration yields the stream's chunks and whose
   *  `done` resolves with the whole response. */
  openai(endpoint, body, { embedder = null } = {}) {
    return this._request(endpoint, body, "api", false, embedder ? { embedder: modelRef(embedder) } : {});
  }

  _request(endpoint, body, prefix, asText, extra = {}) {
    if (!this.worker) throw new WispError("internal", "No model is loaded.");
    const id = `${prefix}-${nextId++}`;
    const gen = new Generation(this, id, { asText });
    gen._release = this._submit.guardFirstForward();  // WebKit: the calibrated size's first forward
    this._pending.set(id, { kind: "generate", gen });
    this._post({ type: "openai", id, endpoint, body, ...extra });
    return gen;
  }

  /** A request answered by one event of type `answer` (static/speech_client.js's speech messages):
   *  posts {...msg, id}; `done` resolves with that event (an `error` rejects it), onEvent hears the
   *  request's other events as they come (stream pieces, its model's load progress); cancel() asks
   *  the worker to stop it. */
  request(msg, answer, { onEvent = null, transfer = [] } = {}) {
    this.start();
    const id = `${msg.type}-${nextId++}`;
    const done = new Promise((resolve, reject) => {
      this._pending.set(id, { kind: "request", answer, resolve, reject, onEvent });
      this._post({ ...msg, id }, transfer);
    });
    return { id, done, cancel: () => this._post({ type: "cancel", id }) };
  }

  /** Cancel a generation by id (or every running one). */
  cancel(id = null) {
    for (const [pid, p] of this._pending) {
      if (p.kind === "generate" && (id === null || id === pid)) p.gen.cancel();
    }
  }

  /** The weight store: each resolves with the `store` event (the stored models, usage, quota).
   *  storeRemove deletes one model's stored files; storePersist asks for persistent storage
   *  (answer in `persisted`); storeTwin asks which stored model holds the very bytes of a model
   *  the user brought (answer in `twin`: its id, or null). */
  storeList() { return this._store({ type: "store_list" }); }
  storeRemove(model) { return this._store({ type: "store_remove", model }); }
  storePersist() { return this._store({ type: "store_persist" }); }
  storeTwin(model) { return this._store({ type: "store_twin", model: modelRef(model) }); }

  _store(msg) {
    this.start();
    const id = `store-${nextId++}`;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { kind: "store", resolve, reject });
      this._post({ ...msg, id });
    });
  }

  /** Memory (py_engine/web/memory.py): the collection `collection` of the user's documents, embedded
   *  by `embedder` (an embedding model of /api/models: memoryModel()). Each resolves with the `memory`
   *  event ({documents, bytes, usage, quota, damaged}, a recall's {hits}). memoryAdd's document:
   *  {name, data (an ArrayBuffer: transferred, so the caller's is emptied) | text, media_type, metadata};
   *  onProgress hears its `memory_progress` events (read, embedder, embed: done of total passages) and
   *  the embedder's first load's `progress` events. */
  memoryList(collection, embedder) {
    return this._memory({ type: "memory_list", collection, embedder: modelRef(embedder) });
  }
  memoryAdd(collection, embedder, document, { onProgress = null } = {}) {
    const msg = { type: "memory_add", collection, embedder: modelRef(embedder), options: pageLoadOptions() };
    for (const key of ["name", "data", "text", "media_type", "metadata"]) if (document[key] != null) msg[key] = document[key];
    return this._memory(msg, { onProgress, transfer: document.data instanceof ArrayBuffer ? [document.data] : [] });
  }
  memoryDelete(collection, embedder, document) {
    return this._memory({ type: "memory_delete", collection, embedder: modelRef(embedder), document });
  }
  memoryRecall(collection, embedder, { query, k, token_budget: budget, filter } = {}) {
    const msg = { type: "memory_recall", collection, embedder: modelRef(embedder), query, options: pageLoadOptions() };
    if (k != null) msg.k = k;
    if (budget != null) msg.token_budget = budget;
    if (filter != null) msg.filter = filter;
    return this._memory(msg);
  }

  /** The collection as memory/transfer.py's JSON lines (the desktop's /v1/memory/{c}/export): resolves
   *  with the `memory` event and `blob`, the lines (they came in `memory_lines` events, never whole in
   *  the worker). onProgress hears each part ({type: "memory_lines", done, total} documents). */
  async memoryExport(collection, embedder, { onProgress = null } = {}) {
    const parts = [];
    const onLines = (msg) => { parts.push(msg.text); if (onProgress) onProgress(msg); };
    const event = await this._memory({ type: "memory_export", collection, embedder: modelRef(embedder) }, { onLines });
    return { ...event, blob: new Blob(parts, { type: "application/x-ndjson" }) };
  }

  /** An export's lines (a File or Blob, read in pieces; or a string) added to the collection (the
   *  desktop's /v1/memory/{c}/import), sent in batches of at most IMPORT_LINES lines or IMPORT_CHARS
   *  characters, each with the export's header line: the worker never holds the whole file. Another
   *  embedding model's export is embedded again (onProgress hears the `memory_progress` embed steps).
   *  Resolves with {imported, skipped} (documents added, and already there); a malformed line rejects
   *  with an error naming `name` and the line, the documents before it imported. onProgress also hears
   *  {type: "memory_import", done, total, imported, skipped} (the file's bytes) after each batch. */
  async memoryImport(collection, embedder, source, { name = "the import", onProgress = null } = {}) {
    const ref = modelRef(embedder), options = pageLoadOptions();
    return importBatches(source, name, onProgress, (header, lines, line) =>
      this._memory({ type: "memory_import", collection, embedder: ref, header, lines, line, name, options }, { onProgress }));
  }

  _memory(msg, { onProgress = null, onLines = null, transfer = [] } = {}) {
    this.start();
    const id = `memory-${nextId++}`;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { kind: "memory", resolve, reject, onProgress, onLines });
      this._post({ ...msg, id }, transfer);
    });
  }

  /** "Check this device": the GPU self-tests (py_engine/selftest/suite.py) on the device and submit
   *  strategy a load would get (platform and group default to pageLoadOptions()); no model needed,
   *  refused while a load or generation runs. onResult(result) gets each `diagnostic` event's result
   *  as it finishes; resolves with the `diagnostics` event. */
  diagnose({ onResult = null } = {}, options = {}) {
    this.start();
    const id = `diagnose-${nextId++}`;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { kind: "diagnose", resolve, reject, onResult });
      const checkOptions = { ...pageLoadOptions(), ...options };
      this._submit.options(checkOptions).then((probe) => {  // WebKit: the group a load would get
        if (!this._pending.has(id)) return;
        this._post({ type: "diagnose", id, options: probe ? { ...checkOptions, probe } : checkOptions });
      }, (err) => { if (this._pending.delete(id)) reject(err); });
    });
  }

  unload() {
    this.loaded = null;
    if (this.worker) this._post({ type: "unload" });
  }

  /** Stop the worker; pending requests are rejected. A later load() starts a fresh one. */
  terminate(reason = "The engine was stopped.") {
    if (!this.worker) return;
    this.worker.terminate();
    this.worker = null;
    this.booted = null;
    this.loaded = null;
    this._submit.reset();  // the next worker opens its own device
    this._rejectAll(new WispError("terminated", reason));
  }

  _post(msg, transfer = []) { if (this.worker) this.worker.postMessage(msg, transfer); }

  _emit(type, detail) { this.dispatchEvent(new CustomEvent(type, { detail })); }

  _rejectAll(err) {
    const pending = [...this._pending.values()];
    this._pending.clear();
    for (const p of pending) (p.kind === "generate" ? p.gen._fail(err) : p.reject(err));
  }

  _moved(message) {
    this.booted = null;
    this.loaded = null;
    this._submit.reset();
    this._rejectAll(new WispError("moved", message));
    this._emit("moved", { message });
  }

  _crash(message) {
    const err = new WispError("crash", message);
    if (this.worker) this.worker.terminate();
    this.worker = null;
    this.booted = null;
    this.loaded = null;
    this._submit.reset();
    this._rejectAll(err);
    this._emit("crash", err);
  }

  _onMessage(msg) {
    if (!msg || typeof msg !== "object") return;
    const p = msg.id != null ? this._pending.get(msg.id) : undefined;
    if (p?.kind === "request" && msg.type !== "error") {
      if (msg.type === p.answer) {
        this._pending.delete(msg.id);
        p.resolve(msg);
      } else if (p.onEvent) p.onEvent(msg);
      this._emit(msg.type, msg);
      return;
    }
    switch (msg.type) {
      case "booted": this.booted = msg; break;
      case "progress": { // boot progress comes before any request: id null, it belongs to the pending load
        const target = p || (msg.id == null ? [...this._pending.values()].find((q) => q.kind === "load") : undefined);
        if (target?.onProgress) target.onProgress(msg);
        break;
      }
      case "loaded":
        this.loaded = msg;
        if (p) { this._pending.delete(msg.id); p.resolve(msg); }
        break;
      case "store":
      case "probe":
      case "memory":
        if (p) { this._pending.delete(msg.id); p.resolve(msg); }
        break;
      case "memory_progress": if (p?.onProgress) p.onProgress(msg); break;
      case "memory_lines": if (p?.onLines) p.onLines(msg); break;
      case "device_lost":  // a pending load goes on (the worker loads again); "failed": nothing is loaded
        if (msg.status === "failed") this.loaded = null;
        break;
      case "diagnostic": if (p?.onResult) p.onResult(msg.result); break;
      case "diagnostics":
        if (p) { this._pending.delete(msg.id); p.resolve(msg); }
        break;
      case "chunk": if (p?.gen) p.gen._chunk(msg.chunk); break;
      case "response":
        if (p?.gen) { this._pending.delete(msg.id); p.gen._response(msg); }
        break;
      case "error": {
        const err = new WispError(msg.kind || "internal", msg.message || "Unknown error", msg.id ?? null);
        if (p) {
          this._pending.delete(msg.id);
          if (p.gen) p.gen._fail(err); else p.reject(err);
        } else {
          this._emit("error", err);
        }
        return; // "error" events carry a WispError, and only for errors no request was waiting on
      }
      default: break;
    }
    this._emit(msg.type, msg);
  }
}
