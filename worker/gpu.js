// The JS half of the browser GPU device (py_engine/gpu/browser_host.py is the Python half).
//
// WebGPU objects live here, in id tables; Python holds plain ints. Every function is one FFI call
// from Python, so the hot path (submit) takes a whole command list at once. Errors: a GPU
// validation/OOM error reported asynchronously (uncapturederror) and device loss are recorded and
// thrown by the next call; pipeline compile errors surface from prepare(). Thrown errors have
// name "GpuError" (or "NoWebGPU" when the browser has no usable adapter); Python turns them into
// py_engine.gpu.device.GpuError.
//
// Exported API (sizes and offsets in bytes):
//   requestDevice({allowF16, limits: "default" | "adapter"}) -> Promise<info>
//   createBuffer(size, kind = "storage" | "uniform", label) -> id
//   writeBuffer(id, offset, data)          data: a typed array / ArrayBuffer, or a Pyodide PyProxy
//                                          of a Python buffer (read zero-copy). Offset and length
//                                          must be multiples of 4.
//   createKernel(label, code, kinds, entry = "main") -> id
//                                          kinds: "uniform,read,rw" (one per binding, in order)
//   prepare() -> Promise                   awaits pending pipelines and error scopes; throws the first error
//   createBindGroup(kernelId, resources) -> id   resources: flat [buf, offset, size, buf, offset, size, ...]
//   submit(ops)                            ops: Int32Array (or a PyProxy of a Python array('i')):
//                                          dispatch [0, kernel, bindGroup, x, y, z], copy [1, src, srcOff,
//                                          dst, dstOff, size]. Values are signed 32-bit: offsets and sizes
//                                          must stay below 2^31 (2 GiB).
//   readBuffer(id, offset, size) -> Promise<Uint8Array>
//   destroyBuffer(id)
//   loadWeights(plan, onProgress) -> Promise<{bytes, reads, ms}>
//                                          plan: [{buffer, dst, url, start, length}] or [[buffer, dst, url,
//                                          start, length]]; onProgress(done, total) in bytes.
//   stats() -> {buffers, kernels, bindGroups, pending}

const STORAGE_KINDS = { uniform: "uniform", read: "read-only-storage", rw: "storage" };

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
let device = null;
let lost = null;            // GPUDeviceLostInfo once the device is gone
const errors = [];          // uncaptured errors not yet thrown
let pending = [];           // promises prepare() awaits: each resolves to an error message or null
let nextId = 1;
const buffers = new Map();  // id -> GPUBuffer
const kernels = new Map();  // id -> {label, layout, pipeline (null while compiling), code}
const bindGroups = new Map();
const layouts = new Map();  // "uniform,read,rw" -> {bgl, pipelineLayout}
let staging = [];           // free MAP_READ buffers for readBuffer

function gpuError(message, name = "GpuError") {
  const e = new Error(message);
  e.name = name;
  return e;
}

