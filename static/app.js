// The chat page: model picker, narrated loading, streamed answers. Protocol handling lives in client.js.
import { WispClient, fetchModels, webgpuSupport } from "./client.js";
import { renderMarkdown } from "./markdown.js";

const DEFAULT_SAMPLING = { temperature: 0.2, top_p: 0.9, repetition_penalty: 1.1, max_new_tokens: 512 };
const LOAD_OPTIONS = { context: 2048, f32: false };
const PHASES = ["boot", "fetch", "upload", "compile"];
const STOP_GRACE_MS = 60000; // after Stop, how long to wait for the worker's `done` (a slow GPU finishes its step first)
const SUGGESTIONS = [
  "What is the capital of France?",
  "Explain WebGPU to a ten-year-old.",
  "Write a haiku about autumn rain.",
  "Give me three tips for writing clear emails.",
];
const ERROR_TITLES = {
  load: "Couldn’t load the model",
  generate: "The answer failed",
  "no-webgpu": "WebGPU isn’t available",
  internal: "The engine hit an internal error",
  crash: "The engine stopped unexpectedly",
  models: "Couldn’t list the models",
};

const CHIP_ICON = '<svg class="icon" aria-hidden="true" viewBox="0 0 24 24"><path d="M9 2v2H7a3 3 0 0 0-3 3v2H2v2h2v2H2v2h2v2a3 3 0 0 0 3 3h2v2h2v-2h2v2h2v-2h2a3 3 0 0 0 3-3v-2h2v-2h-2v-2h2V9h-2V7a3 3 0 0 0-3-3h-2V2h-2v2h-2V2zM7 6h10a1 1 0 0 1 1 1v10a1 1 0 0 1-1 1H7a1 1 0 0 1-1-1V7a1 1 0 0 1 1-1m2 3v6h6V9z"/></svg>';

const $ = (id) => document.getElementById(id);
const ui = {
  select: $("model-select"), load: $("load-button"), gpuPanel: $("gpu-panel"), gpuBody: $("gpu-body"),
  settingsButton: $("settings-button"), settings: $("settings"), settingsForm: $("settings-form"),
  settingsReset: $("settings-reset"), newChat: $("new-chat"), banner: $("error-banner"),
  errorTitle: $("error-title"), errorMessage: $("error-message"), errorDismiss: $("error-dismiss"),
  main: $("main"), help: $("webgpu-help"), welcome: $("welcome"), welcomeSize: $("welcome-size"),
  progress: $("progress"), progressModel: $("progress-model"), progressElapsed: $("progress-elapsed"),
  progressBar: $("progress-bar"), progressFill: $("progress-fill"), progressLabel: $("progress-label"),
  ready: $("ready"), readyTitle: $("ready-title"), readySub: $("ready-sub"), suggestions: $("suggestions"),
  messages: $("messages"), composer: $("composer"), prompt: $("prompt"), send: $("send-button"),
  stop: $("stop-button"), announcer: $("announcer"),
};

const state = {
  phase: "idle",        // idle | loading | ready | generating
  models: [],
  loaded: null,         // the model (from /api/models) the worker holds
  loadedEvent: null,
  history: [],          // [{role, content}] sent with every generate
  gen: null,            // the running Generation
  client: null,
  noGpu: false,
  sampling: readSampling(),
};

// ---------- formatting ----------
const fmtSize = (bytes) => (bytes >= 1e9 ? `${(bytes / 1e9).toFixed(1)} GB` : `${Math.max(1, Math.round(bytes / 1e6))} MB`);
function fmtProgressBytes(done, total) {
  if (total >= 1e9) return `${(done / 1e9).toFixed(2)} / ${(total / 1e9).toFixed(2)} GB`;
  return `${Math.round(done / 1e6)} / ${Math.round(total / 1e6)} MB`;
}
const fmtMs = (ms) => (ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`);
const fmtRate = (r) => (r >= 100 ? r.toFixed(0) : r.toFixed(1));
function fmtLimit(key, value) {
  if (typeof value !== "number") return String(value);
  if (/size|bytes/i.test(key) && value >= 1024) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = value, u = 0;
    while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
    return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[u]}`;
  }
  return value.toLocaleString("en-US");
}

