"""The engine must run in Pyodide: no numpy outside py_engine/gpu, no wgpu outside py_engine/gpu. And the
browser tests stay out of the fast lane (`make test-fast`)."""
import ast
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


def test_browser_test_files_are_marked_browser():
    """`make test-fast` runs -m "not slow and not browser": a test file that drives Chromium (imports
    playwright or tests/browser_harness.py, or a test module that does, for its fixtures) carries a
    module-level `pytestmark` with pytest.mark.browser, so it cannot land in the fast lane."""
    tests = ROOT / "tests"
    uses = re.compile(r"^\s*(?:import|from)\s+(playwright|browser_harness|test_\w+)\b"
                      r"|importorskip\(\s*['\"](playwright)", re.M)
    imports = {p.stem: {a or b for a, b in uses.findall(p.read_text())} for p in tests.glob("*.py")}
    browser = {"playwright", "browser_harness"}
    while new := {m for m, used in imports.items() if m not in browser and used & browser}:
        browser |= new
    assert "conftest" not in browser, "browser fixtures go in tests/browser_harness.py, imported where used"

    def marked(path):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
                return any(isinstance(n, ast.Attribute) and n.attr == "browser"
                           and getattr(n.value, "attr", None) == "mark" for n in ast.walk(node.value))
        return False
    unmarked = sorted(m for m in browser if m.startswith("test_") and not marked(tests / f"{m}.py"))
    assert not unmarked, f"add `pytestmark = pytest.mark.browser` to: {unmarked}"
