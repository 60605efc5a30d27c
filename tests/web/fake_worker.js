// A stand-in for worker/worker.js that speaks the worker protocol with no Pyodide and no GPU, for the
// page tests (tests/test_browser_page.py, which check its traffic against py_engine/web/protocol.py's
// table). Timings are short but real, so streaming and Stop can be observed.
//
// It answers `openai` requests (chat and text completions; static/client.js's generate sends them too)
// with OpenAI's chunks and a `response` carrying the answer's stats.
// Special prompts: containing "trigger error" → an `error` event (kind "generate");
// "trigger crash" → an uncaught exception in the worker (the page sees worker.onerror);
// containing "long" → a 400-word answer (to Stop it); containing "code" → a Markdown answer with a list
// and a fenced code block. A model with id "broken-model" fails to load; "huge-model" fails with an error
// of kind "quota" (the store has no room); "slow-model" stalls 4 s mid-download (no progress events).
//
// The weight store (downloaded weights kept on the device) is an in-memory map, seeded with a complete
// "tiny-stored" model and a partly downloaded qwen2.5-coder; a load stores its model. store_list /
// store_remove / store_persist answer with a `store` event. Loads narrate boot → store → download
// {bytes_per_s, eta_s} → verify → upload → compile; a model already stored skips download and verify.
// Each answer starts "Answer <turn> (<n> messages, temperature <t>):" so tests can check what was sent.

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const post = (msg) => self.postMessage(msg);

const ADAPTER = {
  name: "SwiftShader Device (Subzero) — fake",
  webkit: false,
  platform_reason: "",
  subgroup_min_size: 4,
  features: ["subgroups", "timestamp-query", "float32-filterable", "indirect-first-instance", "depth-clip-control"],
  limits: {
    maxBufferSize: 268435456,
    maxStorageBufferBindingSize: 134217728,
    maxComputeWorkgroupStorageSize: 16384,
    maxComputeInvocationsPerWorkgroup: 256,
    maxComputeWorkgroupSizeX: 256,
    maxStorageBuffersPerShaderStage: 8,
    maxBindGroups: 4,
    minStorageBufferOffsetAlignment: 256,
  },
};
const WORDS = ("Small language models can run entirely inside a browser tab. The weights are fetched once, "
  + "uploaded to the GPU, and every token is computed by compute shaders written in WGSL while Python "
  + "drives the loop from a worker so the page stays responsive.").split(" ");

const MARKDOWN = ` Here is a **tiny** example in Python:

1. Define a function.
2. Call it with \`print\`.

\`\`\`python
def greet(name):
    return f"Hello, {name}!"

print(greet("WebGPU"))
\`\`\`

That prints one line.`;

