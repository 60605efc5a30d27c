// The page's side of the Dawn harness: our routes served from Node (serve.mjs), the worker's global
// scope (worker_shim.mjs: navigator.gpu, OPFS on disk from opfs.mjs), Pyodide's URL mapped to disk
// (loader_hooks.mjs -> pyodide_node.mjs) and hash-wasm's to build/web/vendor/, and the page's own
// client (static/client.js's WispClient) talking to the real worker/worker.js in this process.
// run.mjs measures with it; tests/test_dawn_harness.py boots it without a GPU.
//
//   openPage({model, gpu, storeDir, inlineFetch, test}) -> {origin, client, model, modelRef, close(), threadsCpu()}
//     model: a .gguf file or an HF directory; gpu: navigator.gpu (Dawn's, or undefined: no WebGPU);
//     storeDir: the directory behind the origin's OPFS; inlineFetch: Node's fetch on the worker's thread
//     (worker_shim.mjs); test: the worker as worker.js?test (its test_exec hook runs Python: memory.mjs
//     reads the wasm memory's size through it). `model` of the result is the /api/models entry.
//     threadsCpu(): CPU seconds so far of the worker's thread (this one), its network thread, the
//     server's and the store writers' (cpu.mjs; null off Linux).

import { register } from "node:module";
import { fileURLToPath } from "node:url";

import { tally, threadCpu } from "./cpu.mjs";
import { diskStorage, installOpfsGlobals } from "./opfs.mjs";
import { serve } from "./serve.mjs";
import { installWorkerScope, networkCpu, startWorker } from "./worker_shim.mjs";

const ROOT = new URL("../../", import.meta.url);
let opened = false;

export async function openPage({ model, gpu, storeDir, inlineFetch = false, test = false }) {
  if (opened) throw new Error("openPage: one page (one worker scope) per process");
  opened = true;
  const server = await serve({ model, root: fileURLToPath(ROOT) });
  const pyodide = new URL("./pyodide_node.mjs", import.meta.url).href;
  const hashWasm = "vendor/hash-wasm/sha256.umd.min.js";  // worker/sha256.js's, as the app serves it
  const hooks = { url: new URL("./loader_hooks.mjs", import.meta.url).href, data: { redirects: {
    [`${server.origin}/pyodide/pyodide.mjs`]: pyodide,
    [`${server.origin}/${hashWasm}`]: { url: new URL(`build/web/${hashWasm}`, ROOT).href, format: "module" } } } };
  register(hooks.url, { data: hooks.data });
  installOpfsGlobals();
  installWorkerScope({ url: `${server.origin}/worker/worker.js${test ? "?test" : ""}`, gpu, storage: diskStorage(storeDir), hooks, inlineFetch });
  const { WispClient, fetchModels, modelRef } = await import(new URL("static/client.js", ROOT).href);
  const client = new WispClient({ createWorker: () => startWorker() });
  const entry = (await fetchModels(`${server.origin}/api/models`))[0];
  return {
    origin: server.origin, client, model: entry, modelRef,
    async close() { client.terminate(); await server.close(); },
    async threadsCpu() {
      return { worker: threadCpu(), network: await networkCpu(), server: await server.cpu(), ...tally() };
    },
  };
}
