// The weight store's writer: a download's blocks written to the store and hashed (a SHA-256 per
// block, and the whole file's where the server named one) on a thread of its own — a nested module
// worker — while the worker's thread fetches the next block and hands this one to the GPU. Storing
// (a synchronous OPFS write) and hashing were the download's serialized phases on the worker's
// thread; here they overlap with the network and the upload. A stored file's read-back is its work
// too (OPFS): it reads each block and takes its digest, so the worker's thread only hands the bytes
// to the GPU (reading and checking 4 GB had kept that thread busy for the whole reload). The blocks
// travel as transferred ArrayBuffers (no copy), both ways, and come back to be filled again, so what
// is in flight is bounded by the ring that store.js cycles through.
//
// store.js drives it through openWriter(); the same WriterCore runs on the worker's thread where a
// nested worker cannot start (no Worker in this scope, a failed start), for the Cache API (its writes
// already leave the thread) and for small files (a worker costs more to start than they take). A
// stored file's read-back asks threadWriter() alone: without a worker, the worker's thread reads it.
//
//   const w = await openWriter({whole, thread})   whole: hash the whole file (a sha256 to check);
//                                            thread: try a worker (else this thread)
//   const w = await threadWriter(whole)     a writer on a worker, or null where none starts
//   w.put(at, slot, bytes, write, block)    bytes (a view at the start of slot.bytes): the file's bytes at
//                                            `at`, handed over (a worker takes the buffer: slot.free settles
//                                            once slot.bytes is a buffer to fill again). write: store them
//                                            (else hash only: bytes read back from the store); block >= 0:
//                                            they are that whole block, whose digest comes back (Promise<hex>)
//   w.read(at, slot, length, block)         (a worker only) the stored bytes at `at` read there into
//                                            slot.bytes and hashed as put() hashes them: Promise<{bytes,
//                                            digest}> (digest: hex, null unless block >= 0)
//   w.open(model, name)  w.truncate(n)  w.flush()  w.reset() (a new whole-file hash)
//   w.settle()                              every put done; throws a failed one's error (a QuotaExceededError)
//   w.finish() -> hex | null                the whole file's digest, once every put is done
//   w.close()                               the file closed (and the worker ended); idempotent
//   w.durable                               bytes of the file written through it, as a prefix (the
//                                            backend handle's `durable`, as of the last put done)
//   w.thread                                true when the writing runs on a worker
//
// Messages (worker side): {seq, op, ...args} in, {seq, value} or {seq, error: {name, message}} out, each
// op done in order; a put's or read's answer carries its buffer back ({seq, bytes, durable, digest}).

import { backendOf } from "./store_backends.js";
import { blockDigest, createSha256 } from "./sha256.js";

const PENDING = 4;  // block digests started and not yet done, at most (each holds a copy of its block)
const CLOSE_MS = 10000;  // a writer's worker that does not answer `close` in this long is ended anyway
export const NAME = "wisp-store-writer";

/** The writing itself, on whichever thread runs it. */
export class WriterCore {
  constructor() { this.file = null; this.hash = null; this.whole = false; this.digests = []; }

  async init(whole) { this.whole = whole; this.hash = whole ? await createSha256() : null; }

  async reset() { this.hash = this.whole ? await createSha256() : null; }

  async open(kind, model, name) { this.file = await backendOf(kind).open(model, name); }

  get durable() { return this.file ? this.file.durable : 0; }

  /** Stores (write) and hashes `bytes`: {digest}, the block's digest (a Promise) or null. The bytes
   *  may be reused once that settles (a failed WebCrypto digest is taken again from them). */
  async put(at, bytes, write, block) {
    if (write) await this.file.write(at, bytes);
    if (this.hash) this.hash.update(bytes);
    if (block < 0) return { digest: null };
    while (this.digests.length >= PENDING) await this.digests.shift();
    const digest = blockDigest(bytes);
    this.digests.push(digest.catch(() => null));
    return { digest };
  }

