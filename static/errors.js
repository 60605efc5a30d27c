// WispError: what the engine refuses or fails, typed by kind (the worker's `error` events, plus
// "crash", "terminated" and "moved" of the page's own).

export class WispError extends Error {
  constructor(kind, message, id = null) {
    super(message);
    this.name = "WispError";
    this.kind = kind;
    this.id = id;
  }
}
