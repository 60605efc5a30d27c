// The weight loader: a plan of file ranges -> GPU buffers, fetched with HTTP Range requests and
// written with queue.writeBuffer, never through Python (its wasm heap would have to hold the
// weights). gpu.js re-exports loadWeights, so Python calls it as wisp_gpu.loadWeights.
//
// Files of the model being loaded (store.begin) go through the weight store: each is streamed once,
// in order — its stored prefix read back from OPFS, the rest downloaded and stored — and every chunk
// is written to the GPU pieces it covers on the way (one pass, no second read). Other URLs (tests
// that load pieces of arbitrary files) are read with Range requests as before.
//
//   loadWeights(plan, onProgress) -> Promise<{bytes, reads, ms}>
//     plan: [{buffer, dst, url, start, length}] or [[buffer, dst, url, start, length]]
//     onProgress(done, total) in bytes.
//   cancelWeights()   every loadWeights under way stops at its next chunk (rejects: "cancelled"); a
//                     download keeps what it stored, for a resume
//
// Backpressure on the GPU: every UPLOAD_WINDOW bytes written, the stream waits until the queue has
// done the writes of two windows before (queue.onSubmittedWorkDone), so at most three windows
// (192 MiB) of written bytes wait in the browser's (or Dawn's) staging memory for the GPU.

import { buffers, check, describe, device, get, gpuError } from "./gpu_device.js";
import * as store from "./store.js";
import * as clock from "./load_clock.js";

export const READ_BYTES = 16 << 20;  // one Range request reads at most this much
const READ_GAP = 256 << 10;          // neighbouring pieces this close share one request
const IN_FLIGHT = 3;                 // requests fetched concurrently
const UPLOAD_WINDOW = 64 << 20;      // bytes written to the queue between waits for it (see above)
let generation = 0;                  // cancelWeights() moves it: loads of an older one stop

export function cancelWeights() { generation++; }

function piecesOf(plan) {
  const out = [];
  for (const p of plan) {
    const q = Array.isArray(p) ? { buffer: p[0], dst: p[1], url: p[2], start: p[3], length: p[4] } : p;
    const buffer = get(buffers, q.buffer, "buffer");
    const dst = Number(q.dst), start = Number(q.start), length = Number(q.length);
    if (!(length >= 0) || dst < 0 || dst + length > buffer.size) {
      throw gpuError(`loadWeights: piece of ${length} bytes at ${dst} does not fit buffer ${buffer.label || q.buffer} (${buffer.size} bytes)`);
    }
    if (length > 0) out.push({ id: q.buffer, buffer, dst, url: String(q.url), start, length });
  }
  return out;
}

// Requests: per file, pieces by start; small neighbours merge into one read of up to READ_BYTES;
// a larger piece is read in READ_BYTES steps (piece-relative, so aligned pieces stay aligned).
function planReads(pieces) {
  const byUrl = new Map();
  for (const p of pieces) {
    if (!byUrl.has(p.url)) byUrl.set(p.url, []);
    byUrl.get(p.url).push(p);
  }
  const reads = [];
  for (const [url, list] of byUrl) {
    list.sort((a, b) => a.start - b.start);
    let cur = null;
    for (const p of list) {
      const end = p.start + p.length;
      if (p.length > READ_BYTES) {
        cur = null;
        for (let o = 0; o < p.length; o += READ_BYTES) {
          const len = Math.min(READ_BYTES, p.length - o);
          reads.push({ url, start: p.start + o, end: p.start + o + len, parts: [{ p, from: o, len }] });
        }
        continue;
      }
      if (cur && p.start - cur.end <= READ_GAP && Math.max(end, cur.end) - cur.start <= READ_BYTES) {
        cur.end = Math.max(cur.end, end);
        cur.parts.push({ p, from: 0, len: p.length });
      } else {
        cur = { url, start: p.start, end, parts: [{ p, from: 0, len: p.length }] };
        reads.push(cur);
      }
    }
  }
  return reads;
}

async function fetchRange(url, start, end) {
  const res = await fetch(url, { headers: { Range: `bytes=${start}-${end - 1}` } });
  if (!res.ok) throw gpuError(`loadWeights: ${url}: HTTP ${res.status} for bytes ${start}-${end - 1}`);
  const body = new Uint8Array(await res.arrayBuffer());
  if (res.status !== 206 && !(start === 0 && body.byteLength === end)) {
    throw gpuError(`loadWeights: ${url}: the server ignored the Range request (HTTP ${res.status})`);
  }
  if (body.byteLength !== end - start) {
    throw gpuError(`loadWeights: ${url}: got ${body.byteLength} bytes for bytes ${start}-${end - 1} (file truncated?)`);
  }
  return body;
}

