// Wisp's service worker: the app works offline once it has been opened (served at /sw.js, scope "/").
//
// - The app shell — /, /manifest.webmanifest, static/*, worker/*, pyodide/*, wheels/*, vendor/*, /wisp-lock.json,
//   as listed by /version.json (tools/build_web.py; the server computes the same live) — is precached
//   into the cache "wisp-shell-<version>" at install, all or nothing, and served cache-first.
// - /api/models is network-first; the last good answer (cache "wisp-api") serves offline.
// - /models/* is never touched here: the weight store (worker/store.js) keeps the weights.
// - Updates are atomic: the server writes the version into this script (below), so a new build is a
//   new service worker; it installs its complete cache while the old one keeps serving, and only on
//   activate (after every old page closed, or the page's "reload" asked for skipWaiting) deletes
//   the older wisp-shell-* caches.
/* eslint-env serviceworker */

const VERSION = "%WISP_VERSION%"; // replaced by the server (app/server.py) with the app shell's version
const SHELL_PREFIX = "wisp-shell-";
const SHELL = SHELL_PREFIX + VERSION;
const API_CACHE = "wisp-api";

self.addEventListener("install", (event) => {
  event.waitUntil(precache());
});

async function precache() {
  const response = await fetch("/version.json", { cache: "no-store" });
  if (!response.ok) throw new Error(`/version.json: HTTP ${response.status}`);
  const { version, files } = await response.json();
  // A build between fetching this script and /version.json: fail; the browser tries the new script later.
  if (version !== VERSION) throw new Error(`version ${version} is not this worker's ${VERSION}`);
  const cache = await caches.open(SHELL);
  try {
    // addAll is atomic: if any request fails, nothing is stored (and the install fails). "no-cache"
    // revalidates what the browser's HTTP cache holds (a 304 when the page just fetched it).
    await cache.addAll(files.map((url) => new Request(url, { cache: "no-cache" })));
  } catch (err) {
    await caches.delete(SHELL);
    throw err;
  }
}

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    const names = await caches.keys();
    await Promise.all(names.filter((n) => n.startsWith(SHELL_PREFIX) && n !== SHELL).map((n) => caches.delete(n)));
    await self.clients.claim();
  })());
});

self.addEventListener("message", (event) => {
  if (event.data?.type === "skip-waiting") self.skipWaiting();
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  const path = url.pathname;
  if (path.startsWith("/models/") || path === "/sw.js" || path === "/version.json") return; // the network's
  if (path === "/api/models") {
    event.respondWith(networkFirst(request));
    return;
  }
  event.respondWith(cacheFirst(request));
});

async function cacheFirst(request) {
  // ignoreSearch: "/?x" is "/", and "/worker/worker.js?test" is the worker script.
  const hit = await caches.match(request, { cacheName: SHELL, ignoreSearch: true });
  if (!hit) return fetch(request);
  // A cached response keeps its own URL, which a worker script takes as its location (and would lose
  // "?test"): a fresh Response has none, so the request's URL stands.
  return new URL(request.url).search ? new Response(hit.body, hit) : hit;
}

async function networkFirst(request) {
  try {
    const response = await fetch(request);
    if (response.ok) {
      const cache = await caches.open(API_CACHE);
      await cache.put("/api/models", response.clone());
    }
    return response;
  } catch (err) {
    const cached = await caches.match("/api/models", { cacheName: API_CACHE });
    if (cached) return cached;
    throw err;
  }
}
