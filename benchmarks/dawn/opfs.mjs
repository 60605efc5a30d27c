// A disk-backed subset of the origin-private file system (OPFS) for the page's worker in Node, so the
// weight store (worker/store.js) takes its OPFS backend (worker/store_backends.js) as in Chrome: files
// live under one directory on disk and are read and written in place through node:fs's sync calls,
// never held whole in memory (a model file can be 4 GB).
//
//   diskStorage(dir) -> navigator.storage: {getDirectory(), estimate(), persist(), persisted()}
//   installOpfsGlobals()   FileSystemHandle / FileSystemFileHandle / FileSystemDirectoryHandle /
//                          FileSystemSyncAccessHandle on globalThis (pickBackend looks for
//                          FileSystemFileHandle.prototype.createSyncAccessHandle)
//
// What it keeps of the browser's behaviour, because the store relies on it: DOMException names
// (NotFoundError, TypeMismatchError, InvalidModificationError, NoModificationAllowedError, and
// QuotaExceededError when the disk is full), one open sync access handle per file (across the page's
// threads too: the store's writer is a worker of its own; lockTable() is the shared memory that a
// thread's installOpfsGlobals(table) takes), read/write at an
// offset (or the handle's cursor), truncate, flush (fdatasync: Chrome's flush reaches the disk too),
// getFile().text(), removeEntry({recursive}), and entries()/keys()/values() as async iterators.
// estimate(): usage is the bytes under `dir`, quota that plus the disk's free space.

import fs from "node:fs";
import path from "node:path";

const locked = new Set();  // files with an open sync access handle on this thread
let table = null;          // {mutex: Int32Array(1), slots: BigInt64Array}: hashes of the paths open on any thread

function useTable(buffer) {
  table = { mutex: new Int32Array(buffer, 0, 1), slots: new BigInt64Array(buffer, 8, (buffer.byteLength - 8) / 8) };
}

/** The shared memory behind the one-handle-per-file rule, for another thread's installOpfsGlobals. */
export function lockTable() {
  if (!table) useTable(new SharedArrayBuffer(8 * 256));
  return table.mutex.buffer;
}

