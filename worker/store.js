// The weight store: model files kept in the origin's storage (OPFS, else the Cache API; see
// store_backends.js), so a second load reads no weight byte from the network and works offline.
// Registered for Python as the module `wisp_store` (worker/worker.js); worker/weights.js streams
// weight files through streamFile().
//
//   begin(model, requestId)     a load starts: model {id, name, kind, base, files:{name:size},
//                               hashes:{name:{sha256}|{etag}}, source?}; drops stale files, checks the quota
//                               (source: a model the user brought; its bytes come through remote.js)
//   read(url, start?, length?)  bytes of a model file: from the store when there, else the network
//                               (a whole or small file is stored on the way; headers come from here)
//   streamFile(url, sink)       the whole file in order, sink(offset, bytes): the stored prefix read
//                               back, the rest downloaded (Range from `written`) and stored; checked
//                               whole against the server's sha256 once, block by block on every read-back
//   twin(model)                 the stored model holding exactly the bytes of a model the user brought
//   list() / remove(modelId) / estimate() / persist()
//
// Per file, a record (meta) {url, size, sha256, etag, digest, blocks, written, complete, verified_at,
// model}; blocks {block, sha256: [...]} is a SHA-256 per 4 MiB block, taken from the bytes as they
// were written. Only a complete file whose hash checked out is trusted; a partial one is resumed; a
// corrupt one is deleted and fetched again. `digest` is the whole file's SHA-256, taken as the file
// arrives only where the server names a sha256 to check it against (served by ETag: null; hashing
// 4 GB would check nothing, and hash-wasm takes ~270-500 MB/s of one core).
//
// A download is a pipeline over a ring of RING block buffers (32 MiB: what the download holds in
// memory, besides the network's buffers and the digests' copies): this thread gathers the body into a
// block, hands it to the GPU and passes the buffer to the store's writer (store_writer.js, a nested
// worker) which writes it, takes its digest (and the whole-file hash) and hands the buffer back, while
// this thread gathers the next; a full ring waits for the writer. A stored prefix is read back the
// other way round over the same ring: the writer reads a block into a buffer lent to it, takes its
// digest and hands both back, and this thread hands the bytes to the GPU. Where no worker can start,
// or on the Cache API, the same writer runs here (and this thread reads back). A file is trusted only
// once all its bytes are written and every digest is in: the record says `complete` after that, never before, and a file that does not
// match the server's sha256 is deleted and one StoreError ("hash") names it. The GPU got the bytes
// as they came, but the load that asked for them fails with that error: nothing unchecked is used.
//
// Blocks are written unflushed (a flush per write made it disk-bound); the record moves every
// META_EVERY bytes to the end of the blocks whose digests are in (without waiting for those still
// under way), so a resume trusts no byte without a digest: bytes the OS lost in a crash fail their
// block's check and are fetched again. Only an interrupted download's record names a partial block,
// and that after a flush.
//
// What a re-open checks, and why that much. The whole-file SHA-256 is taken once, as the file
// arrives (against the server's sha256 when it has one). After that the threat is the storage: a file
// cut short or a chunk lost (a crash mid-write, eviction, a bug of ours), a stale file, a flipped bit.
// Each is caught without the whole-file hash: the size on disk (truncation), the record against the
// server's sha256/ETag (stale), a short read (a lost chunk), and every block's digest, checked as it
// is read back: all blocks, since a load reads every byte anyway, so damage anywhere is found (a few
// sampled blocks would miss most of it). WebCrypto hashes them natively; on OPFS the store's writer
// reads them back and hashes them on its thread, and this thread only hands them to the GPU (they
// come back with their digests, ahead of it by at most RING blocks). Not defended:
// someone who can write the origin's storage; they can rewrite the record (and the cached app shell)
// as easily as the file, which a full re-hash against the record's own digest did not stop either.

import { pickBackend } from "./store_backends.js";
import { BLOCK, BlockHashes, blockList, readChecked } from "./sha256.js";
import { openWriter, threadWriter } from "./store_writer.js";
import { readRange, source } from "./remote.js";
import { findTwin } from "./store_twin.js";
import * as clock from "./load_clock.js";

