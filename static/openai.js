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

import { fetchModels, sharedClient, WispError } from "./client.js";

export { WispError };

export class Wisp {
  /** client: a WispClient (default: the page's, sharedClient()); models: the list URL or the list itself
   *  ([{id, kind, files, ...}] as /api/models gives); loadOptions: WispClient.load's options. */
  constructor({ client = null, models = "/api/models", loadOptions = {}, onProgress = null } = {}) {
    this.client = client || sharedClient();
    this._models = models;
    this._loadOptions = loadOptions;
    this._onProgress = onProgress;
    this._loading = null;  // the load under way: {key (model id / precision), promise}
    this._queue = Promise.resolve();  // one request at a time, in order (one GPU, one model)
    this.chat = { completions: { create: (body) => this._create("chat.completions", body) } };
    this.completions = { create: (body) => this._create("completions", body) };
    this.embeddings = { create: (body) => this._create("embeddings", body) };
    this.models = { list: async () => ({ object: "list", data: (await this._list()).map(modelObject) }) };
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
      await this._ensure(body?.model, body?.precision);
      return this.client.openai(endpoint, body);
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

function modelObject(model) {
  return { id: model.id, object: "model", created: 0, owned_by: "wisp" };
}
