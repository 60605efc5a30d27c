// The page's module worker (worker/worker.js, unchanged) run inside this Node process: the global
// scope a dedicated worker would give it, then the worker module itself.
//
//   installWorkerScope({url, gpu, storage, userAgent})   before anything imports worker/ or static/
//   startWorker() -> a Worker-like object for static/client.js's WispClient({createWorker})
//
// What stands in for the browser, and nothing more:
//   self             globalThis
//   self.location    the worker's URL on the harness server (serve.mjs): origin for Pyodide and the
//                    model files, and the ?test / ?store switches (none here)
//   navigator        {gpu: Dawn's GPU, storage: opfs.mjs, userAgent: desktop Chrome's (so neither
//                    static/platform.js nor py_engine/gpu/webkit.py takes the WebKit path), hardwareConcurrency}
//   fetch            Node's fetch, with relative URLs resolved against self.location as a worker's are
//   postMessage      worker -> page; self.onmessage({data}) page -> worker. Both structured-cloned and
//                    delivered in a later task (setImmediate), as a MessagePort does
// Page and worker share one thread here (a real worker has its own): the page's handlers are tiny,
// and the engine's own timings (decode tok/s, host ms per token) are taken inside the worker.

import os from "node:os";

export const CHROME_UA = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
  + "Chrome/131.0.0.0 Safari/537.36";

export function installWorkerScope({ url, gpu, storage, userAgent = CHROME_UA }) {
  globalThis.self = globalThis;
  globalThis.location = new URL(url);  // a URL has WorkerLocation's fields (href, origin, search, ...)
  Object.defineProperty(globalThis, "navigator", {  // Node 21+ has one of its own; Node 20 none
    value: { gpu, storage, userAgent, hardwareConcurrency: os.availableParallelism(), language: "en-US",
             languages: ["en-US"] },
    configurable: true, writable: true,
  });
  const nodeFetch = globalThis.fetch;
  const resolve = (input) => (typeof input === "string" || input instanceof URL
    ? new URL(input, globalThis.location.href) : input);
  globalThis.fetch = (input, init) => nodeFetch(resolve(input), init);
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
