// Encoding a submit's op list (worker/gpu.js's submit / submitShared) under the submit strategy
// chosen at start-up (py_engine/gpu/browser_host.py): 0 = one encoder, one compute pass, one
// queue.submit (Dawn, wgpu-native); N = N dispatches per command buffer, one in flight (WebKit;
// gpu_device.js's submitState says why). The op list: dispatch [0, kernel, bindGroup, x, y, z],
// copy [1, src, srcOff, dst, dstOff, size], read [2, src, srcOff, size, readId, 0] (copied into a
// staging buffer of its own; gpu.js's fetchRead returns the bytes).

import { bindGroups, buffers, check, device, enqueue, get, gpuError, kernels, submitState } from "./gpu_device.js";
import { startRead } from "./gpu_reads.js";

export function configureSubmit(group) {
  check();
  submitState.group = group > 0 ? Math.floor(group) : 0;
  submitState.chain = null;
}

// A kernel submitted before prepare() finished compiling it: compile it synchronously (Dawn then
// compiles it a second time) and say so; errors then arrive as uncaptured errors (next call).
function compileNow(kernel) {
  console.warn(`wisp gpu: kernel '${kernel.label}' submitted before prepare() resolved; compiling it synchronously`);
  kernel.pipeline = device.createComputePipeline({
    label: kernel.label, layout: kernel.layout.pipelineLayout, compute: { module: kernel.module, entryPoint: kernel.entry },
  });
}

export function encodeAndSubmit(a) {
  if (submitState.group > 0) { submitGrouped(a); return; }
  const encoder = device.createCommandEncoder();
  let pass = null;
  let lastKernel = -1;
  const reads = [];
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
    } else if (op === 2) {
      if (pass !== null) { pass.end(); pass = null; }
      const r = startRead(get(buffers, a[i + 1], "buffer"), a[i + 2], a[i + 3], a[i + 4]);
      encoder.copyBufferToBuffer(r.source, r.lo, r.stage, 0, r.span);
      reads.push(r);
      i += 6;
    } else {
      throw gpuError(`submit: unknown op ${op} at ${i}`);
    }
  }
  if (pass !== null) pass.end();
  device.queue.submit([encoder.finish()]);
  submitState.commandBuffers++;
  // Mapping now, before any later submit, resolves when this submit's work is done (on an
  // implementation that waits for all work queued at the call, a later map would wait for more).
  for (const r of reads) r.mapping = r.stage.mapAsync(GPUMapMode.READ, 0, r.span);
}

// Grouped (WebKit): the ids are resolved now, so a bad id throws from this call as in single-pass
// (and the op list, a view of Python's shared array, may be overwritten once we return); each
// group is encoded only after the previous one's onSubmittedWorkDone: one command buffer in flight.
function submitGrouped(a) {
  const groups = [];
  let cur = [], dispatches = 0;
  for (let i = 0; i < a.length; i += 6) {
    const op = a[i];
    if (op === 0) {
      const kernel = get(kernels, a[i + 1], "kernel");
      if (kernel.pipeline === null) compileNow(kernel);
      cur.push([kernel.pipeline, get(bindGroups, a[i + 2], "bind group"), a[i + 3], a[i + 4], a[i + 5]]);
      if (++dispatches === submitState.group) { groups.push(cur); cur = []; dispatches = 0; }
    } else if (op === 1) {
      cur.push([null, get(buffers, a[i + 1], "buffer"), a[i + 2], get(buffers, a[i + 3], "buffer"), a[i + 4], a[i + 5]]);
    } else if (op === 2) {  // mapped by fetchRead, after the chain has run this copy
      const r = startRead(get(buffers, a[i + 1], "buffer"), a[i + 2], a[i + 3], a[i + 4]);
      cur.push([null, r.source, r.lo, r.stage, 0, r.span]);
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

