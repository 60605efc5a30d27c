"""The engine must run in Pyodide: no numpy outside py_engine/gpu, no wgpu outside py_engine/gpu. Its layers
import one way: the device seam (py_engine/gpu) imports nothing above it, the browser worker's package
(py_engine/web) is imported by nothing else in the engine (the CLI included) but the public API's load, which
opens a model through its web/library.py in Pyodide, JavaScript is reached only
from the browser host and web/, and no module imports itself around a cycle. Nothing outside the engine's
module writes an engine's state or calls its private methods, graph builders are made in one module
(runtime/loader.py), and the top level of py_engine/ holds at most 12 modules (the rest live in rooms
named for what they do). Each of those rules is also shown failing on a violation planted for it. And
the browser tests stay out of the fast lane, each named test_browser_*.py."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
PACKAGES = {_module_name(p) for p in ENGINE.rglob("__init__.py")}
# What the engine-use rules read: the engine package and the desktop server over it.
SOURCES = {_module_name(p): p.read_text() for p in [*ENGINE.rglob("*.py"), *(ROOT / "app").rglob("*.py")]}


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def imports_of(module: str, text: str) -> set[str]:
    """The absolute names of what `module` (its source `text`) imports, at module level or inside
    functions (lazy imports make cycles and layer breaks too); `from . import x` names the module x."""
    package = module if module in PACKAGES else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(text)):
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


def engine_graph(planted: dict[str, str] | None = None) -> dict[str, set[str]]:
    """module -> the engine modules it imports, for py_engine/ and any `planted` {module: source}."""
    sources = {m: p.read_text() for m, p in ENGINE_MODULES.items()} | (planted or {})
    return {m: {i for i in imports_of(m, text) if i in ENGINE_MODULES and i != m} for m, text in sources.items()}


# The public API's load (py_engine/library/hosts.py) is the one door both hosts share: in Pyodide it
# opens a model through the page's weight store (web/library.py), as gpu/ opens the browser's device.
WEB_DOOR = "py_engine.library.hosts"


def web_users(graph: dict[str, set[str]]) -> set[str]:
    """Modules outside the browser worker's package (py_engine/web) that import it, but for the API's
    door (which may import web/library.py only)."""
    return {
        m
        for m, deps in graph.items()
        if not in_package(m, "py_engine.web")
        and any(in_package(i, "py_engine.web") and (m, i) != (WEB_DOOR, "py_engine.web.library") for i in deps)
    }


def test_layers_import_one_way():
    graph = engine_graph()
    up = {
        m: sorted(i for i in deps if not in_package(i, "py_engine.gpu") and i != "py_engine.errors")
        for m, deps in graph.items()
        if in_package(m, "py_engine.gpu")
    }
    assert not {m: d for m, d in up.items() if d}, "py_engine/gpu imports the engine above it"
    assert not web_users(graph), "py_engine/web is the browser worker's: nothing else in the engine imports it"
    js = {
        m
        for m, text in ((m, p.read_text()) for m, p in ENGINE_MODULES.items())
        if {i.split(".")[0] for i in imports_of(m, text)} & {"js", "pyodide", "pyodide_js", "wisp_gpu", "wisp_store"}
    }
    assert all(m == "py_engine.gpu.browser_host" or m.startswith("py_engine.web.") for m in js), js


def test_the_browser_package_rule_sees_a_planted_import():
    """The CLI once imported py_engine/web for its device check's submit strategy."""
    assert web_users(engine_graph({"py_engine.cli": "from .web.webkit import load_policy"})) == {"py_engine.cli"}
    assert web_users(engine_graph({"py_engine.web.extra": "from .webkit import load_policy"})) == set()
    door = "from ..web.library import open_model"
    assert web_users(engine_graph({WEB_DOOR: door})) == set()
    assert web_users(engine_graph({WEB_DOOR: "from ..web.webkit import load_policy"})) == {WEB_DOOR}


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


# The engine (py_engine/engine.py) keeps its own state: its decode loops (decode/on_gpu.py,
# decode/on_host.py, decode/prompt_lookup.py), the prompt cache and everything above drive it through its
# public methods. An engine is held under the name `engine` wherever it is kept (a variable, a
# parameter, an attribute: self.engine, model.engine), which is what these rules look for.
ENGINE_HOME = "py_engine.engine"


def is_engine(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "engine") or (
        isinstance(node, ast.Attribute) and node.attr == "engine"
    )


