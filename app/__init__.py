"""Wisp's web app: a small static + model file server (Starlette, run by uvicorn) for the page in
static/, the worker in worker/ and the Pyodide build in build/web/. Run: python -m app
(app.server.create_app builds the ASGI app; app.shell is standard library only, for the build).
"""
