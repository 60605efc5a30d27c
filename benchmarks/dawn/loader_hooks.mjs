// Module resolve hook (node:module register): the worker imports Pyodide from its origin,
// `import(`${self.location.origin}/pyodide/pyodide.mjs`)`, and Node cannot import http: URLs. This maps
// exactly that URL (given at register time, with the port of serve.mjs's server) to pyodide_node.mjs,
// which loads build/web/pyodide/ the way Pyodide runs under Node; and worker/sha256.js's hash-wasm
// (`${origin}/vendor/...`, a UMD script run as a module, as a browser's import() runs it) to its file in
// build/web/vendor/. Every other specifier resolves as usual.

let redirects = {};  // URL -> file URL, or {url, format}

export async function initialize(data) {
  redirects = data?.redirects || {};
}

export async function resolve(specifier, context, nextResolve) {
  if (Object.hasOwn(redirects, specifier)) {
    const to = redirects[specifier];
    return typeof to === "string" ? { url: to, shortCircuit: true } : { ...to, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
