// WebKit's submit probe, the page's half: which submit group this device can
// take, calibrated on the device itself — no table of known devices.
//
// Batched submits have hard-crashed WebKit's GPU process on some iPhones, and the page dies with
// it, so the only memory that survives is localStorage (the page's: workers have none). Before a
// group size is tried its name is written as a breadcrumb; a size is promoted to known-good only
// after the worker's dependent chain (py_engine/web/submit_probe.py) gives byte-identical output
// batched, one by one and against the CPU reference. A breadcrumb still set on the next start
// means that size took the page down: the ceiling steps below it and the crash is recorded. The
// model's first real forward under the chosen size holds the breadcrumb too (guardFirstForward),
// until its first token: closing the tab in those seconds counts as a crash (one step down).
//
//   calibrateSubmit({probe, storage, userAgent, hook}) -> {group, reason, record, key, tried}
//     probe(size, steps): the worker's answer for one size ("all" | N) {ok, detail, ms, adapter}
//     group:       "all" | 64 | 8 | 1, for the load's options.probe
//
// Record (localStorage[RECORD_PREFIX + hash of user agent and adapter info]):
//   {version, device: {userAgent, adapter}, ceiling, good, breadcrumb, lowered,
//    crashes: [{size, at}], mismatches: [{size, detail, at}]}
//   ceiling: the largest size still allowed; good: the size that last passed (null: none yet);
//   breadcrumb: the size being tried right now (null: none); lowered: what last lowered the
//   ceiling, {cause: "crash" | "mismatch", size, at} (null: nothing).

export const LADDER = ["all", 64, 8, 1];  // "all": one command buffer per forward (the single pass)
export const PROBE_STEPS = 256;           // dispatches per chain: 64 makes 4 command buffers of it
// The floor runs before every WebKit load (it names the adapter): one command buffer per dispatch,
// each awaited, batched or not, so a shorter chain checks it as well and costs a quarter.
export const FLOOR_STEPS = 64;
export const RECORD_PREFIX = "wisp.submit-probe.v1.";
const HISTORY = 8;                        // crash / mismatch entries kept per device

/** localStorage if this page can write it, else null (private modes, sandboxed frames): without
 *  it a crash leaves no memory and a probe could take the page down on every reload. */
export function probeStorage(scope = globalThis) {
  try {
    const storage = scope.localStorage;
    const test = `${RECORD_PREFIX}test`;
    storage.setItem(test, "1");
    storage.removeItem(test);
    return storage;
  } catch {
    return null;
  }
}

/** The record's key: the user agent and the adapter's info, hashed (FNV-1a) to a short name. */
export function deviceKey(userAgent, adapter = {}) {
  const identity = JSON.stringify([String(userAgent || ""), ...["vendor", "architecture", "name", "description"]
    .map((k) => String(adapter[k] || ""))]);
  let hash = 0x811c9dc5;
  for (let i = 0; i < identity.length; i++) hash = Math.imul(hash ^ identity.charCodeAt(i), 0x01000193) >>> 0;
  return RECORD_PREFIX + hash.toString(16).padStart(8, "0");
}

const rank = (size) => LADDER.indexOf(size);
/** The next smaller size, or null below the floor (1). */
export const stepDown = (size) => (rank(size) >= 0 && rank(size) < LADDER.length - 1 ? LADDER[rank(size) + 1] : null);
/** Is size allowed under ceiling (no larger)? */
export const within = (size, ceiling) => rank(size) >= 0 && rank(size) >= rank(ceiling);
const label = (size) => (size === "all" ? "one command buffer per forward"
  : size === 1 ? "one dispatch per command buffer" : `${size} dispatches per command buffer`);

export function freshRecord(userAgent, adapter) {
  return { version: 1, device: { userAgent, adapter }, ceiling: LADDER[0], good: null, breadcrumb: null,
           lowered: null, crashes: [], mismatches: [] };
}

/** The stored record, or a fresh one when none is stored or it cannot be read (never throws). */
export function readRecord(storage, key, userAgent, adapter) {
  let record = null;
  try { record = JSON.parse(storage.getItem(key)); } catch { record = null; }
  const sane = record && record.version === 1 && rank(record.ceiling) >= 0 && Array.isArray(record.crashes)
    && Array.isArray(record.mismatches) && (record.good === null || rank(record.good) >= 0)
    && (record.breadcrumb === null || rank(record.breadcrumb) >= 0)
    && (record.lowered == null || typeof record.lowered === "object");
  return sane ? { ...record, lowered: record.lowered ?? null } : freshRecord(userAgent, adapter);
}

export function writeRecord(storage, key, record) {
  record.crashes = record.crashes.slice(-HISTORY);
  record.mismatches = record.mismatches.slice(-HISTORY);
  storage.setItem(key, JSON.stringify(record));  // synchronous: on disk before the probe can crash the page
}

/** A breadcrumb left by a page that died mid-probe: that size crashed it. Lowers the ceiling below
 *  it (the floor stays 1: nothing is safer), records the crash and clears the breadcrumb. */
export function recoverFromCrash(record, now) {
  const crashed = record.breadcrumb;
  if (crashed === null) return false;
  const at = now();
  record.crashes.push({ size: crashed, at });
  lowerCeiling(record, crashed, "crash", at);
  record.breadcrumb = null;
  return true;
}

/** Size failed (crash or mismatch): the ceiling goes below it, never up (the floor stays 1). */
export function lowerCeiling(record, failed, cause, at) {
  const below = stepDown(failed) ?? failed;
  if (rank(below) > rank(record.ceiling)) {
    record.ceiling = below;
    record.lowered = { cause, size: failed, at };
  }
  if (record.good !== null && !within(record.good, record.ceiling)) record.good = null;
}

