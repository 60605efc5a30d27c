// Read-backs that a submit sets aside (op 2 of gpu_submit.js) and Python fetches later, so that
// the engine can encode the next forward while the GPU still runs this one. All the reads of one
// submit (a decode group's tokens) share one MAP_READ staging buffer, each copied to a 4-byte
// aligned place of it; it is mapped once, right after its submit on the single-pass path (or by
// fetchRead once WebKit's grouped chain has run it), and one fetchRead hands all their bytes to
// Python: one await a submit, not one a token. The group is named by its first read's id.

import { check, describe, device, drain, enqueue, get, buffers, gpuError, staging, submitState } from "./gpu_device.js";

const groups = new Map();  // first read id (chosen by Python) -> {stage, span, parts: [{at, skip, size}], mapping}
const ABANDONED = 64;      // groups never fetched (a cancelled generation) beyond this are dropped

function takeStaging(span) {
  const k = staging.findIndex((s) => s.size >= span);
  if (k >= 0) return staging.splice(k, 1)[0];
  return device.createBuffer({ size: Math.max(span, 256), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: "readback" });
}

function giveBackStaging(stage) {
  staging.push(stage);
  if (staging.length > 8) staging.shift().destroy();
}

// The reads of op list `a` ([2, src, offset, size, readId, 0] each): their group (null: none) and
// each one's copy [source, source offset, staging offset, bytes], in op order, for the caller to encode.
export function startReads(a) {
  let parts = null, copies = null, span = 0, first = 0;
  for (let i = 0; i < a.length; i += 6) {
    if (a[i] !== 2) continue;
    const source = get(buffers, a[i + 1], "buffer"), offset = a[i + 2], size = a[i + 3];
    if (offset < 0 || size <= 0 || offset + size > source.size) {
      throw gpuError(`read: ${size} bytes at ${offset} outside buffer ${source.label} (${source.size} bytes)`);
    }
    const lo = offset - (offset % 4);
    const bytes = Math.min(source.size, Math.ceil((offset + size) / 4) * 4) - lo;
    if (parts === null) { parts = []; copies = []; first = a[i + 4]; }
    parts.push({ at: span, skip: offset - lo, size });
    copies.push([source, lo, span, bytes]);
    span += bytes;
  }
  if (parts === null) return null;
  const group = { stage: takeStaging(span), span, parts, mapping: null, copies };
  groups.set(first, group);
  if (groups.size > ABANDONED) dropOldest();
  return group;
}

function dropOldest() {
  const [oldest, old] = groups.entries().next().value;
  groups.delete(oldest);
  const release = () => old.stage.destroy();
  if (old.mapping) old.mapping.then(release, release);
  else if (submitState.chain) enqueue(release);  // grouped: its copies may still be waiting in the chain
  else release();
}

// Map right after the submit that carries the group's copies (single-pass): an implementation
// that waits for all work queued at the call would make a later map wait for later submits too.
export function mapReads(group) {
  group.mapping = group.stage.mapAsync(GPUMapMode.READ, 0, group.span);
}

// The bytes of every read of the group named by readId, one after the other (each its own size).
export async function fetchRead(readId) {
  check();
  const g = groups.get(readId);
  if (!g) throw gpuError(`fetchRead: no pending read ${readId}`);
  groups.delete(readId);
  if (submitState.chain) { await drain(); check(); }
  try {
    await (g.mapping || g.stage.mapAsync(GPUMapMode.READ, 0, g.span));
  } catch (e) {
    g.stage.destroy();
    check();
    throw gpuError(`fetchRead: ${describe(e)}`);
  }
  const mapped = new Uint8Array(g.stage.getMappedRange(0, g.span));
  let total = 0;
  for (const p of g.parts) total += p.size;
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of g.parts) { out.set(mapped.subarray(p.at + p.skip, p.at + p.skip + p.size), at); at += p.size; }
  g.stage.unmap();
  giveBackStaging(g.stage);
  return out;
}

// A new device: reads set aside on the old one are never fetched (their mappings fail quietly).
export function forgetReads() {
  for (const g of groups.values()) if (g.mapping) g.mapping.catch(() => {});
  groups.clear();
}

let ownIds = 0;  // readBuffer's reads take negative ids: Python's are positive

// One read submitted on its own and awaited (readBuffer): after all work queued before it.
export function readNow(sourceId, offset, size) {
  const readId = --ownIds;
  const g = startReads([2, sourceId, offset, size, readId, 0]);
  const [source, lo, at, bytes] = g.copies[0];
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(source, lo, g.stage, at, bytes);
  device.queue.submit([encoder.finish()]);
  mapReads(g);
  return fetchRead(readId);
}
