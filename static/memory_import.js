// An import of memory/transfer.py's JSON lines (client.js memoryImport): the user's file read in
// pieces and sent to the worker in batches, each with the export's header line (py_engine/web/
// memory_transfer.py takes each batch on its own), so neither this page nor the worker's heap ever
// holds the whole file: a 100k-passage export is hundreds of MB.

import { WispError } from "./client.js";  // (a cycle: used only once both modules have run)

// A batch: at most this many lines, or this many characters (a document's line may be megabytes).
const IMPORT_LINES = 2000;
const IMPORT_CHARS = 8 << 20;

/** Sends `source` (a Blob or File, or a string) as batches: send(header, lines, line) resolves with
 *  the worker's `memory` event ({imported, skipped}); `line` is the number of lines[0] in the file.
 *  Resolves with the totals; onProgress hears {type: "memory_import", done, total (the file's bytes),
 *  imported, skipped} after each batch. */
export async function importBatches(source, name, onProgress, send) {
  const blob = typeof source === "string" ? new Blob([source]) : source;
  const read = { bytes: 0 }, totals = { imported: 0, skipped: 0 };
  let header = null, batch = [], chars = 0, first = 0, number = 0, sent = false;
  const flush = async () => {
    const event = await send(header ?? "", batch, first || number + 1);
    totals.imported += event.imported;
    totals.skipped += event.skipped;
    batch = []; chars = 0; first = 0; sent = true;
    if (onProgress) onProgress({ type: "memory_import", done: read.bytes, total: blob.size, ...totals });
  };
  for await (const line of linesOf(blob, read, name)) {
    number++;
    if (header === null) { if (line.trim()) header = line; continue; }
    if (!batch.length) first = number;
    batch.push(line);
    chars += line.length;
    if (batch.length >= IMPORT_LINES || chars >= IMPORT_CHARS) await flush();
  }
  if (batch.length || !sent) await flush();  // an empty file: the worker says what is wrong with it
  return totals;
}

/** The lines of a Blob read in pieces (UTF-8; a "\r" before "\n" dropped); read.bytes counts the
 *  bytes read so far. Not UTF-8: one WispError naming the file. */
async function* linesOf(blob, read, name) {
  const counted = blob.stream().pipeThrough(new TransformStream({
    transform(chunk, out) { read.bytes += chunk.byteLength; out.enqueue(chunk); },
  }));
  const reader = counted.pipeThrough(new TextDecoderStream("utf-8", { fatal: true })).getReader();
  let rest = "";
  for (;;) {
    let piece;
    try {
      piece = await reader.read();
    } catch {
      throw new WispError("request", `${name}: is not UTF-8 text (not a Wisp memory export)`);
    }
    if (piece.done) break;
    const lines = (rest + piece.value).split("\n");
    rest = lines.pop();
    for (const line of lines) yield line.endsWith("\r") ? line.slice(0, -1) : line;
  }
  if (rest) yield rest;
}
