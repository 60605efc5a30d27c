"""`python -m app` in a subprocess, as users start it: the browser tests' server and the OpenAI
API's (test_openai_server.py, which drives no browser)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def app_server(*args: str):
    """`python -m app --port 0 ARGS…` on a free loopback port; yields its base URL (no trailing /)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", "0", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        match = re.search(r"http://\S+", proc.stdout.readline())
        if not match:
            proc.kill()
            raise RuntimeError(f"the server did not start: {proc.stderr.read()}")
        yield match.group(0).rstrip("/"), proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