/** Why the ceiling sits where it does, for the strategy's reason ("" when nothing lowered it). */
export function ceilingNote(record) {
  if (record.ceiling === LADDER[0]) return "";
  const why = record.lowered ? ` after a ${record.lowered.cause} at ${record.lowered.size}` : "";
  return `ceiling ${record.ceiling}${why}`;
}

function result(group, how, record, key, tried) {
  const note = ceilingNote(record);
  return { group, record, key, tried, reason: `${how}: ${label(group)}${note ? `; ${note}` : ""}` };
}

/** The model's first forward under the calibrated size. The probe's chain is small, and WebKit has
 *  crashed at the first real prefill under a size its chain took (command buffers held in flight
 *  grow with the model), so the size stays a breadcrumb from the first generation's start to its
 *  first token (or end): a page that dies in between steps down on its next start, as in a probe.
 *  Returns release(), which clears the breadcrumb once. */
export function guardFirstForward(storage, key, size, device = {}) {
  const record = readRecord(storage, key, device.userAgent, device.adapter);
  record.breadcrumb = size;
  writeRecord(storage, key, record);
  let held = true;
  return () => {
    if (!held) return;
    held = false;
    const now = readRecord(storage, key, device.userAgent, device.adapter);
    if (now.breadcrumb === size) { now.breadcrumb = null; writeRecord(storage, key, now); }
  };
}

/** Calibrate the submit group (see the header). The first probe, one dispatch per command buffer,
 *  is always safe: it names the adapter (the record's key) and is the floor's own check. */
export async function calibrateSubmit({ probe, storage, userAgent = globalThis.navigator?.userAgent || "",
                                        hook = globalThis.__wispProbeHook, now = () => new Date().toISOString() }) {
  const tried = [1];
  const floor = await probe(1, FLOOR_STEPS);
  const key = deviceKey(userAgent, floor.adapter);
  const record = readRecord(storage, key, userAgent, floor.adapter);
  if (recoverFromCrash(record, now)) writeRecord(storage, key, record);
  if (!floor.ok) {  // wrong even one dispatch at a time: nothing is safer than the floor
    const at = now();
    record.mismatches.push({ size: 1, detail: floor.detail, at });
    record.ceiling = 1;
    record.lowered = { cause: "mismatch", size: 1, at };
    record.good = null;
    writeRecord(storage, key, record);
    return result(1, `probed on this device, where even the floor disagreed (${floor.detail})`, record, key, tried);
  }
  if (record.good !== null && within(record.good, record.ceiling)) {
    return result(record.good, "probed on this device earlier", record, key, tried);
  }
  for (let size = record.ceiling; size !== null; size = stepDown(size)) {
    let answer = floor;  // size 1 is what the floor probe just checked
    if (size !== 1) {
      record.breadcrumb = size;
      writeRecord(storage, key, record);
      if (typeof hook === "function") await hook(size);  // tests hold here to close the page: a "crash"
      tried.push(size);
      try {
        answer = await probe(size, PROBE_STEPS);
      } catch (err) {
        // The worker died (kind "crash"): keep the breadcrumb, the next start counts it as a crash.
        // Anything else (terminated by the page, a bad request) taught nothing about this size.
        if (err?.kind !== "crash") { record.breadcrumb = null; writeRecord(storage, key, record); }
        throw err;
      }
    }
    record.breadcrumb = null;
    if (answer.ok) {
      record.good = size;
      writeRecord(storage, key, record);
      return result(size, "probed on this device", record, key, tried);
    }
    const at = now();
    record.mismatches.push({ size, detail: answer.detail, at });
    lowerCeiling(record, size, "mismatch", at);
    writeRecord(storage, key, record);
  }
  return result(1, "probed on this device", record, key, tried);  // not reached: size 1 is the floor, ok
}

/** A WispClient's calibration: once per worker (its device), and only on WebKit without a
 *  ?group= / options.group. probe(size, steps): the client's probe request. */
export class SubmitCalibration {
  constructor(probe) { this.probe = probe; this.reset(); }

  reset() { this.answer = null; this.firstForward = null; }

  /** options.probe for a load or a device check: {group, reason, ceiling}, {error} when the probe
   *  could not run (the engine's WebKit default then), or null when no probe applies (desktop
   *  engines never probe; without localStorage a crash would leave no memory). */
  options(options) {
    const overridden = options.group != null && String(options.group).trim() !== "";
    const storage = options.platform?.webkit && !overridden ? probeStorage() : null;
    if (!storage) return Promise.resolve(null);
    if (!this.answer) {
      const answer = calibrateSubmit({ storage, probe: this.probe }).then(({ group, reason, record, key }) => {
        this.firstForward = () => guardFirstForward(storage, key, group, record.device);
        return { group, reason, ceiling: record.ceiling };
      });
      this.answer = answer;
      answer.catch(() => { if (this.answer === answer) this.answer = null; });
    }
    return this.answer.catch((err) => {
      // the load would fail the same way (no WebGPU), or the worker is gone: the load reports it
      if (["no-webgpu", "crash", "terminated"].includes(err.kind)) throw err;
      return { error: err.message };
    });
  }

  /** The release() of the first generation after calibrating (guardFirstForward), else a no-op. */
  guardFirstForward() {
    const guard = this.firstForward;
    this.firstForward = null;
    return guard ? guard() : () => {};
  }
}
