// What the worker's `import(`${origin}/pyodide/pyodide.mjs`)` gets in Node (loader_hooks.mjs maps that
// URL here): Pyodide's own pyodide.mjs from build/web/pyodide/, with loadPyodide's URLs translated.
//
// Why: under Node, Pyodide reads its files from disk, never over HTTP — indexURL goes through
// path.resolve (an "http://" URL becomes a path under the working directory), the lock file through
// fs.readFile, and a wheel's lock `file_name` ("/wheels/wisp-….whl", absolute on our origin) is read
// as a file path. So the origin's URLs the worker passes are turned into the build/web/ files the
// server (serve.mjs) would have answered with: indexURL -> build/web/pyodide/; lockFileURL -> the lock
// fetched from the server as the browser does, passed as lockFileContents with each file_name made the
// wheel's path on disk. The same files, the same packages, nothing of Pyodide edited. Python's stdout
// goes to stderr here: the harness's stdout carries only its JSON.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadPyodide as loadNodePyodide } from "../../build/web/pyodide/pyodide.mjs";

export { version } from "../../build/web/pyodide/pyodide.mjs";

const WEB = fileURLToPath(new URL("../../build/web/", import.meta.url));

/** The build/web file that `url` (on the worker's origin) is served from. */
function onDisk(url, base = globalThis.location.href) {
  const u = new URL(url, base);
  if (u.origin !== globalThis.location.origin) throw new Error(`pyodide_node: ${u.href} is not on the worker's origin`);
  const file = path.join(WEB, decodeURIComponent(u.pathname));
  if (!file.startsWith(WEB)) throw new Error(`pyodide_node: ${u.href} leaves build/web`);
  return file;
}

export async function loadPyodide(options = {}) {
  const config = { stdout: (line) => console.error(line), ...options };
  if (config.indexURL) config.indexURL = onDisk(config.indexURL);
  if (config.lockFileURL) {
    const res = await fetch(config.lockFileURL);
    if (!res.ok) throw new Error(`${config.lockFileURL}: HTTP ${res.status}`);
    const lock = await res.json();
    const base = new URL(config.lockFileURL, globalThis.location.href);
    for (const pkg of Object.values(lock.packages || {})) pkg.file_name = onDisk(pkg.file_name, base);
    delete config.lockFileURL;
    config.lockFileContents = lock;
  }
  return loadNodePyodide(config);
}
