// Generation: one `openai` request as the page sees it (static/client.js's WispClient makes them):
// async-iterable over the stream's chunks (or, for the chat, over text pieces), `done` resolving
// with the whole response. Split out of client.js, which stays the worker protocol's page side.

/** One `openai` request: async-iterable over its stream's chunks, `done` resolving with the whole
 *  response. asText (generate()): over text pieces {text, index} instead, `done` resolving with the
 *  answer's stats (py_engine/web/protocol.py STATS) and the response. */
export class Generation {
  constructor(client, id, { asText = false } = {}) {
    this.client = client;
    this.id = id;
    this.asText = asText;
    this.text = "";
    this.tokens = 0;  // text pieces seen (the stats count the tokens)
    this.cancelled = false;
    this.onToken = null;
    this._queue = [];
    this._waiters = [];
    this._finished = false;
    this._error = null;
    this._release = () => {};  // WebKit's first-forward breadcrumb, if this generation holds it
    this.done = new Promise((resolve, reject) => { this._resolve = resolve; this._reject = reject; });
    this.done.catch(() => {}); // rejections reach whoever awaits; none are left unhandled
  }

  cancel() {
    if (this._finished || this.cancelled) return;
    this.cancelled = true;
    this.client._post({ type: "cancel", id: this.id });
  }

  _chunk(chunk) {
    if (chunk.memory) this.memory = chunk.memory;  // the first chunk of an answer from the user's documents
    if (!this.asText) { this._push({ value: chunk, done: false }); return; }
    const choice = chunk.choices[0];
    const text = choice?.delta?.content ?? choice?.text ?? "";
    if (!text) return;  // the role's chunk (sent before the first forward), the finish's
    this._release();  // a forward has run
    if (this._finished || this.cancelled) return; // nothing is shown after Stop
    const piece = { text, index: this.tokens };
    this.text += text;
    this.tokens += 1;
    if (this.onToken) this.onToken(piece, this);
    this._push({ value: piece, done: false });
  }

  _response(msg) {
    this._finish(this.asText ? { ...msg.stats, response: msg.body } : msg.body);
  }

  _finish(msg) {
    this._release();
    this._finished = true;
    this._resolve(msg);
    this._push({ value: undefined, done: true });
  }

  _fail(err) {
    if (err.kind !== "crash") this._release();  // a crashed worker keeps the breadcrumb: a crash
    this._finished = true;
    this._error = err;
    this._reject(err);
    for (const w of this._waiters.splice(0)) w.reject(err);
  }

  _push(item) {
    const w = this._waiters.shift();
    if (w) w.resolve(item); else this._queue.push(item);
  }

  [Symbol.asyncIterator]() {
    return {
      next: () => {
        if (this._queue.length) return Promise.resolve(this._queue.shift());
        if (this._error) return Promise.reject(this._error);
        if (this._finished) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => this._waiters.push({ resolve, reject }));
      },
      return: () => { this.cancel(); return Promise.resolve({ value: undefined, done: true }); },
    };
  }
}
