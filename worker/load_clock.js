// Where a model load's time goes: seconds this thread spent in each phase and the bytes each moved,
// from store.begin() to the `loaded` event (py_engine/web/worker.py reads report() into it;
// benchmarks/dawn.py prints it). The phases overlap in wall time (block digests run off this thread,
// the network fills its buffers while this thread works), so they need not add up to the load's time.
//
//   fetch   waiting for network bytes (the download's body; header ranges)
//   read    reading stored bytes back (OPFS / Cache API)
//   verify  hashing on this thread and waiting for block digests
//   store   writing bytes and records to the store
//   upload  handing bytes to the GPU (queue.writeBuffer)

export const PHASES = ["fetch", "read", "verify", "store", "upload"];
let phases = fresh();
let weights = { bytes: 0, ms: 0 };  // loadWeights calls: bytes placed in GPU buffers, wall time

function fresh() { return Object.fromEntries(PHASES.map((p) => [p, { s: 0, bytes: 0 }])); }

export function reset() { phases = fresh(); weights = { bytes: 0, ms: 0 }; }

export function loaded(bytes, ms) { weights.bytes += bytes; weights.ms += ms; }

/** Adds the time since t0 (a performance.now()) to `phase`; returns now, the next phase's t0. */
export function add(phase, t0, bytes = 0) {
  const now = performance.now();
  phases[phase].s += (now - t0) / 1000;
  phases[phase].bytes += bytes;
  return now;
}

/** {bytes, ms, phases: {phase: {s, bytes}}} so far (seconds to the millisecond). */
export function report() {
  const out = Object.fromEntries(PHASES.map((p) => [p, { s: Math.round(phases[p].s * 1000) / 1000, bytes: phases[p].bytes }]));
  return { bytes: weights.bytes, ms: Math.round(weights.ms), phases: out };
}
