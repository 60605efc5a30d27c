// The page's module worker (worker/worker.js, unchanged) run inside this Node process: the global
// scope a dedicated worker would give it, then the worker module itself.
//
//   installWorkerScope({url, gpu, storage, userAgent, hooks, inlineFetch})   before anything imports
//                    worker/ or static/ (hooks: {url, data} of loader_hooks.mjs, for the threads of nested
//                    workers; inlineFetch: Node's fetch on the worker's own thread, as before net.mjs)
//   startWorker() -> a Worker-like object for static/client.js's WispClient({createWorker})
//
// What stands in for the browser, and nothing more:
//   self             globalThis
//   self.location    the worker's URL on the harness server (serve.mjs): origin for Pyodide and the
//                    model files, and the ?test / ?store switches (none here)
//   navigator        {gpu: Dawn's GPU, storage: opfs.mjs, userAgent: desktop Chrome's (so neither
//                    static/platform.js nor py_engine/gpu/webkit.py takes the WebKit path), hardwareConcurrency}
//   fetch            Node's fetch on a thread of its own (net.mjs: the network process's share, as in a
//                    browser, is not the worker's), with relative URLs resolved against self.location
//   postMessage      worker -> page; self.onmessage({data}) page -> worker. Both structured-cloned and
//                    delivered in a later task (setImmediate), as a MessagePort does
//   Worker           nested module workers (the weight store's writer, worker/store_writer.js) on
//                    threads of their own (node:worker_threads): the same scope there (navigator.storage
//                    on the same directory, one sync access handle per file across threads), messages
//                    structured-cloned with their transfer lists; a URL of the worker's origin under
//                    /worker/ is that file of worker/
// Page and worker share one thread here (a real worker has its own): the page's handlers are tiny,
// and the engine's own timings (decode tok/s, host ms per token) are taken inside the worker.

import { register } from "node:module";
import os from "node:os";
import { Worker as NodeWorker, isMainThread, parentPort, workerData } from "node:worker_threads";

import { spent, threadCpu } from "./cpu.mjs";
import { networkFetch } from "./net.mjs";
import { diskStorage, installOpfsGlobals, lockTable } from "./opfs.mjs";

const WORKER_DIR = new URL("../../worker/", import.meta.url);
let network = null;  // this scope's fetch (net.mjs)

/** CPU seconds of this scope's network thread so far (cpu.mjs). */
export function networkCpu() { return network ? network.cpu() : 0; }

export const CHROME_UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
  + "Chrome/131.0.0.0 Safari/537.36";

