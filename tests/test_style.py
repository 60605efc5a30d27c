"""The house style, checked by the tools the ecosystem already uses: ruff for Python (format, import
order, pyflakes, pycodestyle, bugbear, pyupgrade: pyproject.toml's [tool.ruff]) and Biome's linter
for the JavaScript (biome.json; `make test` installs it with npm into .cache/biome). `make format`
applies both fixers."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIOME = ROOT / ".cache" / "biome" / "node_modules" / ".bin" / "biome"


def run(*command) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)


def test_python_is_formatted():
    result = run(sys.executable, "-m", "ruff", "format", "--check", "--diff", ".")
    assert result.returncode == 0, f"run `make format`:\n{result.stdout[-3000:]}{result.stderr[-1000:]}"


def test_python_lint():
    result = run(sys.executable, "-m", "ruff", "check", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]


def test_javascript_lint():
    biome = str(BIOME) if BIOME.exists() else shutil.which("biome")
    if biome is None:
        pytest.skip("Biome is not installed here: `make test` installs it (npm)")
    result = run(biome, "lint", "--error-on-warnings", "--reporter=summary", ".")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