function narrate({ phase, done = 0, total = 0 }) {
  switch (phase) {
    case "boot": return "Starting Python…";
    case "fetch": return total ? `Downloading weights… ${fmtProgressBytes(done, total)}` : "Downloading weights…";
    case "upload": return total ? `Uploading weights to the GPU… ${fmtProgressBytes(done, total)}` : "Uploading weights to the GPU…";
    case "compile": return total ? `Compiling kernels… ${done} / ${total}` : "Compiling kernels…";
    default: return `${String(phase).charAt(0).toUpperCase()}${String(phase).slice(1)}…`;
  }
}

// ---------- view state ----------
function setPhase(phase) {
  state.phase = phase;
  document.body.dataset.phase = phase;
  render();
}

function render() {
  const { phase, loaded, noGpu } = state;
  const busy = phase === "loading";
  const hasMessages = ui.messages.childElementCount > 0;
  const selected = selectedModel();

  ui.help.hidden = !noGpu;
  ui.welcome.hidden = noGpu || !!loaded || busy || hasMessages;
  ui.progress.hidden = !busy;
  ui.ready.hidden = !loaded || busy || hasMessages;

  ui.select.disabled = busy || state.models.length === 0;
  const sameModel = loaded && selected && selected.id === loaded.id;
  ui.load.disabled = noGpu || busy || !selected || sameModel;
  ui.load.classList.toggle("is-busy", busy);
  ui.load.classList.toggle("is-done", !!sameModel && !busy);
  ui.load.querySelector(".btn-label").textContent = busy ? "Loading…" : sameModel ? "Loaded" : loaded ? "Switch" : "Load";

  ui.prompt.disabled = busy || noGpu;
  const narrow = window.innerWidth < 560;
  ui.prompt.placeholder = loaded ? (narrow ? "Message…" : `Message ${loaded.name}…`)
    : busy ? "Loading the model…" : narrow ? "Load a model first" : "Load a model to start chatting";
  const generating = phase === "generating";
  ui.send.hidden = generating;
  ui.stop.hidden = !generating;
  if (!generating) {
    ui.stop.disabled = false;
    ui.stop.querySelector("span").textContent = "Stop";
  }
  ui.send.disabled = phase !== "ready" || !ui.prompt.value.trim();
  ui.gpuPanel.classList.toggle("is-live", !!loaded);
}

function selectedModel() {
  return state.models.find((m) => m.id === ui.select.value) || null;
}

function announce(text) {
  ui.announcer.textContent = "";
  requestAnimationFrame(() => { ui.announcer.textContent = text; });
}

// ---------- errors ----------
function showError(kind, message) {
  ui.errorTitle.textContent = ERROR_TITLES[kind] || ERROR_TITLES.internal;
  ui.errorMessage.textContent = message;
  ui.banner.dataset.kind = kind;
  ui.banner.hidden = false;
}
function hideError() { ui.banner.hidden = true; }

function showNoWebGPU(reason) {
  state.noGpu = true;
  $("webgpu-secure").hidden = reason !== "insecure-context";
  render();
}

// ---------- the worker ----------
function client() {
  if (state.client) return state.client;
  const c = new WispClient();
  c.addEventListener("crash", (ev) => {
    const during = state.phase === "loading" ? "while loading" : state.phase === "generating" ? "while answering" : "";
    showError("crash", `${ev.detail.message}${during ? ` (${during})` : ""}. Press Load to start it again.`);
    state.loaded = null;
    state.loadedEvent = null;
    renderGpu(null);
    setPhase("idle");
  });
  c.addEventListener("error", (ev) => showError(ev.detail.kind, ev.detail.message));
  state.client = c;
  return c;
}

async function loadSelected() {
  const model = selectedModel();
  if (!model || state.phase === "loading" || state.noGpu) return;
  if (state.gen) state.gen.cancel();
  hideError();
  const c = client();
  if (state.loaded) c.unload();
  state.loaded = null;
  state.loadedEvent = null;
  renderGpu(null);
  resetProgress(model);
  setPhase("loading");
  ui.progress.scrollIntoView({ block: "nearest" });
  const t0 = performance.now();
  const tick = setInterval(() => { ui.progressElapsed.textContent = `${Math.floor((performance.now() - t0) / 1000)} s`; }, 500);
  try {
    const loaded = await c.load(model, LOAD_OPTIONS, { onProgress });
    state.loaded = model;
    state.loadedEvent = loaded;
    renderGpu(loaded, model, performance.now() - t0);
    showReady(model, loaded.load_ms ?? performance.now() - t0);
    setPhase("ready");
    announce(`${model.name} is loaded. Type a message.`);
    ui.prompt.focus();
  } catch (err) {
    if (err.kind !== "crash") {
      showError(err.kind === "no-webgpu" ? "no-webgpu" : err.kind === "internal" ? "internal" : "load", err.message);
      if (err.kind === "no-webgpu") showNoWebGPU("no-adapter");
      setPhase("idle");
    }
  } finally {
    clearInterval(tick);
  }
}