export { report as loadReport } from "./load_clock.js";

export const CHUNK = BLOCK;         // bytes per read-back, and per write of a download: one block
const NO_STORE = { cache: "no-store" };  // the store is the cache: not a second copy in the HTTP cache
// Chunk buffers a pass cycles through: at most RING blocks (32 MiB) of a file between the network and
// the store, the writer's thread and the GPU at any time (plus the 4 digests' copies each thread keeps).
const RING = 8;
const THREAD_MIN = 2 * BLOCK;       // a file this long is read back, stored and hashed on the writer's thread (OPFS)
const META_EVERY = 64 << 20;        // the record's `written` moves about this often (and on any error)
const SMALL = 4 << 20;              // read() stores a file this small whole on first use
// ...but not a weight file of a model the user brought: its header is read by Range and nothing is
// stored before the footprint check has passed (a refused model costs its header, not 4 MiB).
const WEIGHTS = /\.(gguf|safetensors)$/;
const backend = pickBackend();
const files = new Map();            // url -> {model, name, size, sha256, etag, info, checked} of the current load
let requestId = null;
let load = null;                    // download accounting of the current load: {done, total, t0}

export class StoreError extends Error {
  constructor(kind, message) { super(message); this.name = kind === "quota" ? "QuotaError" : "StoreError"; this.kind = kind; }
}

const mb = (n) => `${(n / 1e6).toFixed(1)} MB`;

// Where the load's progress goes: this worker's page (worker.js), or a function of the Python that
// loads (py_engine/web/library.py: in a notebook's kernel worker the worker's channel is the kernel's).
let progressSink = (event) => self.postMessage(event);
export function progressTo(sink) { progressSink = sink; }
function post(phase, extra) { progressSink({ type: "progress", id: requestId, phase, ...extra }); }

/** A record still describes the server's file? (sha256 known: it must match; else the ETag, when the
 *  page could ask the server; offline, hashes are absent and a record is trusted.) */
function current(meta, f) {
  if (!meta || meta.size !== f.size) return false;
  if (f.sha256) return meta.sha256 === f.sha256;
  if (f.etag) return meta.etag === f.etag;
  return true;
}

export async function begin(model, id = null) {
  model = model?.toJs ? model.toJs({ dict_converter: Object.fromEntries }) : model;
  requestId = id;
  files.clear();
  clock.reset();
  if (!model.hashes && !model.source) {  // a page that did not pass them: ask the server (offline: none, records are trusted)
    try { model.hashes = (await (await fetch("/api/models")).json()).find((m) => m.id === model.id)?.hashes; } catch { /* offline */ }
  }
  const info = { id: model.id, name: model.name, kind: model.kind };
  let missing = 0;
  for (const [name, size] of Object.entries(model.files || {})) {
    const hash = model.hashes?.[name] || {};
    const f = { model: model.id, name, size: Number(size), sha256: hash.sha256 || null, etag: hash.etag || null, info,
                checked: new Set(), brought: !!model.source };  // checked: blocks read() checked this load
    const url = new URL(model.base + name, self.location.origin).href;
    files.set(url, f);
    const meta = await backend.getMeta(f.model, name);
    if (meta && !current(meta, f)) await backend.removeFile(f.model, name);  // the server's file changed
    const have = meta && current(meta, f) ? meta.written : 0;
    missing += f.size - have;
  }
  const { usage, quota } = await estimate();
  if (missing > quota - usage) {
    throw new StoreError("quota", `Not enough storage for ${model.name || model.id}: needs ${mb(missing)}, ${mb(Math.max(0, quota - usage))} available`);
  }
  load = { done: 0, total: missing, t0: performance.now() };
  return { missing, backend: backend.kind };
}

const entry = (url) => files.get(new URL(url, self.location.origin).href);
export function known(url) { return entry(url) !== undefined; }

