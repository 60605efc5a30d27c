// Module resolve hook (node:module register): the worker imports Pyodide from its origin,
// `import(`${self.location.origin}/pyodide/pyodide.mjs`)`, and Node cannot import http: URLs. This maps
// exactly that URL (given at register time, with the port of serve.mjs's server) to pyodide_node.mjs,
// which loads build/web/pyodide/ the way Pyodide runs under Node. Every other specifier resolves as usual.

let redirects = {};  // URL -> file URL

export async function initialize(data) {
  redirects = data?.redirects || {};
}

export async function resolve(specifier, context, nextResolve) {
  if (Object.hasOwn(redirects, specifier)) return { url: redirects[specifier], shortCircuit: true };
  return nextResolve(specifier, context);
}