function resetProgress(model) {
  ui.progressModel.textContent = model.name;
  ui.progressElapsed.textContent = "0 s";
  for (const li of ui.progress.querySelectorAll("[data-phase]")) li.className = li.dataset.phase === "boot" ? "active" : "";
  setBar(null);
  ui.progressLabel.textContent = narrate({ phase: "boot" });
}

function setBar(fraction) {
  ui.progressBar.classList.toggle("indeterminate", fraction === null);
  if (fraction === null) {
    ui.progressBar.removeAttribute("aria-valuenow");
    ui.progressFill.style.width = "";
  } else {
    const pct = Math.max(0, Math.min(100, fraction * 100));
    ui.progressBar.setAttribute("aria-valuenow", pct.toFixed(0));
    ui.progressFill.style.width = `${pct}%`;
  }
}

function onProgress(p) {
  const at = PHASES.indexOf(p.phase);
  for (const li of ui.progress.querySelectorAll("[data-phase]")) {
    const i = PHASES.indexOf(li.dataset.phase);
    li.className = at < 0 ? li.className : i < at ? "done" : i === at ? "active" : "";
  }
  setBar(p.total > 0 ? p.done / p.total : null);
  ui.progressLabel.textContent = narrate(p);
}

function showReady(model, loadMs) {
  ui.readyTitle.textContent = `${model.name} is ready`;
  ui.readySub.textContent = `Loaded in ${fmtMs(loadMs)} · ${fmtSize(model.size)} · runs on your GPU, offline from here on`;
  ui.suggestions.replaceChildren(...SUGGESTIONS.map((text) => {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "suggestion";
    b.setAttribute("role", "listitem");
    b.textContent = text;
    b.addEventListener("click", () => send(text));
    return b;
  }));
}

// ---------- the GPU panel ----------
function renderGpu(loaded, model = null, wallMs = 0) {
  if (!loaded) {
    ui.gpuBody.replaceChildren(el("p", "muted", "Load a model to see which GPU runs it."));
    return;
  }
  const adapter = loaded.adapter || {};
  const features = [...(adapter.features || [])].sort();
  const limits = Object.entries(adapter.limits || {}).sort(([a], [b]) => a.localeCompare(b));
  const extra = Object.entries(adapter).filter(([k, v]) => !["name", "features", "limits"].includes(k) && v !== "" && v !== null && typeof v !== "object");

  const head = el("div", "gpu-head");
  const badge = el("span", "badge", "");
  badge.innerHTML = CHIP_ICON;
  head.append(badge, el("strong", "gpu-name", adapter.name || "Unknown adapter"));
  const kv = el("dl", "kv");
  const row = (k, v) => kv.append(el("dt", "", k), el("dd", "", v));
  if (model) row("Model", model.name);
  row("Loaded in", fmtMs(loaded.load_ms ?? wallMs));
  if (state.client?.booted?.pyodide_ms != null) row("Python started in", fmtMs(state.client.booted.pyodide_ms));
  row("Half precision", features.includes("shader-f16") ? "yes (shader-f16)" : "no (f32 kernels)");
  if (loaded.wasm_memory_bytes) row("Python memory", fmtLimit("bytes", loaded.wasm_memory_bytes));
  for (const [k, v] of extra) row(k.replace(/([A-Z])/g, " $1").replace(/^./, (c) => c.toUpperCase()), String(v));

  const chips = el("ul", "chips");
  chips.setAttribute("aria-label", "Adapter features");
  for (const f of features) chips.append(el("li", f === "shader-f16" ? "chip chip-accent" : "chip", f));
  if (!features.length) chips.append(el("li", "muted", "none reported"));

  const table = el("table", "limits");
  const tbody = el("tbody", "", "");
  for (const [k, v] of limits) {
    const tr = el("tr", "", "");
    tr.append(el("th", "", k), el("td", "", fmtLimit(k, v)));
    tbody.append(tr);
  }
  table.append(tbody);

  ui.gpuBody.replaceChildren(head, kv, el("h3", "", `Features (${features.length})`), chips,
    el("h3", "", `Limits (${limits.length})`), limits.length ? table : el("p", "muted", "none reported"));
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text) node.textContent = text;
  return node;
}