export async function read(url, start = null, length = null) {
  const f = entry(url);
  if (!f) return network(url, start, length);
  const whole = start === null || start === undefined;
  const s = whole ? 0 : Number(start), n = whole ? f.size : Math.min(Number(length), f.size - s);
  if (whole || (f.size <= SMALL && !(f.brought && WEIGHTS.test(f.name)))) {  // small or whole: through streamFile, so it is stored and checked every time
    const out = new Uint8Array(f.size);
    await streamFile(url, (at, bytes) => out.set(bytes, at));
    return out.subarray(s, s + n);
  }
  const meta = await backend.getMeta(f.model, f.name);  // a header range of a big file
  if (!(meta?.complete || (meta && s + n <= meta.written))) return network(url, s, n);
  const file = await backend.open(f.model, f.name);
  let bytes;
  const digests = blockList(meta.blocks, f.size) ? meta.blocks.sha256 : [];  // an older record: none (streamFile checks)
  try { bytes = await readChecked(file, f.size, digests, f.checked, s, n); } finally { await file.close(); }
  if (bytes) return bytes;
  await discard(f);  // a damaged block: the file goes (streamFile fetches it again), this range comes from the network
  return network(url, s, n);
}

async function network(url, start, length) {
  if (start !== null && start !== undefined) return readRange(url, start, length, NO_STORE);
  const res = await source(url, NO_STORE);
  if (!res.ok) throw new StoreError("network", `${url}: HTTP ${res.status} ${res.statusText}`);
  return new Uint8Array(await res.arrayBuffer());
}

async function discard(f) {
  await backend.removeFile(f.model, f.name);  // corrupt (or changed): never served
  f.checked.clear();
}

export async function streamFile(url, sink) {
  const f = entry(url);
  for (let attempt = 0; ; attempt++) {
    const { ok, downloaded, digest } = await pass(url, f, sink);
    if (ok) return true;
    await discard(f);
    if (attempt > 0 || downloaded === f.size) {
      throw new StoreError("hash", `${url}: the downloaded file does not match its sha256 (${digest}, expected ${f.sha256})`);
    }
    console.warn(`store: ${url}: stored bytes failed the check (${digest}); downloading the file again`);
  }
}

/** Checked once (against the server's sha256 where it named one), with a digest per block: re-opened
 *  by the blocks alone (top of file). */
function verified(meta, f) {
  return !!(meta.complete && meta.written === f.size && meta.verified_at
    && (!f.sha256 || meta.digest === f.sha256)
    && blockList(meta.blocks, f.size) && meta.blocks.sha256.length === Math.ceil(f.size / BLOCK));
}