function hashOf(where) {  // FNV-1a, 64 bits (never 0: an empty slot)
  let h = 0xcbf29ce484222325n;
  for (const c of Buffer.from(where)) h = ((h ^ BigInt(c)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return BigInt.asIntN(64, h) || 1n;
}

function critical(fn) {
  lockTable();
  while (Atomics.compareExchange(table.mutex, 0, 0, 1) !== 0) { /* a few instructions on another thread */ }
  try { return fn(table.slots); } finally { Atomics.store(table.mutex, 0, 0); }
}

const claim = (where) => critical((slots) => {
  const h = hashOf(where);
  if (slots.includes(h)) return false;
  const i = slots.indexOf(0n);
  if (i < 0) throw new Error("opfs.mjs: too many open access handles");
  slots[i] = h;
  return true;
});
const release = (where) => critical((slots) => { const i = slots.indexOf(hashOf(where)); if (i >= 0) slots[i] = 0n; });
const heldAnywhere = (where) => critical((slots) => slots.includes(hashOf(where)));

const fail = (name, message) => new DOMException(message, name);

function checkName(name) {
  name = String(name);
  if (!name || name === "." || name === ".." || name.includes("/") || name.includes("\\") || name.includes("\0")) {
    throw new TypeError(`Name is not allowed: ${JSON.stringify(name)}`);
  }
  return name;
}

const statOf = (p) => fs.statSync(p, { throwIfNoEntry: false });
const bytesOf = (b) => (ArrayBuffer.isView(b) ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength)
  : new Uint8Array(b));

export class FileSystemHandle {
  constructor(kind, name, where) { this.kind = kind; this.name = name; this._path = where; }
  async isSameEntry(other) { return other instanceof FileSystemHandle && other._path === this._path; }
}

export class FileSystemSyncAccessHandle {
  constructor(where) {
    this._path = where;
    this._fd = fs.openSync(where, "r+");
    this._cursor = 0;
  }

  _open() {
    if (this._fd === null) throw fail("InvalidStateError", "The access handle was closed.");
    return this._fd;
  }

  read(buffer, { at } = {}) {
    const view = bytesOf(buffer), pos = at ?? this._cursor;
    let done = 0;
    while (done < view.length) {  // a short read only at the end of the file
      const n = fs.readSync(this._open(), view, done, view.length - done, pos + done);
      if (n === 0) break;
      done += n;
    }
    this._cursor = pos + done;
    return done;
  }

  write(buffer, { at } = {}) {
    const view = bytesOf(buffer), pos = at ?? this._cursor;
    let n;
    try {
      n = fs.writeSync(this._open(), view, 0, view.length, pos);
    } catch (e) {
      if (e.code === "ENOSPC" || e.code === "EDQUOT") {
        throw fail("QuotaExceededError", `No space left for ${path.basename(this._path)}`);
      }
      throw e;
    }
    this._cursor = pos + n;
    return n;
  }

  truncate(size) {
    fs.ftruncateSync(this._open(), Number(size));
    this._cursor = Math.min(this._cursor, Number(size));
  }
  getSize() { return fs.fstatSync(this._open()).size; }
  flush() { fs.fdatasyncSync(this._open()); }

  close() {
    if (this._fd === null) return;
    fs.closeSync(this._fd);
    this._fd = null;
    locked.delete(this._path);
    release(this._path);
  }
}

export class FileSystemFileHandle extends FileSystemHandle {
  constructor(name, where) { super("file", name, where); }

  async getFile() {
    const where = this._path, st = fs.statSync(where);
    return {
      name: this.name, size: st.size, type: "", lastModified: st.mtimeMs,
      async text() { return fs.readFileSync(where, "utf8"); },
      async arrayBuffer() {
        const b = fs.readFileSync(where);
        return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
      },
    };
  }

  async createSyncAccessHandle() {
    if (!statOf(this._path)?.isFile()) throw fail("NotFoundError", `${this.name} was removed.`);
    if (!claim(this._path)) {
      throw fail("NoModificationAllowedError", `${this.name} already has an open access handle.`);
    }
    let handle;
    try { handle = new FileSystemSyncAccessHandle(this._path); } catch (e) { release(this._path); throw e; }
    locked.add(this._path);
    return handle;
  }
}

export class FileSystemDirectoryHandle extends FileSystemHandle {
  constructor(name, where) { super("directory", name, where); }

  _child(name) { return path.join(this._path, checkName(name)); }

  async getDirectoryHandle(name, { create = false } = {}) {
    const where = this._child(name), st = statOf(where);
    if (st && !st.isDirectory()) throw fail("TypeMismatchError", `${name} is a file.`);
    if (!st) {
      if (!create) throw fail("NotFoundError", `No directory ${name}.`);
      fs.mkdirSync(where);
    }
    return new FileSystemDirectoryHandle(String(name), where);
  }

  async getFileHandle(name, { create = false } = {}) {
    const where = this._child(name), st = statOf(where);
    if (st && !st.isFile()) throw fail("TypeMismatchError", `${name} is a directory.`);
    if (!st) {
      if (!create) throw fail("NotFoundError", `No file ${name}.`);
      fs.closeSync(fs.openSync(where, "a"));
    }
    return new FileSystemFileHandle(String(name), where);
  }

  async removeEntry(name, { recursive = false } = {}) {
    const where = this._child(name), st = statOf(where);
    if (!st) throw fail("NotFoundError", `No entry ${name}.`);
    if (heldAnywhere(where) || [...locked].some((p) => p === where || p.startsWith(where + path.sep))) {
      throw fail("NoModificationAllowedError", `${name} (or a file in it) has an open access handle.`);
    }
    if (st.isDirectory()) {
      if (!recursive && fs.readdirSync(where).length) throw fail("InvalidModificationError", `${name} is not empty.`);
      fs.rmSync(where, { recursive: true });
    } else {
      fs.unlinkSync(where);
    }
  }

  async *entries() {
    for (const name of fs.readdirSync(this._path).sort()) {
      const where = path.join(this._path, name), st = statOf(where);
      if (st?.isDirectory()) yield [name, new FileSystemDirectoryHandle(name, where)];
      else if (st?.isFile()) yield [name, new FileSystemFileHandle(name, where)];
    }
  }

  async *keys() { for await (const [name] of this.entries()) yield name; }
  async *values() { for await (const [, handle] of this.entries()) yield handle; }
  [Symbol.asyncIterator]() { return this.entries(); }
}

function bytesUnder(dir) {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const where = path.join(dir, e.name);
    total += e.isDirectory() ? bytesUnder(where) : (statOf(where)?.size || 0);
  }
  return total;
}

export function diskStorage(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const root = new FileSystemDirectoryHandle("", path.resolve(dir));
  return {
    dir: root._path,  // (not the browser's: for worker_shim.mjs's threads)
    async getDirectory() { return root; },
    async estimate() {
      const usage = bytesUnder(root._path);
      const { bavail, bsize } = fs.statfsSync(root._path);
      return { usage, quota: usage + bavail * bsize };
    },
    async persist() { return true; },
    async persisted() { return true; },
  };
}

export function installOpfsGlobals(shared = null) {
  if (shared) useTable(shared);
  Object.assign(globalThis, {
    FileSystemHandle, FileSystemFileHandle, FileSystemDirectoryHandle, FileSystemSyncAccessHandle,
  });
}