// Writes `len` bytes of `src` (from `at`) to `dst` in buffer `b`: the 4-byte-aligned middle
// straight to the GPU; bytes of words the piece covers only in part are assembled in JS (`words`,
// per buffer) and written once all pieces landed. Bytes of such a word that no piece covers
// become 0 (as in a fresh buffer).
function place(b, dst, src, at, len, words) {
  const a = Math.min(dst + len, Math.ceil(dst / 4) * 4);
  const z = Math.max(a, Math.floor((dst + len) / 4) * 4);
  if (z > a) device.queue.writeBuffer(b.buffer, a, src, at + (a - dst), z - a);
  const patch = (from, to) => {
    for (let x = from; x < to; x++) {
      const w = x & ~3;
      let word = words.get(b.id)?.get(w);
      if (!word) {
        if (!words.has(b.id)) words.set(b.id, new Map());
        word = new Uint8Array(4);
        words.get(b.id).set(w, word);
      }
      word[x - w] = src[at + (x - dst)];
    }
  };
  patch(dst, a);
  patch(z, dst + len);
}

function flushWords(words) {
  for (const [bid, map] of words) {
    const buffer = buffers.get(bid);
    const offsets = [...map.keys()].sort((x, y) => x - y);
    for (let i = 0; i < offsets.length;) {
      let j = i;
      while (j + 1 < offsets.length && offsets[j + 1] === offsets[j] + 4) j++;
      const run = new Uint8Array((j - i + 1) * 4);
      for (let k = i; k <= j; k++) run.set(map.get(offsets[k]), (k - i) * 4);
      device.queue.writeBuffer(buffer, offsets[i], run);
      i = j + 1;
    }
  }
}

// A sink for store.streamFile: the parts of `list` (one file's pieces, by start) that a chunk at
// file offset `at` covers go to their buffers. Returns a promise to wait on once a window is full.
function sinkFor(list, words, landed, live, window) {
  let first = 0, last = 0;
  return (at, bytes) => {
    live();
    const end = at + bytes.length;
    if (at < last) first = 0;  // the store streams the file again (a damaged copy was dropped): from the top
    last = at;
    let n = 0;
    while (first < list.length && list[first].start + list[first].length <= at) first++;
    for (let i = first; i < list.length && list[i].start < end; i++) {
      const p = list[i];
      const a = Math.max(at, p.start), z = Math.min(end, p.start + p.length);
      if (z <= a) continue;
      place({ id: p.id, buffer: p.buffer }, p.dst + (a - p.start), bytes, a - at, z - a, words);
      n += z - a;
    }
    check();
    if (n) landed(n);
    return window(n);
  };
}

// The GPU's pace (see the top): written bytes counted; a full window returns the wait for the one
// two windows back (the slack lets a host that reports completion late not stall a GPU that keeps up).
function uploadWindow() {
  let bytes = 0;
  const marks = [];
  return (n) => {
    bytes += n;
    if (bytes < UPLOAD_WINDOW) return undefined;
    bytes = 0;
    marks.push(device.queue.onSubmittedWorkDone());
    return marks.length > 2 ? marks.shift() : undefined;
  };
}

export async function loadWeights(plan, onProgress) {
  check();
  const t0 = performance.now(), mine = generation;
  const live = () => { if (generation !== mine) throw gpuError("loadWeights: cancelled"); };
  const window = uploadWindow();
  const all = piecesOf(plan);
  const total = all.reduce((s, p) => s + p.length, 0);
  const words = new Map();  // buffer id -> Map(word offset -> 4 bytes)
  let done = 0, next = 0;
  const stored = new Map();  // url -> pieces, for files of the store's current model
  for (const p of all) {
    if (!store.known(p.url)) continue;
    if (!stored.has(p.url)) stored.set(p.url, []);
    stored.get(p.url).push(p);
  }
  try {
    for (const [url, list] of stored) {
      list.sort((a, b) => a.start - b.start);
      await store.streamFile(url, sinkFor(list, words, (n) => { done += n; if (onProgress) onProgress(done, total); }, live, window));
    }
  } catch (e) {
    throw e.name === "GpuError" || e instanceof store.StoreError ? e : gpuError(`loadWeights: ${describe(e)}`);
  }
  const pieces = all.filter((p) => !stored.has(p.url));
  const reads = planReads(pieces);
  const inflight = [];
  const start = () => {
    const r = reads[next++];
    inflight.push(fetchRange(r.url, r.start, r.end).then((body) => ({ r, body })));
  };
  try {
    while (next < reads.length && inflight.length < IN_FLIGHT) start();
    while (inflight.length) {
      const { r, body } = await inflight.shift();
      if (next < reads.length) start();
      check();
      live();
      for (const { p, from, len } of r.parts) {
        place({ id: p.id, buffer: p.buffer }, p.dst + from, body, p.start + from - r.start, len, words);
        done += len;
      }
      if (onProgress) onProgress(done, total);
    }
  } catch (e) {
    await Promise.allSettled(inflight);  // no stray rejections from requests still under way
    throw e.name === "GpuError" ? e : gpuError(`loadWeights: ${describe(e)}`);
  }
  flushWords(words);
  check();
  const ms = performance.now() - t0;
  clock.loaded(total, ms);
  return { bytes: total, reads: reads.length, files: stored.size, ms };
}