// ---------- messages ----------
function nearBottom() {
  const m = ui.main;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 96;
}
function scrollToBottom() { ui.main.scrollTop = ui.main.scrollHeight; }

function addUserMessage(text) {
  const article = el("article", "msg msg-user", "");
  article.setAttribute("aria-label", "You");
  const bubble = el("div", "bubble", text);
  bubble.dataset.testid = "user-message";
  article.append(bubble);
  ui.messages.append(article);
  return article;
}

function addAssistantMessage(model) {
  const article = el("article", "msg msg-assistant", "");
  article.setAttribute("aria-label", model.name);
  article.setAttribute("aria-busy", "true");
  const avatar = document.createElement("img");
  avatar.src = "/static/icon.svg";
  avatar.alt = "";
  avatar.className = "avatar";
  const body = el("div", "msg-body", "");
  const name = el("div", "msg-name", model.name);
  const content = el("div", "content markdown", "");
  content.dataset.testid = "assistant-message";
  const typing = el("span", "typing", "");
  typing.setAttribute("aria-label", "Thinking");
  typing.append(el("i"), el("i"), el("i"));
  content.append(typing);
  const foot = el("div", "msg-foot", "");
  const stats = el("span", "stats", "");
  stats.dataset.testid = "stats";
  foot.append(stats);
  body.append(name, content, foot);
  article.append(avatar, body);
  ui.messages.append(article);

  let pending = null;
  let text = "";
  const paint = () => {
    pending = null;
    const stick = nearBottom();
    renderMarkdown(content, text);
    content.classList.add("streaming");
    if (stick) scrollToBottom();
  };
  return {
    article,
    setText(t) {
      text = t;
      if (!pending) pending = requestAnimationFrame(paint);
    },
    finish(statsText, title, fullText) {
      if (pending) cancelAnimationFrame(pending);
      text = fullText;
      const stick = nearBottom();
      renderMarkdown(content, text);
      content.classList.remove("streaming");
      if (!text) content.append(el("span", "muted empty", "(no text)"));
      stats.textContent = statsText;
      if (title) stats.title = title;
      foot.append(copyButton(() => text));
      article.setAttribute("aria-busy", "false");
      if (stick) scrollToBottom();
    },
    fail(message, partial) {
      if (pending) cancelAnimationFrame(pending);
      renderMarkdown(content, partial);
      content.classList.remove("streaming");
      if (!partial) content.append(el("span", "muted empty", "No answer."));
      article.classList.add("msg-failed");
      stats.textContent = `Failed: ${message}`;
      article.setAttribute("aria-busy", "false");
    },
  };
}

function copyButton(getText) {
  const b = el("button", "icon-button copy", "");
  b.type = "button";
  b.setAttribute("aria-label", "Copy the answer");
  b.title = "Copy";
  b.innerHTML = '<svg class="icon" aria-hidden="true" viewBox="0 0 24 24"><path d="M16 1H4a2 2 0 0 0-2 2v14h2V3h12zm3 4H8a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h11a2 2 0 0 0 2-2V7a2 2 0 0 0-2-2m0 16H8V7h11z"/></svg>';
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(getText());
      b.classList.add("copied");
      b.title = "Copied";
      announce("Copied the answer");
      setTimeout(() => { b.classList.remove("copied"); b.title = "Copy"; }, 1500);
    } catch { /* clipboard refused: nothing to do */ }
  });
  return b;
}

