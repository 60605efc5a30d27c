"""The public API's type hints hold (mypy --strict over py_engine/__init__.py and py_engine/library/, the
config in pyproject.toml), and a user's type checker sees them through py.typed: a program that misuses
the API is caught."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent

USER_PROGRAM = """
import py_engine as wisp

async def main() -> None:
    model = await wisp.load("smollm2-135m-instruct", precision="exact")
    async for piece in model.chat("Hi", max_tokens=8):
        print(piece.upper())
    answer = await model.complete("Hi")
    ids: list[int] = answer.token_ids
    vectors: list[list[float]] = await model.embed(["a"])
    client = wisp.Wisp()
    await client.chat.completions.create(model="m", messages=[])
    print(ids, vectors)
"""


def mypy(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_the_public_api_type_checks_strictly():
    out = mypy()
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_users_misuse_is_caught(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(USER_PROGRAM)
    bad = tmp_path / "bad.py"
    bad.write_text(USER_PROGRAM.replace('precision="exact"', 'precision="f16"').replace("ids: list[int]", "ids: str"))
    config = ["--config-file", str(ROOT / "pyproject.toml"), "--strict"]
    assert mypy(*config, str(good), cwd=tmp_path).returncode == 0, mypy(*config, str(good), cwd=tmp_path).stdout
    out = mypy(*config, str(bad), cwd=tmp_path)
    assert out.returncode == 1
    assert 'Argument "precision" to "load" has incompatible type' in out.stdout, out.stdout
    assert "Incompatible types in assignment" in out.stdout, out.stdout
