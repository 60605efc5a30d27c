"""The example notebook (docs/wisp.ipynb) in JupyterLite and the PyScript example (docs/pyscript.html),
headless: `make notebook`'s site (tools/build_notebook.py, built here when missing or stale) served by
`python -m app --notebook` beside a tiny model, every cell run by JupyterLab's own "Run All Cells". Its kernel (Pyodide in a Web Worker) installs
the engine wheel with micropip, `wisp.load`s the model through the page's weight store onto WebGPU
(SwiftShader) and streams tokens into the cell: the same text and token ids as the desktop engine gives
for the same model, prompt and settings (py_engine on lavapipe, here). Screenshot: tests/artifacts/
notebook.png. The PyScript page's worker then streams the same text into the page (the model from the
weight store this time). And what a user sees who runs wisp.load where it cannot work, on a page's main
thread and in a worker without WebGPU: the refusal that says why and what to do (a plain Pyodide of the
server's origin, on the page and in a Worker)."""

import asyncio
import json
import shutil
import subprocess
import sys

import pytest
from browser_harness import ROOT, app_server, launch

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = ROOT / "tests" / "artifacts"
MODEL = "tiny-tools"  # test_openai_server's tiny qwen3 with its made-up tokenizer
CONTEXT = 128  # the tiny model's positions: 256
# What the test changes in the example notebook: its model (the server's tiny one) and context.
EDITS = {'MODEL = \\"smollm2-135m-instruct\\"': f'MODEL = \\"{MODEL}\\"', "context=512": f"context={CONTEXT}"}
DONE_MARK = "wisp-pyscript-done"  # printed (to the console) after the PyScript page's loop, in the test's copy
PYSCRIPT_EDITS = {
    '"smollm2-135m-instruct", context=512': f'"{MODEL}", context={CONTEXT}',
    '    display(text, target="answer", append=False)\n': f'    display(text, target="answer", append=False)\nprint("{DONE_MARK}")\n',
}
PROMPT = "The capital of France is"  # the notebook's
MAX_TOKENS = 8  # the notebook's


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A copy of build/notebook (built now if stale: a few seconds when it is not) whose example
    notebook loads the tiny model."""
    built = ROOT / "build" / "notebook"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "build_notebook.py")], capture_output=True, text=True)
    if run.returncode != 0 and any(missing in run.stderr for missing in ("No matching distribution", "E404")):
        pytest.skip(f"a package of the notebook build is not on the package index: {run.stderr[-500:]}")
    assert run.returncode == 0, run.stdout + run.stderr
    copy = tmp_path_factory.mktemp("notebook") / "site"
    shutil.copytree(built, copy)
    edit(copy / "files" / "wisp.ipynb", EDITS)
    edit(copy / "pyscript.html", PYSCRIPT_EDITS)
    return copy


def edit(path, edits: dict) -> None:
    text = path.read_text()
    for old, new in edits.items():
        assert text.count(old) == 1, f"{path.name} no longer has {old!r}: update the test's edits"
        text = text.replace(old, new)
    path.write_text(text)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from test_openai_server import tiny_tool_model

    return tiny_tool_model(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def server(site, tiny):
    with app_server("--no-default", "--model", str(tiny), "--notebook", str(site)) as (url, _):
        yield url


@pytest.fixture(scope="module")
def context(server, tmp_path_factory):
    with playwright_api.sync_playwright() as p:
        context = launch(p, tmp_path_factory.mktemp("chromium"))
        yield context
        context.close()


@pytest.fixture(scope="module")
def desktop(tiny):
    """The notebook's cells on the desktop engine (wgpu-py; lavapipe here)."""
    import py_engine as wisp

    async def run():
        model = await wisp.load(tiny, context=CONTEXT, precision="exact")
        text = "".join([piece async for piece in model.generate(PROMPT, max_tokens=MAX_TOKENS, temperature=0)])
        answer = await model.complete(PROMPT, max_tokens=MAX_TOKENS, temperature=0)
        return text, answer

    return asyncio.run(run())


# Each code cell's prompt ("[3]:" once run) and its outputs' text; "error" once a cell has failed.
CELLS = """() => {
  const cells = [...document.querySelectorAll(".jp-Notebook .jp-CodeCell")];
  return cells.map((cell) => ({
    prompt: cell.querySelector(".jp-InputPrompt")?.innerText.trim() ?? "",
    outputs: [...cell.querySelectorAll(".jp-OutputArea-output")].map((o) => o.innerText),
    error: !!cell.querySelector(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"),
  }));
}"""
DONE = f"""() => {{
  const cells = ({CELLS})();
  return cells.some((c) => c.error) || (cells.length > 0 && cells.every((c) => /^\\[\\d+\\]:$/.test(c.prompt)));
}}"""


