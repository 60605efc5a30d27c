"""Wisp's web app: a small static + model file server (Starlette, run by uvicorn) for the page in
static/, the worker in worker/ and the Pyodide build in build/web/. Run: python -m app."""
from .models import ModelPathError, ModelRegistry
from .server import create_app

__all__ = ["ModelPathError", "ModelRegistry", "create_app"]
