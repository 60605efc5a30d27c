"""The engine must run in Pyodide: no numpy outside py_engine/gpu, no wgpu outside py_engine/gpu. Its layers
import one way: the device seam (py_engine/gpu) imports nothing above it, the browser worker's package
(py_engine/web) is imported by nothing in the engine, JavaScript is reached only from the browser host and
web/, and no module imports itself around a cycle. And the browser tests stay out of the fast lane, each
named test_browser_*.py."""

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
    offenders = [
        p
        for p in ENGINE.rglob("*.py")
        if "gpu" not in p.relative_to(ENGINE).parts[:1] and pattern.search(p.read_text())
    ]
    assert not offenders


def test_browser_test_files_are_marked_browser():
    """`make test-fast` runs -m "not slow and not browser": a test file that drives Chromium (imports
    playwright or tests/browser_harness.py, or a test module that does, for its fixtures) carries a
    module-level `pytestmark` with pytest.mark.browser, so it cannot land in the fast lane."""
    tests = ROOT / "tests"
    uses = re.compile(
        r"^\s*(?:import|from)\s+(playwright|browser_harness|test_\w+)\b"
        r"|importorskip\(\s*['\"](playwright)",
        re.M,
    )
    imports = {p.stem: {a or b for a, b in uses.findall(p.read_text())} for p in tests.glob("*.py")}
    browser = {"playwright", "browser_harness"}
    while new := {m for m, used in imports.items() if m not in browser and used & browser}:
        browser |= new
    assert "conftest" not in browser, "browser fixtures go in tests/browser_harness.py, imported where used"
    unmarked = sorted(m for m in browser if m.startswith("test_") and not marked_browser(tests / f"{m}.py"))
    assert not unmarked, f"add `pytestmark = pytest.mark.browser` to: {unmarked}"


def marked_browser(path: Path) -> bool:
    """Whether the module-level `pytestmark` of a test file carries pytest.mark.browser."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            return any(
                isinstance(n, ast.Attribute) and n.attr == "browser" and getattr(n.value, "attr", None) == "mark"
                for n in ast.walk(node.value)
            )
    return False


def test_test_files_are_named_for_their_lane():
    """One naming scheme, test_<subject>.py: a file marked browser is test_browser_<subject>.py and no
    other file is, so the name alone says whether a file runs in the fast lane (a browser file's
    pure-Python tests belong in a test_<subject>.py beside it)."""
    wrong = {
        p.name: "marked browser" if marked_browser(p) else "not marked browser"
        for p in sorted((ROOT / "tests").glob("test_*.py"))
        if marked_browser(p) != p.name.startswith("test_browser_")
    }
    assert not wrong, f"browser files are test_browser_*.py, and only they: {wrong}"


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


ENGINE_MODULES = {_module_name(p): p for p in ENGINE.rglob("*.py")}


def imports_of(path: Path) -> set[str]:
    """The absolute names of what `path` imports, at module level or inside functions (lazy
    imports make cycles and layer breaks too); `from . import x` names the module x."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            prefix = (
                ".".join(parts[: len(parts) - node.level + 1] + [node.module or ""]).rstrip(".")
                if node.level
                else node.module
            )
            submodules = {f"{prefix}.{a.name}" for a in node.names} & set(ENGINE_MODULES)
            out.update(submodules or {prefix})
    return out


def engine_graph() -> dict[str, set[str]]:
    return {m: {i for i in imports_of(p) if i in ENGINE_MODULES and i != m} for m, p in ENGINE_MODULES.items()}


def test_layers_import_one_way():
    graph = engine_graph()
    up = {
        m: sorted(i for i in deps if not i.startswith(("py_engine.gpu", "py_engine.errors")))
        for m, deps in graph.items()
        if m.startswith("py_engine.gpu")
    }
    assert not {m: d for m, d in up.items() if d}, "py_engine/gpu imports the engine above it"
    web_users = {
        m
        for m, deps in graph.items()
        if not m.startswith("py_engine.web") and any(i.startswith("py_engine.web") for i in deps)
    }
    assert web_users <= {"py_engine.cli"}, f"only the CLI (its device check) may use py_engine/web: {web_users}"
    js = {
        m
        for m, p in ENGINE_MODULES.items()
        if {i.split(".")[0] for i in imports_of(p)} & {"js", "pyodide", "pyodide_js", "wisp_gpu", "wisp_store"}
    }
    assert all(m == "py_engine.gpu.browser_host" or m.startswith("py_engine.web.") for m in js), js


def test_no_import_cycle():
    graph, seen, path = engine_graph(), set(), []

    def visit(m):
        seen.add(m)
        path.append(m)
        for n in sorted(graph[m]):
            assert n not in path, f"import cycle: {' -> '.join(path[path.index(n) :] + [n])}"
            if n not in seen:
                visit(n)
        path.pop()

    for m in sorted(graph):
        if m not in seen:
            visit(m)
