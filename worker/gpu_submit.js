// Encoding a submit's op list (worker/gpu.js's submit / submitShared) under the submit strategy
// chosen at start-up (py_engine/gpu/browser_host.py): 0 = one encoder, one compute pass, one
// queue.submit (Dawn, wgpu-native); N = N dispatches per command buffer, one in flight (WebKit;
// gpu_device.js's submitState says why). The op list: dispatch [0, kernel, bindGroup, x, y, z],
// copy [1, src, srcOff, dst, dstOff, size], read [2, src, srcOff, size, readId, 0] (all the reads
// of a submit share a staging buffer; gpu.js's fetchRead returns their bytes), batch [3, batchId,
// 0, 0, 0, 0]: a dispatch list that createBatch resolved once (a forward's, replayed every token
// without a table look-up or an int per dispatch crossing from Python).

import { batches, bindGroups, buffers, check, device, enqueue, get, gpuError, id, kernels, submitState } from "./gpu_device.js";
import { mapReads, startReads } from "./gpu_reads.js";

export function configureSubmit(group) {
  check();
  submitState.group = group > 0 ? Math.floor(group) : 0;
  submitState.chain = null;
}

// ops: dispatches only ([0, kernel, bindGroup, x, y, z] each), as Int32Array or PyProxy -> batch id.
export function createBatch(ops) {
  check();
  const a = ops && typeof ops.getBuffer === "function" ? ops.getBuffer("i32") : null;
  try {
    const v = a ? a.data : ops;
    const n = v.length / 6;
    const batch = { kernels: new Array(n), groups: new Array(n), grids: new Uint32Array(3 * n) };
    for (let j = 0; j < n; j++) {
      const i = 6 * j;
      if (v[i] !== 0) throw gpuError(`createBatch: op ${v[i]} at ${i}: a batch holds dispatches only`);
      batch.kernels[j] = get(kernels, v[i + 1], "kernel");
      batch.groups[j] = get(bindGroups, v[i + 2], "bind group");
      batch.grids.set([v[i + 3], v[i + 4], v[i + 5]], 3 * j);
    }
    return id(batches, batch);
  } finally {
    if (a) a.release();
  }
}

// A kernel submitted before prepare() finished compiling it: compile it synchronously (Dawn then
// compiles it a second time) and say so; errors then arrive as uncaptured errors (next call).
function compileNow(kernel) {
  console.warn(`wisp gpu: kernel '${kernel.label}' submitted before prepare() resolved; compiling it synchronously`);
  kernel.pipeline = device.createComputePipeline({
    label: kernel.label, layout: kernel.layout.pipelineLayout, compute: { module: kernel.module, entryPoint: kernel.entry },
  });
}

// One dispatch into the pass; `set` remembers the pass's kernel and bind group: an unchanged one
// is not set again. Each call into Dawn costs ~0.5 us in Node, each argument more (a 1D grid
// is passed as one number: 15 % off the dispatch call).
function dispatch(pass, set, kernel, group, x, y, z) {
  if (kernel !== set.kernel) {
    if (kernel.pipeline === null) compileNow(kernel);
    pass.setPipeline(kernel.pipeline);
    set.kernel = kernel;
  }
  if (group !== set.group) { pass.setBindGroup(0, group); set.group = group; }
  if (y === 1 && z === 1) pass.dispatchWorkgroups(x);
  else pass.dispatchWorkgroups(x, y, z);
}

