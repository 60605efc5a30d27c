"""The app shell: the URLs the service worker precaches and a version hash over their bytes.
Standard library only: tools/build_web.py imports it too (to write build/web/version.json)."""

from __future__ import annotations

import hashlib
from pathlib import Path

# Pyodide's core, as tools/build_web.py unpacks it into build/web/pyodide/ (no console pages,
# typings or source maps).
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")


def shell_manifest(static: Path, worker: Path, web: Path) -> dict:
    """{"version", "files"}: every URL of the app shell and a hash over their bytes and sw.js.

    tools/build_web.py writes it to build/web/version.json; the server (app/server.py) computes
    the same live, so an edit to static/ or worker/ gives a new version (and a new service worker)
    even before the next build."""
    files: dict[str, Path] = {"/": static / "index.html", "/manifest.webmanifest": static / "manifest.webmanifest"}
    for prefix, base in (("/static/", static), ("/worker/", worker)):
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(base)
            if (
                not path.is_file()
                or any(part.startswith(".") or part == "__pycache__" for part in rel.parts)
                or rel.as_posix() in ("sw.js", "manifest.webmanifest")
            ):
                continue
            files[prefix + rel.as_posix()] = path
    for name in PYODIDE_FILES:
        files[f"/pyodide/{name}"] = web / "pyodide" / name
    for path in sorted((web / "wheels").glob("*.whl")):
        files[f"/wheels/{path.name}"] = path
    for path in sorted((web / "vendor").rglob("*")):
        if path.is_file():
            files[f"/vendor/{path.relative_to(web / 'vendor').as_posix()}"] = path
    files["/wisp-lock.json"] = web / "wisp-lock.json"
    digest = hashlib.sha256()
    for url, path in [*files.items(), ("/sw.js", static / "sw.js")]:
        digest.update(url.encode() + b"\0" + path.read_bytes() + b"\0")
    return {"version": digest.hexdigest()[:16], "files": list(files)}