async function pass(url, f, sink) {
  let meta = await backend.getMeta(f.model, f.name);
  if (!current(meta, f)) meta = null;
  meta = meta || { url, size: f.size, sha256: f.sha256, etag: f.etag, digest: null, blocks: null, written: 0,
                   complete: false, verified_at: null, model: f.info };
  const trusted = verified(meta, f);
  // The whole-file hash, only where there is a digest to check it against (the server's sha256, or an
  // older record's, kept before block digests existed): without one it would check nothing.
  const expected = trusted ? null : f.sha256 || (meta.complete ? meta.digest : null);
  if (meta.complete && !trusted && !expected) return { ok: false, downloaded: 0, digest: "a stored file with nothing to check it against" };
  // Who reads, stores and hashes: on OPFS, a file of some size is the store's writer's (store_writer.js),
  // on a thread of its own: it reads the stored prefix back and takes its blocks' digests, and stores and
  // hashes what is downloaded, while this thread hands the bytes to the GPU. Elsewhere (the Cache API, a
  // small file, no nested worker) this thread reads the prefix back and checks it, and a download goes
  // through a writer on this thread.
  const thread = backend.kind === "opfs" && f.size >= THREAD_MIN;
  const writer = trusted ? (thread ? await threadWriter(false) : null) : await openWriter({ whole: !!expected, thread });
  let file = await backend.open(f.model, f.name);  // this thread's handle: the checks (and the stored prefix)
  let blocks = new BlockHashes(f.size, meta.written && blockList(meta.blocks, f.size) ? meta.blocks.sha256 : []);
  let pos = 0, downloaded = 0;
  const damaged = (why) => ({ ok: false, downloaded, digest: why });
  const whole = (at, n) => at % BLOCK === 0 && (n === BLOCK || at + n === f.size);  // bytes that are one whole block
  // The file passes to the writer: one access handle per file (OPFS), and the writer's reads and writes.
  const handOver = async () => {
    await file.close();
    file = null;
    await writer.open(backend.kind, f.model, f.name);
    clock.wrote(writer.thread ? "thread" : "here");
  };
  // Chunk buffers, reused (a fresh 4 MiB each time costs as much as a copy): one is filled again once
  // whoever holds its bytes is done with them (the writer's thread, or the digests started on them).
  const ring = Array.from({ length: RING }, () => ({ bytes: null, free: null }));
  let slot = 0;
  const buffer = async () => {
    const r = ring[slot];
    slot = (slot + 1) % RING;
    if (r.free) {
      const t = performance.now();
      await r.free;
      clock.add(writer ? "store" : "verify", t);  // waiting for the writer, or for block digests
    }
    r.bytes ??= new Uint8Array(CHUNK);
    return r;
  };
  // A chunk at `pos` (from the store, or downloaded: `write`) handed on to the GPU, then checked and
  // hashed: a whole block by the writer (its digest comes back), a block split by a resume gathered
  // here; downloaded bytes stored by the writer. The writer takes the buffer: the sink goes first.
  // Bytes the writer's thread read back come with `digest`, their block's (null: part of a block).
  const take = async (r, bytes, write, digest) => {
    if (writer?.failed) throw writer.failed;
    const n = bytes.length;  // (a writer on another thread takes the buffer: `bytes` is empty after put)
    let t = performance.now();
    const gpu = sink ? sink(pos, bytes) : undefined;  // a promise when the GPU is a window behind (weights.js)
    t = clock.add("upload", t, n);
    if (digest !== undefined) {
      if (digest) blocks.adopt(n, Promise.resolve(digest));
      else await blocks.push(bytes);
      t = clock.add("verify", t, n);
    } else if (!writer) {
      await blocks.push(bytes);
      r.free = blocks.idle();
      t = clock.add("verify", t, n);
    } else {
      const isWhole = !blocks.fill && whole(pos, n);
      if (!isWhole) await blocks.push(bytes);  // copied into the block it is part of
      const hashed = writer.put(pos, r, bytes, write, isWhole ? pos / BLOCK : -1);
      if (isWhole) blocks.adopt(n, hashed);
      t = clock.add(write ? "store" : "verify", t, n);
    }
    pos += n;
    if (gpu) { await gpu; clock.add("upload", t); }
    return n;
  };
  // The next `n` bytes of the stored prefix: {r, bytes, digest}. The writer's thread, once it has the
  // file, reads ahead of this one (as many chunks as the ring has buffers), each chunk coming back
  // with its block's digest; else this thread reads them (digest undefined: take() checks them).
  const ahead = [];
  let asked = 0;
  const readBack = async (n) => {
    if (file) {
      const r = await buffer(), t = performance.now();
      const bytes = await file.read(pos, n, r.bytes);
      clock.add("read", t, n);
      return { r, bytes, digest: undefined };
    }
    for (; ahead.length < RING && asked < meta.written; asked += CHUNK) {
      const r = await buffer(), at = asked, m = Math.min(CHUNK, meta.written - at);
      const got = writer.read(at, r, m, whole(at, m) ? at / BLOCK : -1).then((x) => ({ r, ...x }));
      got.catch(() => {});  // one still out when the pass ends early is no stray rejection
      ahead.push(got);
    }
    const t = performance.now(), got = await ahead.shift();
    clock.add("read", t, n);
    return got;
  };
  try {
    const onDisk = meta.written && file.size ? await file.size() : null;  // (Cache API: known only by reading)
    if (meta.written === 0) await file.truncate(0);  // leftovers of an older file must not trail the new one
    else if (onDisk !== null && (meta.complete ? onDisk !== f.size : onDisk < meta.written)) {
      return damaged(`${onDisk} bytes on disk, ${meta.written} recorded`);
    }
    if (writer?.thread) await handOver();
    while (pos < meta.written) {  // the stored prefix: read back, checked, handed on
      let got;
      try { got = await readBack(Math.min(CHUNK, meta.written - pos)); } catch (e) { return damaged(`unreadable: ${e.message}`); }
      await take(got.r, got.bytes, false, got.digest);
      if (blocks.bad >= 0) return damaged(`block ${blocks.bad} differs from its digest`);
      post("verify", { done: pos, total: f.size, file: f.name });
    }
    if (pos < f.size) {
      if (pos > 0) {  // a resume: the stored prefix checks out before anything is added to it
        const t = performance.now();
        await blocks.settle();
        clock.add("verify", t);
        if (blocks.bad >= 0) return damaged(`block ${blocks.bad} differs from its digest`);
      }
      const headers = pos > 0 ? { Range: `bytes=${pos}-`, ...(meta.etag ? { "If-Range": meta.etag } : {}) } : {};
      let t = performance.now();
      const res = await source(url, { ...NO_STORE, headers });  // our server, another origin, or a local file
      clock.add("fetch", t);
      if (!res.ok) throw new StoreError("network", `${url}: HTTP ${res.status} ${res.statusText}`);
      if (pos > 0 && res.status !== 206) {  // the file changed since (If-Range) or no Range support: restart
        Object.assign(meta, { written: 0, blocks: null });
        await backend.putMeta(f.model, f.name, meta);  // the record first: it never claims bytes that are gone
        await (file ?? writer).truncate(0);  // whoever holds the file
        pos = 0;
        await writer.reset();  // the whole-file hash starts again
        blocks = new BlockHashes(f.size);
      }
      meta.etag = res.headers.get("ETag") || meta.etag;
      if (file) await handOver();  // a writer on this thread gets it only now: this thread read the prefix with it
      // Downloaded bytes are gathered into whole blocks (the last one may be short), then handed on
      // and stored. The record names the prefix whose blocks have digests and are in the file; it
      // moves every META_EVERY bytes without waiting for the digests still under way.
      const commit = async (r, bytes) => {
        const n = await take(r, bytes, true);
        downloaded += n;
        const ready = Math.min(blocks.ready() * BLOCK, writer.durable);
        if (ready - meta.written >= META_EVERY) {
          const t1 = performance.now();
          meta.written = ready;
          meta.blocks = { block: BLOCK, sha256: blocks.sha256.slice(0, Math.floor(ready / BLOCK)) };
          await backend.putMeta(f.model, f.name, meta);
          clock.add("store", t1);
        }
        if (load) {
          load.done += n;
          const s = (performance.now() - load.t0) / 1000, rate = s > 0 ? load.done / s : 0;
          post("download", { done: load.done, total: load.total, bytes_per_s: Math.round(rate),
                             eta_s: rate ? Math.max(0, (load.total - load.done) / rate) : null, file: f.name });
        }
      };
      const reader = res.body.getReader();
      let fill = 0, cut = null, r = await buffer();
      for (;;) {
        let chunk;
        t = performance.now();
        try { chunk = await reader.read(); } catch (e) { cut = e; break; }  // what arrived is still stored
        clock.add("fetch", t, chunk.value ? chunk.value.length : 0);
        if (chunk.done) break;
        const value = chunk.value;
        for (let i = 0; i < value.length;) {
          const at = pos + fill, room = Math.min(BLOCK - (at % BLOCK), f.size - at);  // to the block's end
          if (room <= 0) throw new StoreError("network", `${url}: more than its ${f.size} bytes`);
          const n = Math.min(value.length - i, room);
          r.bytes.set(value.subarray(i, i + n), fill);
          fill += n; i += n;
          if (n === room) { await commit(r, r.bytes.subarray(0, fill)); fill = 0; r = await buffer(); }
        }
      }
      if (fill) await commit(r, r.bytes.subarray(0, fill));
      if (cut) throw cut;
    }
    if (pos !== f.size) throw new StoreError("network", `${url}: got ${pos} of ${f.size} bytes (connection cut?)`);
    let t = performance.now();
    await writer?.settle();
    const list = await blocks.settle();
    clock.add("verify", t);
    if (blocks.bad >= 0) return damaged(`block ${blocks.bad} differs from its digest`);
    if (trusted) return { ok: true, downloaded, digest: meta.digest };  // every block checked: nothing to record
    t = performance.now();
    const digest = await writer.finish();
    clock.add("verify", t);
    await writer.close();  // every byte in the store (the Cache API's last chunk too) before the record says so
    if (expected && digest !== expected) return { ok: false, downloaded, digest };
    if (downloaded && f.size > SMALL) post("verify", { done: f.size, total: f.size, file: f.name });  // checked
    Object.assign(meta, { written: f.size, complete: true, digest, blocks: list, verified_at: new Date().toISOString() });
    await backend.putMeta(f.model, f.name, meta);
    return { ok: true, downloaded, digest };
  } catch (e) {
    if (e.name === "QuotaExceededError") {
      await writer?.close().catch(() => {});
      await file?.close().catch(() => {});
      await backend.removeFile(f.model, f.name);  // nothing half-written stays behind
      throw new StoreError("quota", `Storage is full: ${f.name} (${mb(f.size)}) did not fit; the partial file was deleted`);
    }
    await keep(f, meta, writer, blocks, pos);
    if (e instanceof StoreError) throw e;
    throw new StoreError("network", `${url}: ${e.name}: ${e.message} (the ${mb(meta.written)} stored so far are kept for a resume)`);
  } finally {
    await file?.close().catch(() => {});
    await writer?.close().catch(() => {});
  }
}