export function encodeAndSubmit(a) {
  if (submitState.group > 0) { submitGrouped(a); return; }
  const reads = startReads(a);
  let nextCopy = 0;
  const encoder = device.createCommandEncoder();
  let pass = null;
  const set = { kernel: null, group: null };
  const n = a.length;
  for (let i = 0; i < n; i += 6) {
    const op = a[i];
    if (op === 0 || op === 3) {
      if (pass === null) { pass = encoder.beginComputePass(); set.kernel = set.group = null; }
      if (op === 0) {
        dispatch(pass, set, get(kernels, a[i + 1], "kernel"), get(bindGroups, a[i + 2], "bind group"), a[i + 3], a[i + 4], a[i + 5]);
        continue;
      }
      const b = get(batches, a[i + 1], "batch");
      const ks = b.kernels, gs = b.groups, grids = b.grids;
      for (let j = 0, g = 0; j < ks.length; j++, g += 3) dispatch(pass, set, ks[j], gs[j], grids[g], grids[g + 1], grids[g + 2]);
    } else if (op === 1 || op === 2) {
      if (pass !== null) { pass.end(); pass = null; }
      if (op === 1) {
        encoder.copyBufferToBuffer(get(buffers, a[i + 1], "buffer"), a[i + 2], get(buffers, a[i + 3], "buffer"), a[i + 4], a[i + 5]);
      } else {
        const [source, lo, at, bytes] = reads.copies[nextCopy++];
        encoder.copyBufferToBuffer(source, lo, reads.stage, at, bytes);
      }
    } else {
      throw gpuError(`submit: unknown op ${op} at ${i}`);
    }
  }
  if (pass !== null) pass.end();
  device.queue.submit([encoder.finish()]);
  submitState.commandBuffers++;
  if (reads !== null) mapReads(reads);
}

// Grouped (WebKit): the ids are resolved now, so a bad id throws from this call as in single-pass
// (and the op list, a view of Python's shared array, may be overwritten once we return); each
// group is encoded only after the previous one's onSubmittedWorkDone: one command buffer in flight.
// The reads are mapped by fetchRead, after the chain has run their copies.
function submitGrouped(a) {
  const reads = startReads(a);
  let nextCopy = 0;
  const groups = [];
  let cur = [], dispatches = 0;
  const add = (kernel, group, x, y, z) => {
    if (kernel.pipeline === null) compileNow(kernel);
    cur.push([kernel.pipeline, group, x, y, z]);
    if (++dispatches === submitState.group) { groups.push(cur); cur = []; dispatches = 0; }
  };
  for (let i = 0; i < a.length; i += 6) {
    const op = a[i];
    if (op === 0) {
      add(get(kernels, a[i + 1], "kernel"), get(bindGroups, a[i + 2], "bind group"), a[i + 3], a[i + 4], a[i + 5]);
    } else if (op === 3) {
      const b = get(batches, a[i + 1], "batch");
      for (let j = 0; j < b.kernels.length; j++) add(b.kernels[j], b.groups[j], b.grids[3 * j], b.grids[3 * j + 1], b.grids[3 * j + 2]);
    } else if (op === 1) {
      cur.push([null, get(buffers, a[i + 1], "buffer"), a[i + 2], get(buffers, a[i + 3], "buffer"), a[i + 4], a[i + 5]]);
    } else if (op === 2) {
      const [source, lo, at, bytes] = reads.copies[nextCopy++];
      cur.push([null, source, lo, reads.stage, at, bytes]);
    } else {
      throw gpuError(`submit: unknown op ${op} at ${i}`);
    }
  }
  if (cur.length) groups.push(cur);
  for (const g of groups) enqueue(() => { submitGroup(g); return device.queue.onSubmittedWorkDone(); });
}

function submitGroup(cmds) {
  const encoder = device.createCommandEncoder();
  let pass = null, last = null;
  for (const c of cmds) {
    if (c[0] !== null) {
      if (pass === null) { pass = encoder.beginComputePass(); last = null; }
      if (c[0] !== last) { pass.setPipeline(c[0]); last = c[0]; }
      pass.setBindGroup(0, c[1]);
      pass.dispatchWorkgroups(c[2], c[3], c[4]);
    } else {
      if (pass !== null) { pass.end(); pass = null; }
      encoder.copyBufferToBuffer(c[1], c[2], c[3], c[4], c[5]);
    }
  }
  if (pass !== null) pass.end();
  device.queue.submit([encoder.finish()]);
  submitState.commandBuffers++;
}
