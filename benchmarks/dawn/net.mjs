// The worker scope's fetch on a thread of its own, as a browser's network process: in Chrome a
// worker's fetch() only takes body bytes out of a data pipe that the network service fills
// elsewhere, while Node's fetch (undici) parses HTTP on the calling thread, which would charge the
// download's whole network stack (~1 GB/s of one core) to the page's worker thread. Here a
// worker_thread runs Node's fetch and hands the body over in chunks (ArrayBuffers transferred, not
// copied), at most AHEAD bytes ahead of the reader (a data pipe's capacity, so the network keeps
// flowing while the worker is busy, and memory stays bounded); the worker gets a plain Response.
//
//   networkFetch(fallback) -> fetch(input, init)   GET/HEAD of http(s) URLs go to the thread (headers,
//                                                  status, ETag, Range, redirects followed, body streamed,
//                                                  cancel, AbortSignal); anything else to `fallback`.
//                                                  fetch.cpu() -> the thread's CPU seconds so far (cpu.mjs)

import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";

import { threadCpu } from "./cpu.mjs";

const CHUNK = 1 << 20;   // body bytes handed over at once, at most
const AHEAD = 16 << 20;  // body bytes in flight (sent, not yet read) per response, at most
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

export function networkFetch(fallback) {
  let thread = null, next = 1, asked = null;
  const jobs = new Map();  // id -> {head: {resolve, reject}, queue, wake, done, error, closed}

  const open = () => {
    thread = new Worker(new URL(import.meta.url), { workerData: { network: true } });
    thread.on("message", onMessage);
    thread.on("error", (e) => { for (const job of jobs.values()) fail(job, e); jobs.clear(); thread = null; });
    thread.unref();  // the page's process ends when its work does
  };

  const fail = (job, error) => {
    job.error = error;
    if (job.head) { job.head.reject(error); job.head = null; }
    job.wake?.();
  };

  function onMessage(m) {
    if (m.type === "cpu") { asked?.(m.seconds); asked = null; return; }
    const job = jobs.get(m.id);
    if (!job) return;
    if (m.type === "head") {
      const body = m.method === "HEAD" || NULL_BODY.has(m.status) ? null : stream(m.id, job);
      const res = new Response(body, { status: m.status, statusText: m.statusText, headers: m.headers });
      Object.defineProperty(res, "url", { value: m.url });
      job.head.resolve(res);
      job.head = null;
      if (!body) jobs.delete(m.id);
    } else if (m.type === "chunk") {
      job.queue.push(new Uint8Array(m.bytes));
      job.wake?.();
    } else if (m.type === "done") {
      job.done = true;
      job.wake?.();
    } else if (m.type === "error") {
      fail(job, Object.assign(new TypeError(m.message), { cause: m.cause }));
    }
  }

  // The body: chunks as they arrive; each one read returns its bytes to the thread's allowance.
  function stream(id, job) {
    return new ReadableStream({
      async pull(controller) {
        while (!job.queue.length && !job.done && !job.error) await new Promise((resolve) => { job.wake = resolve; });
        job.wake = null;
        if (job.queue.length) {
          const bytes = job.queue.shift();
          thread?.postMessage({ type: "credit", id, bytes: bytes.length });
          controller.enqueue(bytes);
        } else if (job.error) {
          jobs.delete(id);
          controller.error(job.error);
        } else {
          jobs.delete(id);
          controller.close();
        }
      },
      cancel() {
        jobs.delete(id);
        thread?.postMessage({ type: "cancel", id });
      },
    }, { highWaterMark: 0 });
  }

  const fetch = function fetch(input, init = {}) {
    const method = String(init.method || "GET").toUpperCase();
    const url = typeof input === "string" || input instanceof URL ? new URL(input) : null;
    if (!url || !/^https?:$/.test(url.protocol) || (method !== "GET" && method !== "HEAD") || init.body) {
      return fallback(input, init);
    }
    if (!thread) open();
    const id = next++;
    const job = { head: null, queue: [], wake: null, done: false, error: null };
    jobs.set(id, job);
    const signal = init.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    signal?.addEventListener("abort", () => {
      fail(job, signal.reason);
      thread?.postMessage({ type: "cancel", id });
    }, { once: true });
    return new Promise((resolve, reject) => {
      job.head = { resolve, reject };
      thread.postMessage({ type: "fetch", id, url: url.href, method, headers: [...new Headers(init.headers || {})] });
    });
  };
  fetch.cpu = () => (thread ? new Promise((resolve) => { asked = resolve; thread.postMessage({ type: "cpu" }); }) : 0);
  return fetch;
}

// ---- the network thread ----
if (!isMainThread && workerData?.network) {
  const jobs = new Map();  // id -> {abort: AbortController, credit, wake}
  const post = (m, transfer) => parentPort.postMessage(m, transfer);

  async function run(id, url, method, headers) {
    const job = { abort: new AbortController(), credit: AHEAD, wake: null };
    jobs.set(id, job);
    let buffer = null, fill = 0;
    const flush = async () => {
      if (!fill) return;
      while (job.credit < fill && !job.abort.signal.aborted) await new Promise((resolve) => { job.wake = resolve; });
      job.credit -= fill;
      const bytes = fill === buffer.byteLength ? buffer : buffer.slice(0, fill);
      post({ type: "chunk", id, bytes }, [bytes]);
      buffer = null; fill = 0;
    };
    try {
      const res = await fetch(url, { method, headers, signal: job.abort.signal });
      post({ type: "head", id, method, status: res.status, statusText: res.statusText, headers: [...res.headers], url: res.url });
      if (!res.body || method === "HEAD") return;
      try {
        for await (const value of res.body) {  // undici's chunks (~64 KB) gathered into CHUNK-sized ones
          for (let i = 0; i < value.length;) {
            buffer ??= new ArrayBuffer(CHUNK);
            const n = Math.min(value.length - i, CHUNK - fill);
            new Uint8Array(buffer, fill, n).set(value.subarray(i, i + n));
            fill += n; i += n;
            if (fill === CHUNK) await flush();
          }
        }
      } finally {
        await flush();  // what arrived before an error is still handed over (a resume keeps it)
      }
      post({ type: "done", id });
    } catch (e) {
      if (!job.abort.signal.aborted) post({ type: "error", id, message: e.message, cause: e.cause?.message });
    } finally {
      jobs.delete(id);
    }
  }

  parentPort.on("message", (m) => {
    const job = jobs.get(m.id);
    if (m.type === "fetch") run(m.id, m.url, m.method, m.headers);
    else if (m.type === "cpu") post({ type: "cpu", seconds: threadCpu() });
    else if (m.type === "credit" && job) { job.credit += m.bytes; job.wake?.(); }
    else if (m.type === "cancel" && job) { job.abort.abort(); job.wake?.(); }
  });
}