/** After a failed download: the record names what did land (the writer's writes done), for a resume —
 *  whole blocks with their digests, and a partial last one only once flushed. */
async function keep(f, meta, writer, blocks, pos) {
  if (!writer || meta.complete) return;
  await writer.settle().catch(() => {});
  await blocks.settle().catch(() => {});
  let have = Math.min(pos, writer.durable);
  const digested = blocks.ready();
  if (Math.floor(have / BLOCK) > digested) have = digested * BLOCK;  // a block without its digest is not kept
  if (have <= meta.written) return;
  if (have % BLOCK) await writer.flush().catch(() => {});  // a partial block has no digest: on disk before the record names it
  meta.written = have;
  meta.blocks = { block: BLOCK, sha256: blocks.sha256.slice(0, Math.floor(have / BLOCK)) };
  await backend.putMeta(f.model, f.name, meta).catch(() => {});
}

export async function estimate() {
  const { usage = 0, quota = 0 } = (await navigator.storage?.estimate?.()) || {};
  return { usage, quota };
}

export async function persist() {
  const persisted = navigator.storage?.persist ? await navigator.storage.persist() : false;
  return persisted;
}

export async function persisted() {
  return navigator.storage?.persisted ? await navigator.storage.persisted() : false;
}

/** [{model:{id,name,kind}, files:[{name,size,written,complete}], bytes}] */
export async function list() {
  return (await backend.models()).map(({ id, files: metas }) => ({
    model: metas[0]?.model || { id, name: id, kind: null },
    files: metas.map((m) => ({ name: m.name, size: m.size, written: m.written, complete: !!m.complete })),
    bytes: metas.reduce((s, m) => s + (m.written || 0), 0),
  }));
}

export async function remove(modelId) {
  await backend.removeModel(String(modelId));
  for (const [url, f] of files) if (f.model === modelId) files.delete(url);
}

/** The stored model holding exactly the bytes of `model` (one the user brought), or null: store_twin.js. */
export function twin(model) {
  return findTwin(backend, model?.toJs ? model.toJs({ dict_converter: Object.fromEntries }) : model);
}

/** The answer to the page's store_* messages: {models, usage, quota, persisted, backend}, the
 *  Storage panel's one source. The browser's usage is an estimate (it has been seen below the
 *  stored files' bytes): the stored models' bytes are used at least. */
export async function report() {
  const models = await list();
  const { usage, quota } = await estimate();
  const stored = models.reduce((sum, m) => sum + m.bytes, 0);
  return { models, usage: Math.max(usage, stored), quota, persisted: await persisted(), backend: backend.kind };
}
