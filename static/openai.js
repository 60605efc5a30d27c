// Wisp for apps: OpenAI's client shape over the page's engine (a module worker: Pyodide + WebGPU).
// The request bodies, chunks, responses, finish_reasons and usage are OpenAI's; the worker checks
// and answers them with the same Python as the desktop's /v1 (py_engine/api/).
//
//   import { Wisp } from "/static/openai.js";
//   const wisp = new Wisp();                                  // models from /api/models
//   const stream = await wisp.chat.completions.create({ model, messages, stream: true });
//   for await (const chunk of stream) out += chunk.choices[0]?.delta?.content ?? "";
//   const { data } = await wisp.embeddings.create({ model: "all-minilm-l6-v2", input: ["hi"] });
//
// Wisp speaks to the page's engine (client.js sharedClient()): on Wisp's chat page, the worker and
// the model the chat has loaded. The model named by a request is loaded first when it is not the
// one loaded (downloaded into the weight store once; onProgress hears the load's progress events). Errors are WispErrors whose
// kind is the worker's ("request": a body the API refuses; "load", "quota", "no-webgpu", ...).
// Breaking out of a stream's loop (or stream.controller.abort()) stops the generation.
//
// Memory, Wisp's extension (the desktop's /v1/memory routes, docs/memory.md): a collection of the
// user's documents, kept in this browser (OPFS) and embedded by the server's embedding model
// (all-MiniLM-L6-v2 where served; `memoryModel` names another), recalled into a chat by its `memory`:
//
//   await wisp.memory.documents.create({ collection: "notes", name: "trains.pdf", data: file });  // or text
//   const { data: docs } = await wisp.memory.documents.list({ collection: "notes" });
//   await wisp.memory.documents.delete({ collection: "notes", id: docs[0].id });
//   const { data: hits } = await wisp.memory.recall({ collection: "notes", query: "When does it leave?", k: 3 });
//   const answer = await wisp.chat.completions.create({ model, messages, memory: "notes" });
//   answer.memory.citations;  // [{n, source, place, document, start, end, text, score}]: what [n] cites
//   const lines = await wisp.memory.export({ collection: "notes" });   // a Blob of JSON lines (the desktop's export)
//   await wisp.memory.import({ collection: "copy", data: lines });     // a File, Blob or text: {imported, skipped}
//   await wisp.memory.import(text);                                     // into "documents"
// An export moves between the page and the desktop's /v1/memory/{c}/export and import (another embedding
// model's is embedded again); an import is read and sent in pieces, so a large file never sits whole.
//
// Audio, as the desktop's /v1/audio (static/openai_audio.js): the server's speech-to-text model
// (Whisper, Moonshine) and text-to-speech model (Kani-TTS-2), each loaded on its first request:
//
//   const { text } = await wisp.audio.transcriptions.create({ file, model: "whisper-base" });  // a File / Blob
//   const srt = await wisp.audio.transcriptions.create({ file, model, response_format: "srt" });
//   const { text: english } = await wisp.audio.translations.create({ file, model: "whisper-base" });
//   const res = await wisp.audio.speech.create({ model: "kani-tts-2", input: "Hello!", response_format: "wav" });
//   const wav = await res.arrayBuffer();                 // or res.body: the audio streams as it is made

import { fetchModels, memoryModel, sharedClient, WispError } from "./client.js";
import { createSpeech, createTranscription } from "./openai_audio.js";

export { WispError };

export class Wisp {
  /** client: a WispClient (default: the page's, sharedClient()); models: the list URL or the list itself
   *  ([{id, kind, files, ...}] as /api/models gives); loadOptions: WispClient.load's options. */
  constructor({ client = null, models = "/api/models", loadOptions = {}, onProgress = null, memoryModel: memoryId = null } = {}) {
    this.client = client || sharedClient();
    this._models = models;
    this._loadOptions = loadOptions;
    this._onProgress = onProgress;
    this._memoryId = memoryId;  // the embedding model memory uses (default: memoryModel()'s pick)
    this._loading = null;  // the load under way: {key (model id / precision), promise}
    this._queue = Promise.resolve();  // one request at a time, in order (one GPU, one model)
    this.chat = { completions: { create: (body) => this._create("chat.completions", body) } };
    this.completions = { create: (body) => this._create("completions", body) };
    this.embeddings = { create: (body) => this._create("embeddings", body) };
    this.models = { list: async () => ({ object: "list", data: (await this._list()).map(modelObject) }) };
    // speech (static/openai_audio.js): beside a chat, not queued behind it (the worker has its own turn for speech)
    this.audio = {
      transcriptions: { create: (body) => createTranscription(this, body) },
      translations: { create: (body) => createTranscription(this, body, "translate") },
      speech: { create: (body) => createSpeech(this, body) },
    };
    this.memory = {
      documents: {
        create: (body) => this._memory(body, async (c, e, name) => (await c.memoryAdd(name, e, await documentOf(body))).added),
        list: (body) => this._memory(body, async (c, e, name) => listOf((await c.memoryList(name, e)).documents)),
        delete: (body) => this._memory(body, async (c, e, name) => ({ id: (await c.memoryDelete(name, e, body.id)).deleted, deleted: true })),
      },
      recall: (body) => this._memory(body, async (c, e, name) => listOf((await c.memoryRecall(name, e, body)).hits)),
      export: (body) => this._memory(body, async (c, e, name) => (await c.memoryExport(name, e)).blob),
      import: (body) => {
        const asked = typeof body === "string" || isBlob(body) ? { data: body } : body || {};
        return this._memory(asked, async (c, e, name) => c.memoryImport(name, e, linesOfImport(asked.data),
          { name: asked.name ?? asked.data?.name ?? "the import" }));
      },
    };
  }

