// The memory's files in OPFS (the origin private file system): a collection is wisp-memory/<name>/a.log
// and b.log, written by py_engine/memory/log_store.py (the record format, atomic appends, compaction)
// through py_engine/web/memory_files.py. Registered for Python as the module `wisp_memory_files`
// (worker/worker.js).
//
//   open(collection)  [a, b]: each {size(), read(at, n), write(at, bytes), truncate(n), flush(), close()},
//                     OPFS synchronous access handles, so the store's calls stay synchronous (no JSPI)
//   estimate()        {usage, quota} of the origin (navigator.storage.estimate): the room an add may take
//
// A handle locks its file: the worker opens a collection for one memory message and closes it after, so
// a reload (the old worker still closing) or the page in a second tab waits a moment instead of being
// locked out; the store notices what another tab wrote (LogStore.refresh).

const ROOT = "wisp-memory";
const FILES = ["a.log", "b.log"];
const LOCK_WAIT_MS = 5000; // how long a file held elsewhere (a reload's closing worker) is waited for

export class MemoryFilesError extends Error {
  constructor(message) { super(message); this.name = "MemoryFilesError"; }
}

function wrap(access) {
  return {
    size: () => access.getSize(),
    read(at, n) {
      const out = new Uint8Array(n);
      const got = access.read(out, { at });
      return got === n ? out : out.subarray(0, got);
    },
    write(at, bytes) {  // QuotaExceededError goes to Python as it is: the store takes back what landed
      let done = 0;
      while (done < bytes.length) {
        const n = access.write(bytes.subarray(done), { at: at + done });
        if (!n) throw new MemoryFilesError(`wrote nothing at byte ${at + done}`);
        done += n;
      }
    },
    truncate: (n) => access.truncate(n),
    flush: () => access.flush(),
    close: () => access.close(),
  };
}

async function accessHandle(dir, name) {
  const file = await dir.getFileHandle(name, { create: true });
  const until = performance.now() + LOCK_WAIT_MS;
  for (let wait = 25; ; wait = Math.min(2 * wait, 500)) {
    try {
      return await file.createSyncAccessHandle();
    } catch (err) {
      if (err.name !== "NoModificationAllowedError" || performance.now() > until) {
        if (err.name === "NoModificationAllowedError") {
          throw new MemoryFilesError("its file is open elsewhere: the page in another tab? Close it there and try again");
        }
        throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

export async function open(collection) {
  if (typeof FileSystemFileHandle === "undefined" || !("createSyncAccessHandle" in FileSystemFileHandle.prototype)
      || !navigator.storage?.getDirectory) {
    throw new MemoryFilesError("this browser offers no OPFS file access (createSyncAccessHandle) to keep documents in");
  }
  const root = await navigator.storage.getDirectory();
  const dir = await (await root.getDirectoryHandle(ROOT, { create: true })).getDirectoryHandle(collection, { create: true });
  const handles = [];
  try {
    for (const name of FILES) handles.push(wrap(await accessHandle(dir, name)));
  } catch (err) {
    for (const h of handles) h.close();
    throw err;
  }
  return handles;
}

export async function estimate() {
  const { usage = 0, quota = 0 } = (await navigator.storage?.estimate?.()) || {};
  return { usage, quota };
}