let loaded = null;
const QUOTA = 10_000_000_000;
const APP_BYTES = 12_000_000;  // the origin's other bytes (the app shell, Pyodide): usage is more than the models
const stored = new Map([
  ["tiny-stored", { model: { id: "tiny-stored", name: "Tiny Stored", kind: "gguf" },
    files: [{ name: "tiny.gguf", size: 60_000_000, written: 60_000_000, complete: true }] }],
  ["qwen2.5-coder-0.5b-instruct", { model: { id: "qwen2.5-coder-0.5b-instruct", name: "Qwen2.5-Coder 0.5B Instruct", kind: "gguf" },
    files: [{ name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", size: 491_400_032, written: 200_000_000, complete: false }] }],
]);
const storeBytes = (e) => e.files.reduce((a, f) => a + f.written, 0);
function storeEvent(id) {
  const models = [...stored.values()].map((e) => ({ ...e, bytes: storeBytes(e) }));
  return { type: "store", id, models, usage: APP_BYTES + models.reduce((a, e) => a + e.bytes, 0), quota: QUOTA, persisted: false,
           backend: "memory" };
}

// Like the real worker: Python boots as soon as the worker starts; its progress has id null.
async function boot() {
  for (let i = 0; i <= 3; i++) { post({ type: "progress", id: null, phase: "boot", done: i, total: 3 }); await sleep(50); }
  post({ type: "booted", pyodide_ms: 280 });
}
const booting = boot();
const running = new Map(); // openai request id → {cancelled}

self.onmessage = (ev) => {
  const msg = ev.data;
  if (msg.type === "openai" && lastUser(msg.body).includes("trigger crash")) {
    throw new Error("Fake worker crashed on purpose");
  }
  booting.then(() => dispatch(msg));
};

function dispatch(msg) {
  switch (msg.type) {
    case "load": load(msg); break;
    case "openai": answer(msg); break;
    case "cancel": { const run = running.get(msg.id); if (run) run.cancelled = true; break; }
    case "unload": loaded = null; break;
    case "store_list": case "store_persist": post(storeEvent(msg.id)); break;
    case "store_remove": stored.delete(msg.model); post(storeEvent(msg.id)); break;
    default: post({ type: "error", id: msg.id ?? null, kind: "protocol", message: `unknown message type ${msg.type}` });
  }
}

function lastUser(body) {
  const users = (body.messages || []).filter((m) => m.role === "user");
  return users.length ? String(users[users.length - 1].content) : String(body.prompt ?? "");
}

async function load({ id, model, options }) {
  const t0 = performance.now();
  if (!model || model.base !== `/models/${model.id}/` || typeof model.files !== "object" || !options) {
    post({ type: "error", id, kind: "load", message: `bad load message: ${JSON.stringify({ model, options })}` });
    return;
  }
  const total = Object.values(model.files).reduce((a, b) => a + b, 0);
  post({ type: "progress", id, phase: "store", done: 0, total: 0 });
  await sleep(40);
  const entry = stored.get(model.id);
  const have = entry ? storeBytes(entry) : 0;
  if (model.id === "huge-model") {
    post({ type: "error", id, kind: "quota", message: `Not enough storage for ${model.name}: needs 4200 MB, 812 MB available` });
    return;
  }
  if (have < total) {
    const speed = 12_300_000; // bytes/s, as the real worker measures it
    for (let i = 0; i <= 8; i++) {
      const done = have + Math.round(((total - have) * i) / 8);
      post({ type: "progress", id, phase: "download", done, total, bytes_per_s: speed, eta_s: (total - done) / speed });
      await sleep(40);
      if (model.id === "slow-model" && i === 4) await sleep(4200); // the network stalls
    }
    for (let i = 0; i <= 4; i++) { post({ type: "progress", id, phase: "verify", done: (total * i) / 4, total }); await sleep(20); }
  }
  if (model.id === "broken-model") {
    post({ type: "error", id, kind: "load", message: "sha256 mismatch for broken.gguf (fake)" });
    return;
  }
  for (let i = 0; i <= 4; i++) { post({ type: "progress", id, phase: "upload", done: Math.round((total * i) / 4), total }); await sleep(30); }
  for (let i = 0; i <= 12; i++) { post({ type: "progress", id, phase: "compile", done: i, total: 12 }); await sleep(15); }
  stored.set(model.id, { model: { id: model.id, name: model.name, kind: model.kind },
    files: Object.entries(model.files).map(([name, size]) => ({ name, size, written: size, complete: true })) });
  loaded = model;
  post({ type: "loaded", id, model: model.id, load_ms: performance.now() - t0, context: 2048, kv_cache: "f32/f32",
         adapter: { ...ADAPTER, submit: { strategy: "single-pass", group: null, reason: "Dawn / wgpu-native: one submit per forward" },
                    workarounds: [] },
         gpu_bytes: { weights: 98e6, kv_cache: 47e6, activations: 6e6, other: 2e6 }, wasm_memory_bytes: 40e6 });
}

async function answer(msg) {
  const { id, endpoint, body } = msg;
  if (!loaded) { post({ type: "error", id, kind: "generate", message: "no model loaded" }); return; }
  if (endpoint === "embeddings") { post({ type: "error", id, kind: "request", message: "no embeddings here (fake)" }); return; }
  const text = lastUser(body);
  const turn = (body.messages || []).filter((m) => m.role === "user").length;
  const run = { cancelled: false };
  running.set(id, run);
  const t0 = performance.now();
  const chat = endpoint === "chat.completions";
  const chunk = (piece, finish = null) => ({
    id: "fake-1", object: chat ? "chat.completion.chunk" : "text_completion", created: 0, model: body.model,
    choices: [chat ? { index: 0, delta: piece === null ? {} : { content: piece }, logprobs: null, finish_reason: finish }
      : { index: 0, text: piece ?? "", logprobs: null, finish_reason: finish }],
  });
  if (chat) post({ type: "chunk", id, chunk: { ...chunk(null), choices: [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }] } });
  await sleep(120); // "prefill"
  if (text.includes("trigger error")) {
    running.delete(id);
    post({ type: "error", id, kind: "generate", message: "GPU device lost while decoding (fake, as requested)" });
    return;
  }
  const head = `Answer ${turn} (${(body.messages || []).length} messages, temperature ${body.temperature}):`;
  const words = text.includes("long") ? Array.from({ length: 400 }, (_, i) => WORDS[i % WORDS.length]) : WORDS.slice(0, 18);
  const pieces = text.includes("code") ? [head, ...MARKDOWN.match(/[\s\S]{1,7}/g)] : [head, ...words.map((w) => ` ${w}`)];
  const limit = body.max_tokens ?? 512;
  const tokens = [];
  let ttft = null;
  let stop = "eos";
  for (let i = 0; i < pieces.length; i++) {
    if (run.cancelled) { stop = "cancel"; break; }
    if (i >= limit) { stop = "length"; break; }
    tokens.push(1000 + i);
    ttft ??= performance.now() - t0;
    if (body.stream) post({ type: "chunk", id, chunk: chunk(pieces[i]) });
    await sleep(30);
  }
  running.delete(id);
  const decodeS = (performance.now() - t0 - ttft) / 1000;
  const content = pieces.slice(0, tokens.length).join("");
  const usage = { prompt_tokens: 12 * turn, completion_tokens: tokens.length, total_tokens: 12 * turn + tokens.length };
  const finish = stop === "length" ? "length" : "stop";
  const response = chat
    ? { id: "fake-1", object: "chat.completion", created: 0, model: body.model, usage,
        choices: [{ index: 0, message: { role: "assistant", content, refusal: null }, logprobs: null, finish_reason: finish }] }
    : { id: "fake-1", object: "text_completion", created: 0, model: body.model, usage,
        choices: [{ index: 0, text: content, logprobs: null, finish_reason: finish }] };
  post({
    type: "response", id, body: response,
    stats: {
      tokens, prompt_tokens: 12 * turn, dropped_exchanges: 0, prefilled_tokens: 12 * turn,
      ttft_ms: ttft ?? 0, prefill_tok_s: 100, decode_tok_s: tokens.length > 1 ? (tokens.length - 1) / decodeS : 0,
      host_ms_per_token: 1.5, stop, command_buffers: tokens.length,
    },
  });
}