function statsLine(done, local) {
  const n = Array.isArray(done.tokens) ? done.tokens.length : local.tokens;
  const parts = [`${n} token${n === 1 ? "" : "s"}`];
  const rate = done.decode_tok_s ?? (local.decodeMs > 0 && n > 1 ? ((n - 1) * 1000) / local.decodeMs : null);
  if (rate != null && Number.isFinite(rate) && rate > 0) parts.push(`${fmtRate(rate)} tok/s`);
  const ttft = done.ttft_ms ?? local.ttft;
  if (ttft != null) parts.push(`${fmtMs(ttft)} to first token`);
  if (done.stop === "cancel") parts.push("stopped");
  else if (done.stop === "length") parts.push("reached the token limit");
  const title = [];
  if (done.prompt_tokens != null) title.push(`Prompt: ${done.prompt_tokens} tokens${done.prefill_tok_s ? ` at ${fmtRate(done.prefill_tok_s)} tok/s` : ""}`);
  if (done.host_ms_per_token != null) title.push(`Python host time: ${done.host_ms_per_token.toFixed(1)} ms per token`);
  return [parts.join(" · "), title.join(" · ")];
}

async function send(rawText) {
  const text = (rawText ?? ui.prompt.value).trim();
  if (!text || state.phase !== "ready" || !state.loaded) return;
  hideError();
  const model = state.loaded;
  state.history.push({ role: "user", content: text });
  const userTurn = state.history.length - 1;
  addUserMessage(text);
  if (rawText === undefined) { ui.prompt.value = ""; autosize(); }
  const view = addAssistantMessage(model);
  setPhase("generating");
  scrollToBottom();

  const t0 = performance.now();
  let firstAt = null;
  const gen = client().generate(
    { messages: state.history.map((m) => ({ ...m })), sampling: requestSampling() },
    { onToken: (_msg, g) => { firstAt ??= performance.now(); view.setText(g.text); } },
  );
  state.gen = gen;
  try {
    const done = await Promise.race([gen.done, stopFallback(gen)]);
    const end = performance.now();
    state.history.push({ role: "assistant", content: gen.text });
    const local = { tokens: gen.tokens, ttft: firstAt === null ? null : firstAt - t0, decodeMs: firstAt === null ? 0 : end - firstAt };
    const [line, title] = statsLine(done, local);
    view.finish(line, title, gen.text);
    announce(done.stop === "cancel" ? "Stopped." : "Answer complete.");
  } catch (err) {
    if (state.history.length - 1 === userTurn) state.history.pop(); // the model never answered this turn
    view.fail(err.message, gen.text);
    if (err.kind !== "crash" && err.kind !== "terminated") showError(err.kind === "internal" ? "internal" : "generate", err.message);
  } finally {
    if (state.gen === gen) state.gen = null;
    if (state.phase === "generating") setPhase("ready");
    if (document.activeElement === document.body || document.activeElement === ui.stop) ui.prompt.focus();
  }
}

// A worker that never confirms a cancel must not leave the page stuck in "generating".
function stopFallback(gen) {
  return new Promise((resolve) => {
    const check = setInterval(() => {
      if (!gen.cancelled) return;
      clearInterval(check);
      setTimeout(() => resolve({ stop: "cancel" }), STOP_GRACE_MS);
    }, 100);
    gen.done.finally(() => clearInterval(check)).catch(() => {});
  });
}

function stop() {
  if (!state.gen || state.gen.cancelled) return;
  state.gen.cancel(); // nothing more is shown; the worker confirms with `done` after its current step
  ui.stop.disabled = true;
  ui.stop.querySelector("span").textContent = "Stopping…";
}

function newChat() {
  if (state.gen) state.gen.cancel();
  state.history = [];
  ui.messages.replaceChildren();
  hideError();
  render();
  if (!ui.prompt.disabled) ui.prompt.focus();
}

// ---------- sampling settings ----------
function readSampling() {
  try {
    const saved = JSON.parse(localStorage.getItem("wisp.sampling") || "{}");
    const out = { ...DEFAULT_SAMPLING };
    for (const k of Object.keys(DEFAULT_SAMPLING)) if (Number.isFinite(saved[k])) out[k] = saved[k];
    return out;
  } catch {
    return { ...DEFAULT_SAMPLING };
  }
}

function requestSampling() {
  const s = state.sampling;
  // No seed: each answer draws fresh (a JS null would reach Python as JsNull, not None).
  return {
    temperature: s.temperature, top_k: 0, top_p: s.top_p, repetition_penalty: s.repetition_penalty,
    max_new_tokens: Math.max(1, Math.round(s.max_new_tokens)),
  };
}

