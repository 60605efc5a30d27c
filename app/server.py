"""The web app's URL map (ASGI, Starlette). The page's compute happens in the browser (Pyodide +
WebGPU in a module worker); this server serves its files and models, and answers OpenAI's API on
this machine's own GPU for apps that call it (app/openai_api.py).

/                      static/index.html
/static/*              static/
/worker/*              worker/
/pyodide/*             build/web/pyodide/        (Pyodide's core, tools/build_web.py)
/wheels/*              build/web/wheels/
/vendor/*              build/web/vendor/          (npm packages the worker imports: hash-wasm's SHA-256)
/wisp-lock.json        build/web/wisp-lock.json
/manifest.webmanifest  static/manifest.webmanifest    (application/manifest+json)
/sw.js                 static/sw.js, the app shell's version written into it (scope "/"; no-cache)
/version.json          {"version", "files"}: the app shell the service worker precaches (tools/build_web.py
                       writes it into build/web; served as computed from the files now, so never stale)
/api/models            JSON list of models (app/models.py)
/models/<id>/<file>    the listed files of one model, with Range requests
/v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings
                       OpenAI's API over the same models, run here with wgpu-py (app/openai_api.py)
/v1/audio/transcriptions, /v1/audio/speech
                       speech to text and text to speech (app/audio_api.py)
/notebook/*            a JupyterLite site (python -m app --notebook build/notebook; tools/build_notebook.py):
                       on the page's origin, so its kernel shares the page's weight store
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from .files import file_response, not_found, safe_path
from .models import ModelRegistry
from .openai_api import openai_routes
from .shell import shell_manifest
from .web_build import DEFAULT_OUT, PAGE_ROOT

NO_CACHE = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


class ShellVersion:
    """The app shell manifest ({"version", "files"}) of these trees, recomputed only when a file
    under them changes (a stat of each is the key)."""

    def __init__(self, static: Path, worker: Path, web: Path):
        self.dirs = (static, worker, web / "pyodide", web / "wheels", web / "vendor")
        self.extra = (web / "wisp-lock.json",)
        self.args = (static, worker, web)
        self.key = None
        self.value = None
        self.lock = threading.Lock()

    def _key(self):
        stats = []
        for path in [p for d in self.dirs for p in sorted(d.rglob("*"))] + list(self.extra):
            try:
                st = os.stat(path)
            except OSError:
                continue
            stats.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(stats)

    def get(self) -> dict | None:
        """None while the build (Pyodide, wheels, lock) is missing: no service worker can install."""
        with self.lock:
            key = self._key()
            if key != self.key:
                try:
                    self.value = shell_manifest(*self.args)
                except OSError:
                    self.value = None
                self.key = key
            return self.value


# PyScript's worker reaches its page's DOM (pyscript.display) through SharedArrayBuffer, which only a
# cross-origin isolated page has: the site's PyScript example is served isolated (all it loads is ours).
ISOLATED = {
    "pyscript.html": {"Cross-Origin-Opener-Policy": "same-origin", "Cross-Origin-Embedder-Policy": "require-corp"}
}


def notebook_routes(site: Path) -> list[Route]:
    """A JupyterLite site at /notebook/ (and a PyScript example): its files, a folder's index.html
    for a URL ending in "/"."""

    async def serve(request: Request) -> Response:
        rel = request.path_params["path"]
        if rel == "" or rel.endswith("/"):
            rel += "index.html"
        path = safe_path(site, rel)
        if path is None and safe_path(site, f"{rel}/index.html"):  # a folder named without its "/"
            return RedirectResponse(f"/notebook/{rel}/", status_code=308)
        if path is None:
            return not_found()
        response = file_response(request, path)
        response.headers.update(ISOLATED.get(rel, {}))
        return response

    async def root(request: Request) -> Response:
        return RedirectResponse("/notebook/", status_code=308)

    return [
        Route("/notebook", root, methods=["GET", "HEAD"]),
        Route("/notebook/{path:path}", serve, methods=["GET", "HEAD"]),
    ]


def create_app(
    registry: ModelRegistry | None = None,
    root: Path = PAGE_ROOT,
    web_dir: Path | None = None,
    openai=None,
    memories=None,
    notebook: Path | None = None,
) -> Starlette:
    """notebook: a JupyterLite site (build/notebook) to serve at /notebook/, or None."""
    registry = registry if registry is not None else ModelRegistry()
    if web_dir is None:
        web_dir = DEFAULT_OUT if root == PAGE_ROOT else root / "build" / "web"
    trees = {
        "static": root / "static",
        "worker": root / "worker",
        "pyodide": web_dir / "pyodide",
        "wheels": web_dir / "wheels",
        "vendor": web_dir / "vendor",
    }

    def tree(name: str):
        base = trees[name]

        async def serve(request: Request) -> Response:
            path = safe_path(base, request.path_params["path"])
            return file_response(request, path) if path else not_found()

        return Route(f"/{name}/{{path:path}}", serve, methods=["GET", "HEAD"])

    def single(base: Path, rel: str):
        async def serve(request: Request) -> Response:
            path = safe_path(base, rel)
            return file_response(request, path) if path else not_found()

        return serve

    shell = ShellVersion(trees["static"], trees["worker"], web_dir)

    async def version_json(request: Request) -> Response:
        manifest = shell.get()
        if manifest is None:
            return not_found()
        return Response(json.dumps(manifest), media_type="application/json", headers=NO_CACHE)

    async def service_worker(request: Request) -> Response:
        path = safe_path(trees["static"], "sw.js")
        manifest = shell.get()
        if path is None:
            return not_found()
        # The version in the script: a new build is a byte-different service worker, so browsers update.
        version = manifest["version"] if manifest else "unbuilt"
        body = path.read_text().replace("%WISP_VERSION%", version, 1)
        return Response(body, media_type="text/javascript", headers={**NO_CACHE, "Service-Worker-Allowed": "/"})

    async def api_models(request: Request) -> Response:
        return JSONResponse([m.to_json() for m in registry.models()], headers={"Cache-Control": "no-store"})

    async def model_file(request: Request) -> Response:
        # Exact match against the model's file list, checked now (ServedModel.file): nothing else
        # is reachable through this route, and no symlink leads out of the model's folder.
        model = registry.find(request.path_params["model_id"])
        path = model.file(request.path_params["path"]) if model else None
        return file_response(request, path) if path else not_found()

    routes = [
        Route("/", single(trees["static"], "index.html"), methods=["GET", "HEAD"]),
        Route("/wisp-lock.json", single(web_dir, "wisp-lock.json"), methods=["GET", "HEAD"]),
        Route("/manifest.webmanifest", single(trees["static"], "manifest.webmanifest"), methods=["GET", "HEAD"]),
        Route("/sw.js", service_worker, methods=["GET", "HEAD"]),
        Route("/version.json", version_json, methods=["GET", "HEAD"]),
        Route("/api/models", api_models, methods=["GET"]),
        Route("/models/{model_id}/{path:path}", model_file, methods=["GET", "HEAD"]),
        *(tree(name) for name in trees),
        *openai_routes(registry, openai, memories),
        *(notebook_routes(notebook) if notebook is not None else []),
    ]
    app = Starlette(routes=routes)
    app.state.registry = registry
    app.state.web_dir = web_dir
    return app
