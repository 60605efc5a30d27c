// The JS half of the browser GPU device (py_engine/gpu/browser_host.py is the Python half).
//
// WebGPU objects live in id tables (gpu_device.js); Python holds plain ints. Every function is one
// FFI call from Python, so the hot path (submit) takes a whole command list at once. Errors: a GPU
// validation/OOM error reported asynchronously (uncapturederror) and device loss are recorded and
// thrown by the next call; pipeline compile errors surface from prepare(). Thrown errors have
// name "GpuError" (or "NoWebGPU" when the browser has no usable adapter); Python turns them into
// py_engine.gpu.device.GpuError.
//
// Exported API (sizes and offsets in bytes):
//   requestDevice({allowF16, allowSubgroups, limits: "default" | "adapter"}) -> Promise<info>   (gpu_device.js opens it)
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
//                                          dst, dstOff, size], read [2, src, srcOff, size, readId, 0], batch
//                                          [3, batchId, 0, 0, 0, 0]. Values are signed 32-bit: offsets and sizes
//                                          must stay below 2^31 (2 GiB).
//   createBatch(ops) -> id                 ops: dispatches only, as submit's; a submit's op 3 replays them
//   configureSubmit(group)                 0: one command buffer per submit; N: N dispatches each, one in flight
//   readBuffer(id, offset, size) -> Promise<Uint8Array>
//   fetchRead(readId) -> Promise<Uint8Array>   the bytes that a submit's read ops [2, ...] set aside, all
//                                          of them one after the other; readId: the submit's first (gpu_reads.js)
//   destroyBuffer(id)
//   loadWeights(plan, onProgress) -> Promise<{bytes, reads, ms}>         (in weights.js)
//                                          plan: [{buffer, dst, url, start, length}] or [[buffer, dst, url,
//                                          start, length]]; onProgress(done, total) in bytes.
//   cancelWeights()                        loadWeights under way stop (weights.js)
//   stats() -> {buffers, kernels, bindGroups, pending}
//   onDeviceLost(handler)                  handler(reason, message) on each loss of the current device
//   deviceLost(waitMs) -> Promise<{lost, reason?, message?}>   is the current device lost? (both in gpu_device.js)
//
// Split in four: gpu_device.js (requestDevice, the id tables, the error bookkeeping), gpu_submit.js
// (encoding submits: the single pass and WebKit's grouped command buffers), weights.js
// (loadWeights) and this module (the rest); worker.js registers only this module as "wisp_gpu", so
// it re-exports the others' public functions and Python still sees one module.

import {
  bindGroups, buffers, check, describe, device, drain, enqueue, get, gpuError, id, kernels, layouts, pending,
  requestDevice as openDevice, scoped, submitState,
} from "./gpu_device.js";
import { fetchRead as fetchPending, forgetReads, readNow } from "./gpu_reads.js";
import { encodeAndSubmit } from "./gpu_submit.js";
import { loadWeights as loadWeightsNow } from "./weights.js";

export { deviceLost, onDeviceLost } from "./gpu_device.js";
export { configureSubmit, createBatch } from "./gpu_submit.js";
export { READ_BYTES, cancelWeights } from "./weights.js";

let loseAtSubmit = 0;  // the test hook's countdown (_testFault below); 0: off

// A new device (the first, or one replacing a lost one): the reads set aside on the old one go.
export function requestDevice(options = {}) {
  forgetReads();
  loseAtSubmit = 0;
  return openDevice(options);
}

// Weight uploads write the queue: after any pending grouped submits (none on the single-pass path).
export async function loadWeights(plan, onProgress) {
  await drain();
  return loadWeightsNow(plan, onProgress);
}

const STORAGE_KINDS = { uniform: "uniform", read: "read-only-storage", rw: "storage" };

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
    // Behind pending groups the write waits its turn, so it needs its own copy of the bytes.
    if (submitState.chain) { const copy = u8.slice(); enqueue(() => device.queue.writeBuffer(buffer, offset, copy)); }
    else device.queue.writeBuffer(buffer, offset, u8);
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

async function compileMessages(module, code) {
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
  let module, scope;
  device.pushErrorScope("validation");
  try {
    kernel.layout = layoutFor(kinds);
    module = kernel.module = device.createShaderModule({ code, label });
  } finally {
    scope = device.popErrorScope().catch(() => null);
  }
  const pipeline = device.createComputePipelineAsync({
    label, layout: kernel.layout.pipelineLayout, compute: { module, entryPoint: entry },
  }).then((p) => { kernel.pipeline = p; kernel.module = null; return null; }, (err) => err);
  // One report per kernel: the compiler's messages (with line numbers and the source line) when
  // there are any, else the validation or pipeline error.
  pending.push(Promise.all([scope, pipeline]).then(async ([scopeError, pipelineError]) => {
    if (!scopeError && !pipelineError) return null;
    const details = await compileMessages(module, code);
    if (details) return `kernel '${label}': WGSL compile error\n${details}`;
    return `kernel '${label}': ${describe(pipelineError || scopeError)}`;
  }));
  return id(kernels, kernel);
}

export async function prepare() {
  check();
  while (pending.length) {
    const batch = pending.splice(0);
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
  countSubmit();
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
  if (submitState.chain) {  // the shared array is overwritten by the next call: copy it now
    const copy = sharedBytes().slice(0, length);
    enqueue(() => device.queue.writeBuffer(buffer, offset, copy));
  } else {
    device.queue.writeBuffer(buffer, offset, sharedBytes(), 0, length);
  }
}

export function submit(ops) {
  check();
  countSubmit();
  withInts(ops, encodeAndSubmit);
}

export async function readBuffer(bufferId, offset, size) {
  check();
  if (submitState.chain) { await drain(); check(); }  // grouped: the read-back copy is its own final submit
  get(buffers, bufferId, "buffer");
  if (size === 0) return new Uint8Array(0);
  return readNow(bufferId, offset, size);
}

export function fetchRead(readId) { return fetchPending(readId); }

export function destroyBuffer(bufferId) {
  const buffer = buffers.get(bufferId);
  if (!buffer) return;
  buffers.delete(bufferId);
  if (submitState.chain) enqueue(() => buffer.destroy());  // pending groups may still use it
  else buffer.destroy();
}

export function destroyBindGroup(groupId) {
  bindGroups.delete(groupId);
}

export function stats() {
  return { buffers: buffers.size, kernels: kernels.size, bindGroups: bindGroups.size, pending: pending.length,
           submitGroup: submitState.group, commandBuffers: submitState.commandBuffers };
}

// Test hook: make the device report an error / lose the device as a real fault would. "lose" with
// afterSubmits N loses it at the Nth submit from now: mid-forward, while a generation runs.
function countSubmit() {
  if (loseAtSubmit && --loseAtSubmit === 0) device.destroy();
}

export function _testFault(kind, afterSubmits = 0) {
  if (kind === "lose" && afterSubmits > 0) loseAtSubmit = afterSubmits;
  else if (kind === "lose") device.destroy();
  else if (kind === "validation") device.createBuffer({ size: 4, usage: 0xffffffff });
}