function check() {
  if (lost) throw gpuError(`GPU device lost (${lost.reason}): ${lost.message}`);
  if (!device) throw gpuError("no GPU device: call requestDevice first");
  if (errors.length) {
    const first = errors[0];
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more GPU errors)` : "";
    errors.length = 0;
    throw gpuError(first + more);
  }
}

function describe(err) {
  return `${err.constructor?.name || "GPUError"}: ${err.message}`;
}

function id(table, object) {
  const i = nextId++;
  table.set(i, object);
  return i;
}

function get(table, i, what) {
  const o = table.get(i);
  if (o === undefined) throw gpuError(`unknown ${what} id ${i}`);
  return o;
}

// Scoped validation / OOM errors of a synchronous call land in `pending` (surfaced by prepare).
function scoped(what, fn) {
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
  // WebGPU's default limits (what every browser grants) unless asked for the adapter's maxima.
  const requiredLimits = {};
  if (limitsMode === "adapter") for (const k of REQUEST_LIMIT_KEYS) requiredLimits[k] = adapter.limits[k];
  if (device) device.destroy();  // one device per worker: a new one frees the previous one's buffers
  device = await adapter.requestDevice({ requiredFeatures: features, requiredLimits });
  lost = null;
  errors.length = 0;
  pending = [];
  buffers.clear(); kernels.clear(); bindGroups.clear(); layouts.clear(); staging = [];
  const current = device;
  device.lost.then((info) => { if (device === current) lost = info; });
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
    subgroups: false,  // not requested: the kernels use the f32 / shared-memory path (as on the desktop)
    limits,
  };
}

export function createBuffer(size, kind = "storage", label = "") {
  check();
  const usage = kind === "uniform"
    ? GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST
    : GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const buffer = scoped(`createBuffer ${label || ""} (${size} bytes)`, () => device.createBuffer({ size, usage, label }));
  return id(buffers, buffer);
}

// A PyProxy of a Python buffer (bytes, bytearray, memoryview, array) is read zero-copy: the view
// is valid only until wasm memory grows, and no Python runs before writeBuffer has copied it.
function withBytes(data, fn) {
  if (data && typeof data.getBuffer === "function") {
    const pb = data.getBuffer("u8");
    try { return fn(pb.data); } finally { pb.release(); }
  }
  if (data instanceof ArrayBuffer) return fn(new Uint8Array(data));
  if (ArrayBuffer.isView(data)) return fn(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  throw gpuError(`writeBuffer: data must be bytes-like, not ${typeof data}`);
}

export function writeBuffer(bufferId, offset, data) {
  check();
  const buffer = get(buffers, bufferId, "buffer");
  withBytes(data, (u8) => {
    if (offset % 4 || u8.byteLength % 4) {
      throw gpuError(`writeBuffer: offset ${offset} and length ${u8.byteLength} must be multiples of 4`);
    }
    if (offset + u8.byteLength > buffer.size) {
      throw gpuError(`writeBuffer: ${u8.byteLength} bytes at ${offset} overflow buffer ${buffer.label || bufferId} (${buffer.size} bytes)`);
    }
    device.queue.writeBuffer(buffer, offset, u8);
  });
}

function layoutFor(kinds) {
  let l = layouts.get(kinds);
  if (!l) {
    const entries = (kinds ? kinds.split(",") : []).map((k, i) => {
      const type = STORAGE_KINDS[k];
      if (!type) throw gpuError(`createKernel: unknown binding kind ${JSON.stringify(k)}`);
      return { binding: i, visibility: GPUShaderStage.COMPUTE, buffer: { type } };
    });
    const bgl = device.createBindGroupLayout({ entries });
    l = { bgl, pipelineLayout: device.createPipelineLayout({ bindGroupLayouts: [bgl] }) };
    layouts.set(kinds, l);
  }
  return l;
}

async function compileMessages(label, module, code) {
  let info;
  try { info = await module.getCompilationInfo(); } catch { return ""; }
  const lines = code.split("\n");
  return info.messages.filter((m) => m.type === "error").map((m) => {
    const src = lines[m.lineNum - 1];
    return `  line ${m.lineNum}:${m.linePos}: ${m.message}` + (src !== undefined ? `\n    ${src.trim()}` : "");
  }).join("\n");
}

export function createKernel(label, code, kinds, entry = "main") {
  check();
  const kernel = { label, pipeline: null, layout: null, module: null, entry };
  let module;
  device.pushErrorScope("validation");
  try {
    kernel.layout = layoutFor(kinds);
    module = kernel.module = device.createShaderModule({ code, label });
  } finally {
    var scope = device.popErrorScope().catch(() => null);
  }
  const pipeline = device.createComputePipelineAsync({
    label, layout: kernel.layout.pipelineLayout, compute: { module, entryPoint: entry },
  }).then((p) => { kernel.pipeline = p; kernel.module = null; return null; }, (err) => err);
  // One report per kernel: the compiler's messages (with line numbers and the source line) when
  // there are any, else the validation or pipeline error.
  pending.push(Promise.all([scope, pipeline]).then(async ([scopeError, pipelineError]) => {
    if (!scopeError && !pipelineError) return null;
    const details = await compileMessages(label, module, code);
    if (details) return `kernel '${label}': WGSL compile error\n${details}`;
    return `kernel '${label}': ${describe(pipelineError || scopeError)}`;
  }));
  return id(kernels, kernel);
}

// A kernel submitted before prepare() finished compiling it: compile it synchronously (Dawn then
// compiles it a second time) and say so; errors then arrive as uncaptured errors (next call).
function compileNow(kernel) {
  console.warn(`wisp gpu: kernel '${kernel.label}' submitted before prepare() resolved; compiling it synchronously`);
  kernel.pipeline = device.createComputePipeline({
    label: kernel.label, layout: kernel.layout.pipelineLayout, compute: { module: kernel.module, entryPoint: kernel.entry },
  });
}

export async function prepare() {
  check();
  while (pending.length) {
    const batch = pending;
    pending = [];
    const results = await Promise.all(batch);
    const failed = results.filter((r) => r);
    if (failed.length) {
      const more = failed.length > 1 ? `\n(and ${failed.length - 1} more errors)` : "";
      throw gpuError(failed[0] + more);
    }
  }
  check();
}

export function createBindGroup(kernelId, resources) {
  check();
  const kernel = get(kernels, kernelId, "kernel");
  const entries = [];
  for (let i = 0; i < resources.length; i += 3) {
    entries.push({ binding: i / 3, resource: { buffer: get(buffers, resources[i], "buffer"), offset: resources[i + 1], size: resources[i + 2] } });
  }
  const group = scoped(`bind group for '${kernel.label}'`, () => device.createBindGroup({ layout: kernel.layout.bgl, entries }));
  return id(bindGroups, group);
}

function withInts(ops, fn) {
  if (ops && typeof ops.getBuffer === "function") {
    const pb = ops.getBuffer("i32");
    try { return fn(pb.data); } finally { pb.release(); }
  }
  return fn(ops);
}

// A Python buffer lent once (share): then submitShared / writeShared pass only ints over the FFI,
// the bytes sit in that buffer. The view is taken again when wasm memory has grown (the old one
// is then detached: byteLength 0). Python never resizes it (an exported array cannot be).
let shared = null;  // {proxy, pb}

export function share(pyBuffer) {
  if (shared) { shared.pb.release(); shared.proxy.destroy(); }
  const proxy = pyBuffer.copy();
  shared = { proxy, pb: proxy.getBuffer("u8") };
}

function sharedBytes() {
  if (shared.pb.data.byteLength === 0) {
    shared.pb.release();
    shared.pb = shared.proxy.getBuffer("u8");
  }
  return shared.pb.data;
}

export function submitShared(count) {
  check();
  const u8 = sharedBytes();
  encodeAndSubmit(new Int32Array(u8.buffer, u8.byteOffset, count));
}

export function writeShared(bufferId, offset, length) {
  check();
  const buffer = get(buffers, bufferId, "buffer");
  if (offset % 4 || length % 4) throw gpuError(`writeBuffer: offset ${offset} and length ${length} must be multiples of 4`);
  if (offset + length > buffer.size) {
    throw gpuError(`writeBuffer: ${length} bytes at ${offset} overflow buffer ${buffer.label || bufferId} (${buffer.size} bytes)`);
  }
  device.queue.writeBuffer(buffer, offset, sharedBytes(), 0, length);
}

export function submit(ops) {
  check();
  withInts(ops, encodeAndSubmit);
}

function encodeAndSubmit(a) {
  const encoder = device.createCommandEncoder();
  let pass = null;
  let lastKernel = -1;
  const n = a.length;
  for (let i = 0; i < n;) {
    const op = a[i];
    if (op === 0) {
      if (pass === null) { pass = encoder.beginComputePass(); lastKernel = -1; }
      const k = a[i + 1];
      if (k !== lastKernel) {
        const kernel = get(kernels, k, "kernel");
        if (kernel.pipeline === null) compileNow(kernel);
        pass.setPipeline(kernel.pipeline);
        lastKernel = k;
      }
      pass.setBindGroup(0, get(bindGroups, a[i + 2], "bind group"));
      pass.dispatchWorkgroups(a[i + 3], a[i + 4], a[i + 5]);
      i += 6;
    } else if (op === 1) {
      if (pass !== null) { pass.end(); pass = null; }
      encoder.copyBufferToBuffer(get(buffers, a[i + 1], "buffer"), a[i + 2], get(buffers, a[i + 3], "buffer"), a[i + 4], a[i + 5]);
      i += 6;
    } else {
      throw gpuError(`submit: unknown op ${op} at ${i}`);
    }
  }
  if (pass !== null) pass.end();
  device.queue.submit([encoder.finish()]);
}

export async function readBuffer(bufferId, offset, size) {
  check();
  const buffer = get(buffers, bufferId, "buffer");
  if (size === 0) return new Uint8Array(0);
  const lo = offset - (offset % 4);
  const hi = Math.min(buffer.size, Math.ceil((offset + size) / 4) * 4);
  const span = hi - lo;
  if (offset < 0 || offset + size > buffer.size) throw gpuError(`readBuffer: ${size} bytes at ${offset} outside buffer ${buffer.label || bufferId} (${buffer.size} bytes)`);
  let k = staging.findIndex((s) => s.size >= span);
  let stage;
  if (k >= 0) stage = staging.splice(k, 1)[0];
  else stage = device.createBuffer({ size: Math.max(span, 1 << 16), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, label: "readback" });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, lo, stage, 0, span);
  device.queue.submit([encoder.finish()]);
  try {
    await stage.mapAsync(GPUMapMode.READ, 0, span);  // resolves after all earlier queue work
  } catch (e) {
    stage.destroy();
    check();
    throw gpuError(`readBuffer: ${describe(e)}`);
  }
  const out = new Uint8Array(stage.getMappedRange(0, span).slice(offset - lo, offset - lo + size));
  stage.unmap();
  staging.push(stage);
  if (staging.length > 4) staging.shift().destroy();
  return out;
}

export function destroyBuffer(bufferId) {
  const buffer = buffers.get(bufferId);
  if (buffer) { buffer.destroy(); buffers.delete(bufferId); }
}

export function destroyBindGroup(groupId) {
  bindGroups.delete(groupId);
}

export function stats() {
  return { buffers: buffers.size, kernels: kernels.size, bindGroups: bindGroups.size, pending: pending.length };
}

// Test hook: make the device report an error / lose the device as a real fault would.
export function _testFault(kind) {
  if (kind === "lose") device.destroy();
  else if (kind === "validation") device.createBuffer({ size: 4, usage: 0xffffffff });
}

// --- weights: file ranges -> GPU buffers, never through Python -------------------------------
export const READ_BYTES = 16 << 20;  // one Range request reads at most this much
const READ_GAP = 256 << 10;          // neighbouring pieces this close share one request
const IN_FLIGHT = 3;                 // requests fetched concurrently

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

export async function loadWeights(plan, onProgress) {
  check();
  const t0 = performance.now();
  const pieces = piecesOf(plan);
  const reads = planReads(pieces);
  const total = pieces.reduce((s, p) => s + p.length, 0);
  const words = new Map();  // buffer id -> Map(word offset -> 4 bytes)
  let done = 0, next = 0;
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
  return { bytes: total, reads: reads.length, ms: performance.now() - t0 };
}