export function installWorkerScope({ url, gpu, storage, userAgent = CHROME_UA, hooks = null, inlineFetch = false }) {
  globalThis.self = globalThis;
  globalThis.location = new URL(url);  // a URL has WorkerLocation's fields (href, origin, search, ...)
  Object.defineProperty(globalThis, "navigator", {  // Node 21+ has one of its own; Node 20 none
    value: { gpu, storage, userAgent, hardwareConcurrency: os.availableParallelism(), language: "en-US",
             languages: ["en-US"] },
    configurable: true, writable: true,
  });
  const threaded = inlineFetch ? globalThis.fetch : networkFetch(globalThis.fetch);
  network = inlineFetch ? null : threaded;
  const resolve = (input) => (typeof input === "string" || input instanceof URL
    ? new URL(input, globalThis.location.href) : input);
  globalThis.fetch = (input, init) => threaded(resolve(input), init);
  globalThis.Worker = class Worker extends EventTarget {
    constructor(script, options = {}) {
      super();
      this.onmessage = null; this.onerror = null;
      const href = new URL(script, globalThis.location.href);
      const file = href.protocol === "file:" ? href
        : href.origin === globalThis.location.origin && href.pathname.startsWith("/worker/")
          ? new URL(href.pathname.slice("/worker/".length), WORKER_DIR) : null;
      if (!file) throw new DOMException(`Worker: ${href.href} is not a worker/ script of this origin`, "SecurityError");
      this._thread = new NodeWorker(new URL(import.meta.url), { workerData: { nested: {
        module: file.href, url: href.protocol === "file:" ? globalThis.location.href : href.href, name: options.name || "",
        dir: storage?.dir, locks: lockTable(), hooks, userAgent } } });
      const deliver = (type, init) => {
        const ev = type === "message" ? new MessageEvent("message", init) : Object.assign(new Event("error"), init);
        const handler = type === "message" ? this.onmessage : this.onerror;
        if (handler) handler.call(this, ev);
        this.dispatchEvent(ev);
      };
      this._role = options.name || "worker";
      this._thread.on("message", (data) => {
        if (data?.__wispCpu !== undefined) { spent(this._role, data.__wispCpu); this._thread.terminate(); }
        else if (!this._ended) deliver("message", { data });
      });
      this._thread.on("error", (e) => deliver("error", { message: e?.message || String(e), error: e }));
    }
    postMessage(data, transfer) { this._thread.postMessage(data, Array.isArray(transfer) ? transfer : transfer?.transfer); }
    terminate() {  // at once for the page; the thread first tells its CPU seconds (cpu.mjs), then ends
      if (this._ended) return;
      this._ended = true;
      this._thread.postMessage({ __wispCpu: true });
      setTimeout(() => this._thread.terminate(), 2000).unref();
    }
  };
}

// ---- a nested worker's thread: the scope, then its module; messages from before it loaded wait ----
if (!isMainThread && workerData?.nested) {
  const { module, url, name, dir, locks, hooks, userAgent } = workerData.nested;
  if (hooks) register(hooks.url, { data: hooks.data });  // hash-wasm's URL, as on the page's thread
  installOpfsGlobals(locks);
  installWorkerScope({ url, gpu: undefined, storage: dir ? diskStorage(dir) : undefined, userAgent, hooks });
  globalThis.name = name;
  globalThis.postMessage = (data, transfer) => parentPort.postMessage(data, Array.isArray(transfer) ? transfer : transfer?.transfer);
  const events = new EventTarget();
  globalThis.addEventListener = events.addEventListener.bind(events);
  globalThis.removeEventListener = events.removeEventListener.bind(events);
  let loaded = false;
  const early = [];
  const deliver = (data) => {
    const ev = new MessageEvent("message", { data });
    if (globalThis.onmessage) globalThis.onmessage(ev);
    events.dispatchEvent(ev);
  };
  parentPort.on("message", (data) => {
    if (data?.__wispCpu) parentPort.postMessage({ __wispCpu: threadCpu() });
    else if (loaded) deliver(data);
    else early.push(data);
  });
  await import(module);
  loaded = true;
  for (const data of early.splice(0)) deliver(data);
}

export function startWorker(module = new URL("../../worker/worker.js", import.meta.url)) {
  let ready = false, closed = false;
  const queue = [];
  const port = {
    onmessage: null, onerror: null, onmessageerror: null,
    postMessage(msg) {
      const data = structuredClone(msg);
      if (ready) setImmediate(() => deliver(data)); else queue.push(data);
    },
    terminate() { closed = true; },
  };
  const deliver = (data) => { if (!closed && globalThis.onmessage) globalThis.onmessage({ data }); };
  globalThis.postMessage = (msg) => {
    const data = structuredClone(msg);
    setImmediate(() => { if (!closed && port.onmessage) port.onmessage({ data }); });
  };
  import(module.href).then(() => {  // the module assigned self.onmessage while it was evaluated
    ready = true;
    for (const data of queue.splice(0)) setImmediate(() => deliver(data));
  }, (err) => {
    console.error(err);
    const message = `${err?.name || "Error"}: ${err?.message || err}`;
    if (port.onerror) port.onerror({ message, filename: module.href, lineno: 0 });
  });
  return port;
}
