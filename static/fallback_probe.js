// Is the page's WebGPU adapter a CPU fallback (Chrome's SwiftShader where it finds no usable GPU),
// and how fast does it read a model's weights? A decode token reads every weight once, mostly in
// GEMVs over 4-bit blocks, so the probe runs one GEMV of that shape over a few MiB and a model's
// seconds per token follow from its weight bytes. The work is fixed (a warm-up pass and PASSES
// timed ones), never a wait on the clock; on a real GPU no device is opened at all.

const ROW_WORDS = 512;  // u32 words of packed 4-bit weights per row: K = 4,096
const ROWS = 2048;      // 4 MiB of weights
const ROWS_PER_GROUP = 8;
const PASSES = 3;
const PROBE_BYTES = ROWS * ROW_WORDS * 4;
// The engine's decode on SwiftShader takes about the probe's time per weight byte since its GEMVs
// take a thread per row on a CPU adapter (linear_plan.gemv_layout's cpu layout). Measured on 2
// cores (benchmarks/browser.py, SmolLM2's 98 MB): 2.5 s a token (0.4 tok/s, 20 s to the first of 16
// prompt tokens), where the probe reads 19-37 MB/s (2.6-5.2 s by its bytes); with the GPU layout
// it took 30-60 s a token (issue 34), and this was 10.
const ENGINE_SLOWDOWN = 1;

// 32 lanes split a row and meet in workgroup memory, 8 rows a workgroup: the engine's GPU layout
// for short rows (py_engine/runtime/linear_plan.py gemv_layout), dequantizing and reducing as its
// GEMVs do there (on a CPU adapter the engine's own take a thread per row: ENGINE_SLOWDOWN relates
// the two).
const GEMV_WGSL = `
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
var<workgroup> sums: array<f32, ${32 * ROWS_PER_GROUP}>;

@compute @workgroup_size(32, ${ROWS_PER_GROUP})
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_id) lane: vec3<u32>) {
  let row = group.x * ${ROWS_PER_GROUP}u + lane.y;
  var acc = 0.0;
  for (var k = lane.x; k < ${ROW_WORDS}u; k += 32u) {
    let q = w[row * ${ROW_WORDS}u + k];
    let lo = vec4<f32>(vec4<u32>(q, q >> 4u, q >> 8u, q >> 12u) & vec4<u32>(15u)) - 8.0;
    let hi = vec4<f32>(vec4<u32>(q >> 16u, q >> 20u, q >> 24u, q >> 28u) & vec4<u32>(15u)) - 8.0;
    acc += dot(lo, x[2u * k]) + dot(hi, x[2u * k + 1u]);
  }
  let slot = lane.y * 32u + lane.x;
  sums[slot] = acc;
  for (var half = 16u; half > 0u; half >>= 1u) {
    workgroupBarrier();
    if (lane.x < half) { sums[slot] += sums[slot + half]; }
  }
  if (lane.x == 0u) { y[row] = sums[slot]; }
}`;

/** A decode token's rough seconds for a model of `weightBytes` (each read once per token). */
export function secondsPerToken(weightBytes, bytesPerSecond) {
  return (weightBytes / bytesPerSecond) * ENGINE_SLOWDOWN;
}

/** The page's adapter when it is a fallback adapter, else null (a GPU, or no adapter at all). */
export async function fallbackAdapter(gpu = globalThis.navigator?.gpu) {
  const adapter = await gpu?.requestAdapter({ powerPreference: "high-performance" }).catch(() => null);
  // adapter.info.isFallbackAdapter since Chrome 136; adapter.isFallbackAdapter before it
  return adapter && (adapter.info?.isFallbackAdapter ?? adapter.isFallbackAdapter) ? adapter : null;
}

/** Weight bytes per second that a decode GEMV reads on this adapter (its own device, destroyed after). */
export async function weightBytesPerSecond(adapter) {
  const device = await adapter.requestDevice();
  try {
    const storage = (size) => device.createBuffer({ size, usage: GPUBufferUsage.STORAGE });  // zeros: the time does not depend on values
    const weights = storage(PROBE_BYTES), x = storage(ROW_WORDS * 8 * 4), y = storage(ROWS * 4);
    const pipeline = await device.createComputePipelineAsync({
      layout: "auto", compute: { module: device.createShaderModule({ code: GEMV_WGSL }), entryPoint: "main" },
    });
    const bindGroup = device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [weights, x, y].map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
    const run = (passes) => {
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, bindGroup);
      for (let i = 0; i < passes; i++) pass.dispatchWorkgroups(ROWS / ROWS_PER_GROUP);
      pass.end();
      device.queue.submit([encoder.finish()]);
      return device.queue.onSubmittedWorkDone();
    };
    await run(1);  // untimed: SwiftShader compiles the shader at its first dispatch
    const t0 = performance.now();
    await run(PASSES);
    return (PROBE_BYTES * PASSES) / Math.max(performance.now() - t0, 1e-3) * 1000;
  } finally {
    device.destroy();
  }
}