  /** Reads the stored bytes at `at` into `bytes` (a read-back), then hashes them as put() does. */
  async read(at, bytes, block) {
    await this.file.read(at, bytes.length, bytes);
    return this.put(at, bytes, false, block);
  }

  async truncate(n) { await this.file.truncate(n); }

  async flush() { await this.file?.flush?.(); }

  finish() { return this.hash ? this.hash.hex() : null; }

  async close() {
    const file = this.file;
    this.file = null;
    if (file) await file.close();
  }
}

/** A writer on this thread: WriterCore's calls, in order, with openWriter's interface. */
class LocalWriter {
  constructor(core) { this.core = core; this.thread = false; this.failed = null; this.last = Promise.resolve(); }

  get durable() { return this.core.durable; }

  // Ops run one after another (a put's write is synchronous on OPFS; the Cache API's awaits).
  run(step) {
    const p = this.last.then(() => { if (this.failed) throw this.failed; return step(); });
    this.last = p.catch((e) => { this.failed ??= e; });
    return p;
  }

  put(at, slot, bytes, write, block) {
    const digest = this.run(() => this.core.put(at, bytes, write, block)).then((r) => r.digest);
    slot.free = digest.then(() => {}, () => {});
    return block >= 0 ? digest : null;
  }

  open(kind, model, name) { return this.run(() => this.core.open(kind, model, name)); }
  truncate(n) { return this.run(() => this.core.truncate(n)); }
  flush() { return this.run(() => this.core.flush()); }
  reset() { return this.run(() => this.core.reset()); }
  async settle() { await this.last; await Promise.all(this.core.digests); if (this.failed) throw this.failed; }
  async finish() { await this.settle(); return this.core.finish(); }
  async close() { await this.last; await this.core.close(); }
}

/** A writer on a nested worker: the same ops as messages, a put's buffer transferred there and back. */
class ThreadWriter {
  constructor(worker) {
    this.worker = worker; this.thread = true; this.durable = 0; this.failed = null;
    this.seq = 0; this.waiting = new Map(); this.inflight = new Set(); this.closed = false;
    worker.onmessage = ({ data }) => {
      const w = this.waiting.get(data.seq);
      if (!w) return;
      this.waiting.delete(data.seq);
      if (data.durable !== undefined) this.durable = Math.max(this.durable, data.durable);
      if (data.error) w.reject(Object.assign(new Error(data.error.message), { name: data.error.name }));
      else w.resolve(data);
    };
    worker.onerror = (e) => this.broken(new Error(`the store's writer stopped: ${e.message || "worker error"}`));
  }

  broken(error) {
    this.failed ??= error;
    for (const w of this.waiting.values()) w.reject(error);
    this.waiting.clear();
  }

  call(op, args = {}, transfer = []) {
    if (this.failed && op !== "close") return Promise.reject(this.failed);
    const seq = ++this.seq;
    const p = new Promise((resolve, reject) => this.waiting.set(seq, { resolve, reject }));
    this.worker.postMessage({ seq, op, ...args }, transfer);
    const settled = p.then(() => {}, () => {});
    this.inflight.add(settled);
    settled.then(() => this.inflight.delete(settled));
    return p.catch((e) => { this.failed ??= e; throw e; });
  }

  /** The slot's whole buffer goes with the message (transferred) and comes back with the answer. */
  lend(op, args, slot, buffer) {
    const answer = this.call(op, { ...args, buffer }, [buffer]);
    slot.bytes = null;
    slot.free = answer.then((r) => { slot.bytes = new Uint8Array(r.bytes); }, () => { slot.bytes = null; });
    return answer;
  }

  put(at, slot, bytes, write, block) {  // (bytes: a view at the start of slot.bytes; a short block's is shorter)
    const answer = this.lend("put", { at, length: bytes.length, write, block }, slot, bytes.buffer);
    return block >= 0 ? answer.then((r) => r.digest) : null;
  }