def engine_state_writes(sources: dict[str, str]) -> list[str]:
    """'module:line what' for every engine attribute assigned or deleted (=, +=, a tuple's part,
    setattr, del) and every engine method starting with `_` called, outside the engine's module."""
    found = []
    for module, text in sources.items():
        if module == ENGINE_HOME:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) and is_engine(node.value):
                found.append(f"{module}:{node.lineno} sets engine.{node.attr}")
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr.startswith("_") and is_engine(func.value):
                    found.append(f"{module}:{node.lineno} calls engine.{func.attr}")
                elif isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args:
                    if is_engine(node.args[0]):
                        found.append(f"{module}:{node.lineno} sets an engine attribute ({func.id})")
    return found


def test_nothing_outside_the_engine_writes_its_state():
    assert not engine_state_writes(SOURCES)


@pytest.mark.parametrize(
    "planted",
    [
        "engine.pos = 3",
        "self.engine.pos += 1",
        "engine.sampler, n = sampler, 1",
        "del model.engine.tokens",
        "setattr(state.model.engine, 'pos', 0)",
        "engine._forward(2)",
        "self.engine._resume()",
    ],
)
def test_the_engine_state_rule_sees_a_planted_violation(planted):
    assert [f.split(":")[0] for f in engine_state_writes({**SOURCES, "py_engine.planted": planted})] == [
        "py_engine.planted"
    ]
    assert not engine_state_writes({ENGINE_HOME: planted})  # the engine's own module may
    assert not engine_state_writes({"py_engine.planted": "engine.roll_back(engine.pos - 1)"})


# Every graph is planned in one place (loader.py's plan): the builder, and any class derived from it.
BUILDER = "GraphBuilder"


def builder_makers(sources: dict[str, str]) -> set[str]:
    """The modules that construct a graph builder (GraphBuilder or a subclass of it)."""
    trees = {module: ast.parse(text) for module, text in sources.items()}
    builders, grown = {BUILDER}, True
    while grown:
        subclasses = {
            node.name
            for tree in trees.values()
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and any(_called(base) in builders for base in node.bases)
        }
        grown = not subclasses <= builders
        builders |= subclasses
    return {
        module
        for module, tree in trees.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called(node.func) in builders
    }


def _called(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def test_graph_builders_are_made_in_one_module():
    assert builder_makers(SOURCES) == {"py_engine.runtime.loader"}


@pytest.mark.parametrize(
    "planted",
    [
        "GraphBuilder(cfg, info, options)",
        "from .models.bert import EmbeddingBuilder\nEmbeddingBuilder(cfg, info, options)",
        "from .models import builder\nclass Tall(builder.GraphBuilder): pass\nTall(cfg, info, options)",
    ],
)
def test_the_builder_rule_sees_a_planted_violation(planted):
    assert builder_makers({**SOURCES, "py_engine.planted": planted}) == {
        "py_engine.runtime.loader",
        "py_engine.planted",
    }


# The top level of py_engine/ is what a user or an entry point touches (the CLI, the chat, loading a
# model, the engine, the catalog and model cache, the errors); everything else lives in a room named
# for what it does (runtime/, decode/, models/, formats/, tokenizer/, ...), so that the tree alone
# says where a change belongs.
TOP_LEVEL_MAX = 12


def crowded_top_level(package: Path) -> list[str]:
    """The modules directly in `package` (*.py, __init__ and __main__ counted) when they are more than
    TOP_LEVEL_MAX; none when they fit. Subpackages' modules are theirs, not the top level's."""
    modules = sorted(p.name for p in package.glob("*.py"))
    return modules if len(modules) > TOP_LEVEL_MAX else []


def test_the_top_level_holds_at_most_12_modules():
    crowded = crowded_top_level(ENGINE)
    assert not crowded, f"py_engine/ holds {len(crowded)} modules (at most {TOP_LEVEL_MAX}): move some into a room"


def test_the_top_level_rule_sees_a_planted_violation(tmp_path):
    for name in ["__init__", "__main__", *(f"part{i}" for i in range(10))]:
        (tmp_path / f"{name}.py").write_text("")
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "inside.py").write_text("")
    (tmp_path / "notes.md").write_text("")
    assert crowded_top_level(tmp_path) == []  # twelve fit; a room's modules and other files do not count
    (tmp_path / "planted.py").write_text("")
    assert len(crowded_top_level(tmp_path)) == 13 and "planted.py" in crowded_top_level(tmp_path)