def test_the_notebooks_cells_stream_the_desktops_tokens(desktop, server, context):
    page = context.new_page()
    page.set_viewport_size({"width": 1280, "height": 1000})  # the screenshot: load, stream and ids cells
    page.goto(server + "/notebook/lab/index.html?path=wisp.ipynb")
    page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=120_000)
    page.get_by_text("Run", exact=True).first.click()  # JupyterLab's menu bar
    page.get_by_text("Run All Cells", exact=True).click()
    # Bounded by the cells' own ends (each numbered once run); the timeout only guards a hang.
    page.wait_for_function(DONE, timeout=600_000, polling=1000)
    cells = page.evaluate(CELLS)
    page.locator(".jp-Notebook .jp-CodeCell").last.scroll_into_view_if_needed()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "notebook.png"))
    assert not any(c["error"] for c in cells), json.dumps(cells, indent=1)
    install, load, stream, complete = (c["outputs"] for c in cells)
    assert "store download verify upload compile" in load[0]  # the weights came through the store
    assert f"<wisp.Model '{MODEL}' chat, context {CONTEXT}, exact>" in load[-1]
    text, answer = desktop
    assert text  # the tiny model's made-up tokenizer spells every token
    assert "".join(stream) == text
    assert complete == [f"{answer.token_ids} {answer.finish_reason}\n"]
    assert len(answer.token_ids) == MAX_TOKENS and answer.finish_reason == "length"
    page.close()


def test_the_pyscript_example_streams_the_same_text(desktop, server, context):
    page = context.new_page()
    # The loop's end, or its error (the timeout only guards a hang)
    with page.expect_console_message(lambda m: DONE_MARK in m.text or "Error" in m.text, timeout=300_000) as end:
        page.goto(server + "/notebook/pyscript.html")
        assert page.evaluate("crossOriginIsolated")  # pyscript.display from the worker needs it
    assert end.value.text == DONE_MARK, end.value.text
    assert page.locator("#answer").inner_text() == desktop[0]
    page.close()


# Pyodide with the engine, then wisp.load of the served model: what the user sees, as (error type, message).
TRY_LOAD = """
const origin = self.location.origin;  // absolute: Pyodide resolves the lock's wheels against the lock's URL
const { loadPyodide } = await import(`${origin}/pyodide/pyodide.mjs`);
const pyodide = await loadPyodide({ indexURL: `${origin}/pyodide/`, lockFileURL: `${origin}/wisp-lock.json` });
await pyodide.loadPackage(["wisp"]);
const seen = (await pyodide.runPythonAsync(`
import py_engine as wisp
try:
    await wisp.load("tiny-tools")
    seen = ("loaded", "")
except Exception as exc:
    seen = (type(exc).__name__, str(exc))
seen
`)).toJs();
"""
MAIN_THREAD = f"async () => {{ {TRY_LOAD}; return seen; }}"
# The same in a dedicated worker whose browser gives it no WebGPU (navigator.gpu hidden before the load).
NO_WEBGPU = """async (tryLoad) => {
  const hide = 'Object.defineProperty(WorkerNavigator.prototype, "gpu", { get: () => undefined });';
  const code = `${hide}\n${tryLoad}\npostMessage(seen);`;
  const worker = new Worker(URL.createObjectURL(new Blob([code], { type: "text/javascript" })), { type: "module" });
  return await new Promise((resolve, reject) => {
    worker.onmessage = (event) => resolve(event.data);
    worker.onerror = (event) => reject(new Error(event.message));
  });
}"""


def test_wisp_load_where_it_cannot_run_says_why_and_what_to_do(server, context):
    page = context.new_page()
    page.goto(server + "/api/models")  # a document of the server's origin, nothing running in it
    kind, message = page.evaluate(MAIN_THREAD)
    assert kind == "MainThreadError", message
    assert "on a page's main thread" in message and "dedicated Web Worker" in message
    assert '<script type="py" worker>' in message
    kind, message = page.evaluate(NO_WEBGPU, TRY_LOAD)
    assert kind == "NoWebGPUError", message
    assert (
        message == "this worker has no WebGPU (navigator.gpu is missing): use a browser that gives WebGPU to "
        "workers (Chrome or Edge 113+, Safari 26), with WebGPU enabled"
    )
    page.close()
