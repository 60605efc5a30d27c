// The worker's one GPU device and what hangs off it: the id tables (Python holds the ids), the
// readback staging pool and the error bookkeeping. A module of its own so that gpu.js (the API
// Python calls) and weights.js (the weight loader) share this state without showing it to Python:
// worker.js registers only gpu.js's exports (requestDevice re-exported) as "wisp_gpu".
//
// `device` and `lost` are live bindings: importers see requestDevice's updates but cannot assign
// them, and the arrays are emptied in place (never reassigned) because importers hold them.

// Limits the engine reads (py_engine/gpu/device.py: Limits) and asks for with limits: "adapter".
const LIMIT_KEYS = [
  "maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
  "maxComputeInvocationsPerWorkgroup", "maxStorageBuffersPerShaderStage",
  "maxComputeWorkgroupsPerDimension", "minStorageBufferOffsetAlignment",
  "minUniformBufferOffsetAlignment", "maxUniformBufferBindingSize", "maxBindGroups",
  "maxComputeWorkgroupSizeX", "maxComputeWorkgroupSizeY", "maxComputeWorkgroupSizeZ",
];
const REQUEST_LIMIT_KEYS = LIMIT_KEYS.slice(0, 6);  // the maxima; alignments stay at their defaults

let adapter = null;
export let device = null;
export let lost = null;      // GPUDeviceLostInfo once the device is gone
let lostHandler = null;      // Python's (py_engine/web/recovery.py): told of each loss of the current device
const errors = [];           // uncaptured errors not yet thrown
export const pending = [];   // promises prepare() awaits: each resolves to an error message or null
let nextId = 1;
export const buffers = new Map();  // id -> GPUBuffer
export const kernels = new Map();  // id -> {label, layout, pipeline (null while compiling), code}
export const bindGroups = new Map();
export const batches = new Map();  // id -> a dispatch list prepared once (gpu_submit.js's createBatch)
export const layouts = new Map();  // "uniform,read,rw" -> {bgl, pipelineLayout}
export const staging = [];         // free MAP_READ buffers for readBuffer

export function gpuError(message, name = "GpuError") {
  const e = new Error(message);
  e.name = name;
  return e;
}