function fillSettings() {
  for (const [k, v] of Object.entries(state.sampling)) {
    const input = ui.settingsForm.elements[k];
    input.value = String(v);
    const out = ui.settingsForm.querySelector(`output[data-for="${k}"]`);
    if (out) out.value = Number(v).toFixed(2);
  }
}

function onSettingsInput(ev) {
  const input = ev.target;
  if (!(input.name in DEFAULT_SAMPLING)) return;
  const v = Number(input.value);
  if (!Number.isFinite(v)) return;
  state.sampling[input.name] = input.name === "max_new_tokens" ? Math.max(1, Math.min(8192, Math.round(v))) : v;
  const out = ui.settingsForm.querySelector(`output[data-for="${input.name}"]`);
  if (out) out.value = v.toFixed(2);
  try { localStorage.setItem("wisp.sampling", JSON.stringify(state.sampling)); } catch { /* private mode */ }
}

function toggleSettings(open = ui.settings.hidden) {
  ui.settings.hidden = !open;
  ui.settingsButton.setAttribute("aria-expanded", String(open));
  if (open) {
    ui.gpuPanel.open = false;
    ui.settingsForm.elements.temperature.focus();
  }
}

// ---------- composer ----------
function autosize() {
  ui.prompt.style.height = "auto";
  ui.prompt.style.height = `${Math.min(ui.prompt.scrollHeight, 220)}px`;
}

// ---------- start ----------
async function init() {
  fillSettings();
  const support = webgpuSupport();
  if (!support.ok) showNoWebGPU(support.reason);

  ui.load.addEventListener("click", loadSelected);
  ui.select.addEventListener("change", () => { updateWelcome(); render(); });
  ui.composer.addEventListener("submit", (ev) => { ev.preventDefault(); send(); });
  ui.prompt.addEventListener("input", () => { autosize(); render(); });
  ui.prompt.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      send();
    } else if (ev.key === "Escape" && state.gen) {
      ev.preventDefault();
      stop();
    }
  });
  ui.stop.addEventListener("click", stop);
  ui.newChat.addEventListener("click", newChat);
  ui.errorDismiss.addEventListener("click", () => { hideError(); ui.prompt.focus(); });
  ui.settingsButton.addEventListener("click", () => toggleSettings());
  ui.settingsForm.addEventListener("input", onSettingsInput);
  ui.settingsForm.addEventListener("submit", (ev) => { ev.preventDefault(); toggleSettings(false); });
  ui.settingsReset.addEventListener("click", () => {
    state.sampling = { ...DEFAULT_SAMPLING };
    try { localStorage.removeItem("wisp.sampling"); } catch { /* ignore */ }
    fillSettings();
  });
  ui.gpuPanel.addEventListener("toggle", () => { if (ui.gpuPanel.open) toggleSettings(false); });
  document.addEventListener("keydown", (ev) => {
    if (ev.key !== "Escape") return;
    if (!ui.settings.hidden) { toggleSettings(false); ui.settingsButton.focus(); }
    if (ui.gpuPanel.open) { ui.gpuPanel.open = false; ui.gpuPanel.querySelector("summary").focus(); }
  });
  document.addEventListener("pointerdown", (ev) => {
    if (!ui.settings.hidden && !ev.target.closest(".popover-anchor")) toggleSettings(false);
    if (ui.gpuPanel.open && !ev.target.closest("#gpu-panel")) ui.gpuPanel.open = false;
  });

  window.addEventListener("resize", render);
  render();
  try {
    state.models = await fetchModels();
  } catch (err) {
    ui.select.replaceChildren(new Option("No models available"));
    showError("models", err.message);
    return;
  }
  ui.select.replaceChildren(...state.models.map((m) => {
    const o = new Option(`${m.name} · ${fmtSize(m.size)}`, m.id);
    if (m.description) o.title = m.description;
    o.selected = !!m.default;
    return o;
  }));
  if (!state.models.some((m) => m.default) && state.models.length) ui.select.value = state.models[0].id;
  if (!state.models.length) ui.select.replaceChildren(new Option("No models on this server"));
  updateWelcome();
  render();
  document.body.dataset.models = "ready";
}

function updateWelcome() {
  const m = selectedModel();
  ui.welcomeSize.textContent = !m ? "" : m.description ? `${m.description}.` : `${m.name}: ${fmtSize(m.size)} of weights.`;
}

init();
