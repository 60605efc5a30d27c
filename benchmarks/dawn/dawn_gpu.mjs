// Dawn (npm `webgpu`) as the page's navigator.gpu, for the harness's scripts (run.mjs, openai.mjs).

import os from "node:os";
import path from "node:path";

// WebGPU's default limits for compute (core feature level), which the engine is written against.
const CORE_DEFAULTS = {
  maxComputeWorkgroupSizeX: 256, maxComputeWorkgroupSizeY: 256, maxComputeWorkgroupSizeZ: 64,
  maxComputeInvocationsPerWorkgroup: 256, maxComputeWorkgroupStorageSize: 16384,
  maxStorageBuffersPerShaderStage: 8, maxStorageBufferBindingSize: 134217728, maxBufferSize: 268435456,
};

/** Dawn as navigator.gpu: its globals (GPUBufferUsage, ...) on globalThis; opengles in compatibility mode. */
export async function openDawn(dir, backend, toggles) {
  if (backend === "opengles") {
    process.env.EGL_PLATFORM ??= "surfaceless";
    process.env.XDG_RUNTIME_DIR ??= os.tmpdir();
  }
  const { create, globals } = await import(path.join(path.resolve(dir), "index.js"));
  Object.assign(globalThis, globals);
  const gpu = create([`backend=${backend}`, ...toggles]);
  if (backend !== "opengles") return { gpu, featureLevel: "core" };
  // worker/gpu_device.js asks for a plain adapter; GLES has only a compatibility-mode one, whose
  // default limits are lower than the WebGPU defaults every desktop browser grants (256 invocations,
  // 8 storage buffers per stage): its devices get those, where the adapter has them.
  const raise = (adapter) => new Proxy(adapter, {
    get(target, prop) {
      if (prop === "requestDevice") {
        return (desc = {}) => {
          const core = {};
          for (const [k, v] of Object.entries(CORE_DEFAULTS)) core[k] = Math.min(v, target.limits[k]);
          return target.requestDevice({ ...desc, requiredLimits: { ...core, ...(desc.requiredLimits || {}) } });
        };
      }
      const value = target[prop];
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  const compat = {
    requestAdapter: async (options = {}) => {
      const adapter = await gpu.requestAdapter({ ...options, featureLevel: "compatibility" });
      return adapter && raise(adapter);
    },
    getPreferredCanvasFormat: () => gpu.getPreferredCanvasFormat(),
    get wgslLanguageFeatures() { return gpu.wgslLanguageFeatures; },
  };
  return { gpu: compat, featureLevel: "compatibility" };
}

