// Read-backs that a submit sets aside (op 2 of gpu_submit.js) and Python fetches later, so that
// the engine can encode the next forward while the GPU still runs this one: each read copies into
// a MAP_READ staging buffer of its own, mapped right after its submit on the single-pass path (or
// by fetchRead once WebKit's grouped chain has run it), and the bytes go back to Python on fetch.

import { check, describe, device, drain, enqueue, gpuError, staging, submitState } from "./gpu_device.js";

const reads = new Map();  // read id (chosen by Python) -> {stage, lo, offset, size, span, mapping}
const ABANDONED = 64;     // reads never fetched (a cancelled generation) beyond this are dropped

function takeStaging(span) {
  const k = staging.findIndex((s) => s.size >= span);
  if (k >= 0) return staging.splice(k, 1)[0];
  return device.createBuffer({ size: Math.max(span, 256), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: "readback" });
}

function giveBackStaging(stage) {
  staging.push(stage);
  if (staging.length > 8) staging.shift().destroy();
}

// The read's copy source range (4-byte aligned) and staging buffer; the caller encodes the copy.
export function startRead(source, offset, size, readId) {
  if (offset < 0 || size <= 0 || offset + size > source.size) {
    throw gpuError(`read: ${size} bytes at ${offset} outside buffer ${source.label} (${source.size} bytes)`);
  }
  const lo = offset - (offset % 4);
  const span = Math.min(source.size, Math.ceil((offset + size) / 4) * 4) - lo;
  const r = { source, lo, offset, size, span, stage: takeStaging(span), mapping: null };
  reads.set(readId, r);
  if (reads.size > ABANDONED) {
    const [oldest, old] = reads.entries().next().value;
    reads.delete(oldest);
    const release = () => old.stage.destroy();
    if (old.mapping) old.mapping.then(release, release);
    else if (submitState.chain) enqueue(release);  // grouped: its copy may still be waiting in the chain
    else release();
  }
  return r;
}

export async function fetchRead(readId) {
  check();
  const r = reads.get(readId);
  if (!r) throw gpuError(`fetchRead: no pending read ${readId}`);
  reads.delete(readId);
  if (submitState.chain) { await drain(); check(); }
  try {
    await (r.mapping || r.stage.mapAsync(GPUMapMode.READ, 0, r.span));
  } catch (e) {
    r.stage.destroy();
    check();
    throw gpuError(`fetchRead: ${describe(e)}`);
  }
  const out = new Uint8Array(r.stage.getMappedRange(0, r.span).slice(r.offset - r.lo, r.offset - r.lo + r.size));
  r.stage.unmap();
  giveBackStaging(r.stage);
  return out;
}

// A new device: reads set aside on the old one are never fetched (their mappings fail quietly).
export function forgetReads() {
  for (const r of reads.values()) if (r.mapping) r.mapping.catch(() => {});
  reads.clear();
}

let ownIds = 0;  // readBuffer's reads take negative ids: Python's are positive

// One read submitted on its own and awaited (readBuffer): after all work queued before it.
export function readNow(source, offset, size) {
  const readId = --ownIds;
  const r = startRead(source, offset, size, readId);
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(r.source, r.lo, r.stage, 0, r.span);
  device.queue.submit([encoder.finish()]);
  r.mapping = r.stage.mapAsync(GPUMapMode.READ, 0, r.span);
  return fetchRead(readId);
}
