"""The engine must run in Pyodide: no numpy outside py_engine/gpu, no wgpu outside py_engine/gpu."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
ENGINE = ROOT / "py_engine"


def engine_modules():
    for path in sorted(ENGINE.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        if rel.parts[1] == "gpu" or rel.name == "__main__":
            continue
        yield ".".join(rel.parts).removesuffix(".__init__")


def test_engine_imports_without_numpy():
    code = "import sys; sys.modules['numpy'] = None\n" + "".join(f"import {m}\n" for m in engine_modules())
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_only_gpu_package_imports_wgpu():
    pattern = re.compile(r"^\s*(import|from)\s+wgpu\b", re.M)
    offenders = [p for p in ENGINE.rglob("*.py") if "gpu" not in p.relative_to(ENGINE).parts[:1]
                 and pattern.search(p.read_text())]
    assert not offenders
