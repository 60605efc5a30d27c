"""The house style, checked by the tools the ecosystem already uses: ruff for Python (format, import
order, pyflakes, pycodestyle, bugbear, pyupgrade: pyproject.toml's [tool.ruff]) and Biome's linter
for the JavaScript (biome.json; `make test` installs it with npm into .cache/biome). `make format`
applies both fixers. The README's code examples are linted too, for names used and never defined
(a reader copies them as they are)."""

import re
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


def biome_or_skip() -> str:
    biome = str(BIOME) if BIOME.exists() else shutil.which("biome")
    if biome is None:
        pytest.skip("Biome is not installed here: `make test` installs it (npm)")
    return biome


def test_javascript_lint():
    result = run(biome_or_skip(), "lint", "--error-on-warnings", "--reporter=summary", ".")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]


def readme_examples(language: str) -> list[str]:
    blocks = re.findall(rf"^```{language}\n(.*?)^```", (ROOT / "README.md").read_text(), re.M | re.S)
    assert blocks, f"no {language} example in the README"
    return blocks


def test_readme_examples_define_what_they_use(tmp_path):
    for i, code in enumerate(readme_examples("python")):
        (tmp_path / f"example_{i}.py").write_text(code)
    result = run(sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821", str(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:]
    for i, code in enumerate(readme_examples("js")):
        (tmp_path / f"example_{i}.mjs").write_text(code)
    biome = biome_or_skip()
    result = subprocess.run(
        [biome, "lint", "--only=correctness/noUndeclaredVariables", "."], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-1000:]
