// The models a server lists (/api/models) and the model reference a load message carries (the
// worker protocol's MODEL: py_engine/web/protocol.py). Split out of client.js, which re-exports them.

import { WispError } from "./errors.js";

/** GET /api/models → [{id, name, kind, files, default, size}] (size: bytes, the sum of files). */
export async function fetchModels(url = "/api/models") {
  const res = await fetch(url);
  if (!res.ok) throw new WispError("models", `GET ${url} answered ${res.status} ${res.statusText}`);
  const models = await res.json();
  return models.map((m) => ({ ...m, size: modelSize(m) }));
}

/** The embedding model the page's memory uses: all-MiniLM-L6-v2 where served, else the first
 *  embedding model of the list (null: none, so no memory here). */
export const MEMORY_MODEL = "all-minilm-l6-v2";
export function memoryModel(models) {
  const embedders = (models || []).filter((m) => m.task === "embedding");
  return embedders.find((m) => m.id === MEMORY_MODEL) || embedders[0] || null;
}

export function modelSize(model) {
  return Object.values(model.files || {}).reduce((a, b) => a + Number(b || 0), 0);
}

/** The load message's model: what /api/models gives plus the base URL of its files; a model the
 *  user brought (static/byo.js) has its own base and source (and, local, its File handles). */
export function modelRef(model) {
  // hashes: what the worker's weight store checks downloaded files against (absent: it asks /api/models)
  const ref = { id: model.id, name: model.name, kind: model.kind, base: model.base || `/models/${model.id}/`,
                files: model.files, hashes: model.hashes };
  if (model.source) ref.source = model.source;
  if (model.mmproj) ref.mmproj = model.mmproj;  // a text GGUF's vision projector, one of its files
  if (model.blobs) ref.blobs = model.blobs;
  return ref;
}