export function check() {
  if (lost) throw gpuError(`GPU device lost (${lost.reason}): ${lost.message}`);
  if (!device) throw gpuError("no GPU device: call requestDevice first");
  if (errors.length) {
    const first = errors[0];
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more GPU errors)` : "";
    errors.length = 0;
    throw gpuError(first + more);
  }
}

// The submit strategy (py_engine/gpu/submit_strategy.py decides it at start-up).
// group 0: each submit is one encoder, one compute pass, one queue.submit (Dawn, wgpu-native).
// group N: WebKit's workaround: N dispatches per command buffer, each submitted and awaited before
// the next is encoded, so exactly one command buffer is in flight. Python's submit stays
// synchronous: the groups wait in `chain`, and every later queue operation (writes, destroys,
// read-backs, weight uploads) goes after them, so the queue order Python asked for is kept.
export const submitState = { group: 0, chain: null, commandBuffers: 0 };

export function recordError(message) { errors.push(message); }

// Run step after every pending group (grouped mode only). A failure becomes the next call's error.
export function enqueue(step) {
  const p = (submitState.chain || Promise.resolve()).then(step)
    .catch((e) => recordError(`grouped submit: ${describe(e)}`));
  submitState.chain = p;
  p.then(() => { if (submitState.chain === p) submitState.chain = null; });
}

// Wait for every pending group; no await at all when none is pending (the single-pass path).
export async function drain() {
  while (submitState.chain) await submitState.chain;
}

export function describe(err) {
  return `${err.constructor?.name || "GPUError"}: ${err.message}`;
}

export function id(table, object) {
  const i = nextId++;
  table.set(i, object);
  return i;
}

export function get(table, i, what) {
  const o = table.get(i);
  if (o === undefined) throw gpuError(`unknown ${what} id ${i}`);
  return o;
}

// Scoped validation / OOM errors of a synchronous call land in `pending` (surfaced by prepare).
export function scoped(what, fn) {
  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  try {
    return fn();
  } finally {
    const v = device.popErrorScope();
    const m = device.popErrorScope();
    pending.push(Promise.all([v, m]).then(([a, b]) => {
      const e = a || b;
      return e ? `${what}: ${describe(e)}` : null;
    }));
  }
}

// ---------------------------------------------------------------------------------------------
export async function requestDevice(options = {}) {
  const allowF16 = options.allowF16 ?? true;
  const limitsMode = options.limits ?? "default";
  if (!globalThis.navigator?.gpu) throw gpuError("this browser has no WebGPU (navigator.gpu is missing)", "NoWebGPU");
  adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw gpuError("navigator.gpu.requestAdapter() returned no adapter (WebGPU disabled or unsupported GPU)", "NoWebGPU");
  const features = [];
  const f16 = allowF16 && adapter.features.has("shader-f16");
  if (f16) features.push("shader-f16");
  const subgroups = (options.allowSubgroups ?? true) && adapter.features.has("subgroups");
  if (subgroups) features.push("subgroups");
  // WebGPU's default limits (what every browser grants) unless asked for the adapter's maxima.
  const requiredLimits = {};
  if (limitsMode === "adapter") for (const k of REQUEST_LIMIT_KEYS) requiredLimits[k] = adapter.limits[k];
  if (device) device.destroy();  // one device per worker: a new one frees the previous one's buffers
  device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits });
  lost = null;
  errors.length = 0;
  pending.length = 0;
  submitState.chain = null; submitState.commandBuffers = 0;
  buffers.clear(); kernels.clear(); bindGroups.clear(); batches.clear(); layouts.clear(); staging.length = 0;
  const current = device;
  device.lost.then((info) => {
    if (device !== current) return;  // replaced on purpose: requestDevice destroyed it
    lost = info;
    try { if (lostHandler) lostHandler(info.reason, info.message); }
    catch (e) { console.error("the device-lost handler failed", e); }
  });
  device.addEventListener("uncapturederror", (ev) => { if (device === current) errors.push(describe(ev.error)); });
  const info = adapter.info || {};
  const limits = {};
  for (const k of LIMIT_KEYS) limits[k] = device.limits[k];
  return {
    name: info.device || info.description || info.vendor || "WebGPU adapter",
    vendor: info.vendor || "", architecture: info.architecture || "", description: info.description || "",
    isFallbackAdapter: !!(adapter.isFallbackAdapter ?? info.isFallbackAdapter),
    features: [...device.features].sort(),
    adapterFeatures: [...adapter.features].sort(),
    shaderF16: f16,
    subgroups,  // kernels reduce with subgroup shuffles (py_engine/runtime/kernels.py emits `enable subgroups;`)
    subgroupMinSize: info.subgroupMinSize || 0,  // the narrowest (Capabilities.subgroup_min_size); 0: not said
    // dot4I8Packed and pack4xI8 (the int8 GEMV of precision "fast"): absent, the engine runs exact
    int8Dot: !!navigator.gpu.wgslLanguageFeatures?.has("packed_4x8_integer_dot_product"),
    limits,
  };
}

// A lost device (driver reset, WebKit's GPU process crashing, memory reclaimed) is not ours to
// replace: Python is told (onDeviceLost) and reopens one, reloading the model from the weight store.
export function onDeviceLost(handler) { lostHandler = handler; }

// {lost, reason, message} of the current device, waiting up to waitMs for its `lost` promise: a
// read or write that failed because of the loss can be seen before the promise settles.
export async function deviceLost(waitMs = 0) {
  const current = device;
  let info = lost;
  if (!info && current && waitMs > 0) {
    info = await Promise.race([current.lost, new Promise((resolve) => setTimeout(() => resolve(null), waitMs))]);
    if (device !== current) info = null;  // replaced meanwhile: that one is not lost
  }
  return info ? { lost: true, reason: info.reason || "unknown", message: info.message || "" } : { lost: false };
}
