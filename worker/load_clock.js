// Where a model load's time goes: seconds this thread (the worker's) spent in each phase and the bytes
// each moved, from store.begin() to the `loaded` event (py_engine/web/worker.py reads report() into it;
// benchmarks/dawn.py prints it). A download is a pipeline: the network fills its buffers, the store's
// writer (store_writer.js, a thread of its own) writes and hashes a block while this thread takes the
// next one and hands it to the GPU, so the phases overlap in wall time and need not add up.
//
//   fetch   waiting for network bytes (the download's body; header ranges)
//   read    reading stored bytes back (OPFS / Cache API), or waiting for the writer's thread to read
//           them (with their blocks' digests: OPFS)
//   verify  checking stored blocks read back (their digests), and waiting for the last digests and
//           the whole-file hash at the end of a download
//   store   handing downloaded blocks to the writer and waiting for it when all RING buffers are out
//           (the writer's own writes and hashes are its thread's time), and the records
//   upload  handing bytes to the GPU (queue.writeBuffer)
//
// `writer`: where the store's writer had the file (a download written and hashed, or on OPFS a stored
// file read back and its blocks' digests taken), "thread" (the writer's worker) or "here"; absent when
// only this thread read the store.

export const PHASES = ["fetch", "read", "verify", "store", "upload"];
let phases = fresh();
let weights = { bytes: 0, ms: 0 };  // loadWeights calls: bytes placed in GPU buffers, wall time
let writer = null;

function fresh() { return Object.fromEntries(PHASES.map((p) => [p, { s: 0, bytes: 0 }])); }

export function reset() { phases = fresh(); weights = { bytes: 0, ms: 0 }; writer = null; }

/** Where the store's writer had the file: "thread" or "here". */
export function wrote(where) { writer = where; }

export function loaded(bytes, ms) { weights.bytes += bytes; weights.ms += ms; }

/** Adds the time since t0 (a performance.now()) to `phase`; returns now, the next phase's t0. */
export function add(phase, t0, bytes = 0) {
  const now = performance.now();
  phases[phase].s += (now - t0) / 1000;
  phases[phase].bytes += bytes;
  return now;
}

/** {bytes, ms, phases: {phase: {s, bytes}}, writer?} so far (seconds to the millisecond). */
export function report() {
  const out = Object.fromEntries(PHASES.map((p) => [p, { s: Math.round(phases[p].s * 1000) / 1000, bytes: phases[p].bytes }]));
  return { bytes: weights.bytes, ms: Math.round(weights.ms), phases: out, ...(writer ? { writer } : {}) };
}
