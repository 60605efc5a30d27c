"""The web app's URL map (ASGI, Starlette). It only serves files and a model list: all compute
happens in the browser (Pyodide + WebGPU in a module worker).

/                      static/index.html
/static/*              static/
/worker/*              worker/
/pyodide/*             build/web/pyodide/        (Pyodide's core, tools/build_web.py)
/wheels/*              build/web/wheels/
/wisp-lock.json        build/web/wisp-lock.json
/api/models            JSON list of models (app/models.py)
/models/<id>/<file>    the listed files of one model, with Range requests
"""
from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .files import file_response, not_found, safe_path
from .models import ModelRegistry

ROOT = Path(__file__).resolve().parent.parent


def create_app(registry: ModelRegistry | None = None, root: Path = ROOT, web_dir: Path | None = None) -> Starlette:
    registry = registry if registry is not None else ModelRegistry()
    web_dir = web_dir if web_dir is not None else root / "build" / "web"
    trees = {"static": root / "static", "worker": root / "worker",
             "pyodide": web_dir / "pyodide", "wheels": web_dir / "wheels"}

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

    async def api_models(request: Request) -> Response:
        return JSONResponse([m.to_json() for m in registry.models()], headers={"Cache-Control": "no-store"})

    async def model_file(request: Request) -> Response:
        # Exact match against the model's file list: nothing else is reachable through this route.
        model = registry.find(request.path_params["model_id"])
        path = model.files.get(request.path_params["path"]) if model else None
        return file_response(request, path) if path else not_found()

    routes = [
        Route("/", single(trees["static"], "index.html"), methods=["GET", "HEAD"]),
        Route("/wisp-lock.json", single(web_dir, "wisp-lock.json"), methods=["GET", "HEAD"]),
        Route("/api/models", api_models, methods=["GET"]),
        Route("/models/{model_id}/{path:path}", model_file, methods=["GET", "HEAD"]),
        *(tree(name) for name in trees),
    ]
    app = Starlette(routes=routes)
    app.state.registry = registry
    app.state.web_dir = web_dir
    return app