  read(at, slot, length, block) {
    const answer = this.lend("read", { at, length, block }, slot, slot.bytes.buffer);
    return answer.then((r) => ({ bytes: new Uint8Array(r.bytes, 0, length), digest: r.digest }));
  }

  async init(whole) { await this.call("init", { whole }); }
  open(kind, model, name) { return this.call("open", { kind, model, name }); }
  truncate(n) { return this.call("truncate", { n }); }
  flush() { return this.call("flush"); }
  reset() { return this.call("reset"); }

  async settle() {
    while (this.inflight.size) await Promise.all(this.inflight);
    if (this.failed) throw this.failed;
  }

  async finish() { await this.settle(); return (await this.call("finish")).value; }

  async close() {  // the file is closed there (its one access handle released) before the worker ends
    if (this.closed) return;
    this.closed = true;
    let timer;
    try {  // (a worker that stopped answering gets CLOSE_MS, then ends all the same)
      await Promise.race([this.call("close").catch(() => {}), new Promise((resolve) => { timer = setTimeout(resolve, CLOSE_MS); })]);
    } finally {
      clearTimeout(timer);
      this.worker.terminate();
      this.broken(new Error("the store's writer was closed"));
    }
  }
}

/** A writer for one pass over a file on a nested worker, or null where none starts. */
export async function threadWriter(whole) {
  if (typeof Worker === "undefined") return null;
  let worker;
  try {
    worker = new Worker(new URL("./store_writer.js", import.meta.url), { type: "module", name: NAME });
    const ready = await new Promise((resolve) => {
      worker.onmessage = ({ data }) => resolve(data?.op === "ready");
      worker.onerror = () => resolve(false);
    });
    if (ready) {
      const w = new ThreadWriter(worker);
      await w.init(whole);
      return w;
    }
  } catch { /* no nested workers here */ }
  worker?.terminate();
  return null;
}

/** A writer for one pass over a file: on a nested worker when `thread` asks and one starts, else here. */
export async function openWriter({ whole, thread }) {
  const remote = thread ? await threadWriter(whole) : null;
  if (remote) return remote;
  const core = new WriterCore();
  await core.init(whole);
  return new LocalWriter(core);
}

// ---- the worker's side: started by openWriter as a module worker named NAME ----
if (typeof self !== "undefined" && self.name === NAME && typeof self.postMessage === "function") {
  const core = new WriterCore();
  let chain = Promise.resolve();
  let failed = null;
  const answer = (seq, value, transfer = []) => self.postMessage({ seq, ...value }, transfer);
  const ops = {
    init: (m) => core.init(m.whole),
    reset: () => core.reset(),
    open: (m) => core.open(m.kind, m.model, m.name),
    truncate: (m) => core.truncate(m.n),
    flush: () => core.flush(),
    finish: async () => { await Promise.all(core.digests); return core.finish(); },
    close: async () => { await Promise.all(core.digests); await core.close(); },  // also after a failure
  };
  self.onmessage = ({ data: m }) => {
    chain = chain.then(async () => {
      if (failed && m.op !== "close") return answer(m.seq, { error: failed });
      try {
        if (m.op === "put" || m.op === "read") {
          const bytes = new Uint8Array(m.buffer, 0, m.length);
          const { digest } = await (m.op === "read" ? core.read(m.at, bytes, m.block) : core.put(m.at, bytes, m.write, m.block));
          const durable = core.durable;
          // The buffer goes back once its digest is done (not before: a WebCrypto failure re-reads it).
          const done = (d) => answer(m.seq, { bytes: m.buffer, durable, digest: d }, [m.buffer]);
          if (digest) digest.then(done, (e) => { failed ??= { name: e.name, message: e.message }; answer(m.seq, { error: failed }); });
          else done(null);
        } else {
          answer(m.seq, { value: await ops[m.op](m) });
        }
      } catch (e) {
        failed = { name: e?.name || "Error", message: e?.message || String(e) };
        answer(m.seq, { error: failed });
      }
    });
  };
  self.postMessage({ op: "ready" });
}