  async _embedder() {
    const models = await this._list();
    const model = this._memoryId ? models.find((m) => m.id === this._memoryId) : memoryModel(models);
    if (!model) throw new WispError("request", this._memoryId ? `No model '${this._memoryId}' here for memory.` : "No embedding model here for memory: the server must serve one (python -m py_engine fetch all-minilm-l6-v2).");
    return model;
  }

  // A memory request, in turn with the others (one GPU); `collection` defaults to "documents".
  _memory(body, work) {
    const turn = this._queue.then(async () => work(this.client, await this._embedder(), body?.collection ?? "documents"));
    this._queue = turn.catch(() => {});
    return turn;
  }

  async _list() {
    if (typeof this._models === "string") this._models = await fetchModels(this._models);
    return this._models;
  }

  // A body's precision ("fast" or "exact", Wisp's own field) is a load option: another one than
  // the loaded model's loads it again.
  async _ensure(id, precision) {
    const loaded = this.client.loaded;
    if (loaded?.model === id && (!precision || loaded.precision === precision)) return;
    const key = `${id}/${precision ?? ""}`;
    if (this._loading?.key !== key) {
      const model = (await this._list()).find((m) => m.id === id);
      if (!model) throw new WispError("request", `No model '${id}' here (wisp.models.list() lists them).`);
      const options = precision ? { ...this._loadOptions, precision } : this._loadOptions;
      const promise = this.client.load(model, options, { onProgress: this._onProgress });
      this._loading = { key, promise };
      promise.finally(() => { if (this._loading?.promise === promise) this._loading = null; }).catch(() => {});
    }
    await this._loading.promise;
  }

  /** A stream resolves once its model is loaded: an async iterable of chunks with `response` (the
   *  whole completion, a promise) and controller.abort(). Without stream: the response. */
  _create(endpoint, body) {
    const turn = this._queue.then(async () => {
      const embedder = body?.memory != null ? await this._embedder() : null;  // Wisp's memory: it recalls
      await this._ensure(body?.model, body?.precision);
      return this.client.openai(endpoint, body, { embedder });
    });
    this._queue = turn.then((gen) => gen.done, () => {}).catch(() => {});
    if (!body?.stream) return turn.then((gen) => gen.done);
    return turn.then((gen) => streamOf(gen));
  }
}

function streamOf(gen) {
  return {
    response: gen.done,
    controller: { abort: () => gen.cancel() },
    [Symbol.asyncIterator]: () => gen[Symbol.asyncIterator](),
  };
}

const listOf = (data) => ({ object: "list", data });

/** A document to add: {name, text} or {name, data}, data a File or Blob, an ArrayBuffer or typed
 *  array (copied: the worker takes the copy), or base64 (as the desktop's route takes it). */
async function documentOf(body) {
  const { name, text, data, media_type: type, metadata } = body || {};
  if (typeof name !== "string" || !name) throw new WispError("request", "'name' must be the document's name");
  const out = { name, media_type: type ?? (typeof Blob !== "undefined" && data instanceof Blob && data.type ? data.type : null), metadata };
  if (typeof text === "string") return { ...out, text };
  if (typeof data === "string") return { ...out, data: Uint8Array.from(atob(data), (c) => c.charCodeAt(0)).buffer };
  if (typeof Blob !== "undefined" && data instanceof Blob) return { ...out, data: await data.arrayBuffer() };
  if (ArrayBuffer.isView(data)) return { ...out, data: data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) };
  if (data instanceof ArrayBuffer) return { ...out, data: data.slice(0) };
  throw new WispError("request", "a document needs 'text' or 'data' (its file: a File, bytes or base64)");
}

const isBlob = (value) => typeof Blob !== "undefined" && value instanceof Blob;

/** An import's export: a File or Blob (read in pieces), a text, or bytes. */
function linesOfImport(data) {
  if (typeof data === "string" || isBlob(data)) return data;
  if (ArrayBuffer.isView(data) || data instanceof ArrayBuffer) return new Blob([data]);
  throw new WispError("request", "an import needs 'data': the export's JSON lines (a File, a Blob, text or bytes)");
}

function modelObject(model) {
  return { id: model.id, object: "model", created: 0, owned_by: "wisp" };
}
