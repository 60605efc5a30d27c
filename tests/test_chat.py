"""`python -m py_engine chat`, driven through stdin: on a tiny fixture with a made-up byte-level
tokenizer, and one turn on the real default model (downloaded into the model cache on first use)."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "qwen3-f32"  # vocab 384

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte → printable character table (the alphabet of byte-level BPE)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def write_tiny_tokenizer(directory: Path, vocab_size: int = 384) -> None:
    """A byte-level BPE over the model's whole vocabulary: 256 bytes, two ChatML tokens, and
    merges of lowercase letter pairs (so every id the random model draws decodes to text)."""
    alphabet = bytes_to_unicode()
    vocab = {alphabet[b]: b for b in range(256)}
    added = [
        {
            "id": 256 + i,
            "content": text,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, text in enumerate(("<|im_start|>", "<|im_end|>"))
    ]
    merges = []
    letters = "etaoinsrhl"
    for a in letters:
        for b in letters:
            if 258 + len(merges) < vocab_size:
                vocab[a + b] = 258 + len(merges)
                merges.append(f"{a} {b}")
    for i in range(258 + len(merges), vocab_size):  # the rest: "Ġ" + letter + digit, never merged into
        vocab[f"\u0120{letters[i % 10]}{i % 7}"] = i
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }
    (directory / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    config = {
        "chat_template": TEMPLATE,
        "eos_token": "<|im_end|>",
        "bos_token": None,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    model = tmp_path_factory.mktemp("chat") / "qwen3-tiny"
    shutil.copytree(FIXTURE, model)
    write_tiny_tokenizer(model)
    return model


def chat(*args, stdin: str, env=None, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "py_engine", "chat", *map(str, args)],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def tok_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("[") and " tok/s; prefill " in line]


def test_tiny_tokenizer_round_trips(chat_model):
    from py_engine.tokenizer import Tokenizer

    tok = Tokenizer.from_model_dir(chat_model)
    assert tok.vocab_size == 384 and tok.eos_ids == {257}
    ids = tok.encode("<|im_start|>user\nthe heat is on<|im_end|>")
    assert ids[0] == 256 and ids[-1] == 257 and max(ids) < 384
    assert tok.decode(ids) == "<|im_start|>user\nthe heat is on<|im_end|>"


def test_load_model_without_its_tokenizer(chat_model):
    """with_tokenizer=False skips the tokenizer even where tokenizer.json exists (generate --ids --json)."""
    from gpu_harness import device

    from py_engine.session import load

    assert asyncio.run(load(chat_model, device()[0], context=64, with_tokenizer=False)).tok is None


@pytest.mark.slow  # a chat CLI run
def test_chat_two_turns_reset_and_eof(chat_model):
    result = chat(
        "--model",
        chat_model,
        "--max-new-tokens",
        6,
        "--seed",
        1,
        stdin="hello there\n\nand a second turn\n/reset\nafter the reset\n",
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    answers = result.stdout.splitlines()
    assert len(answers) == 3 and all(answers), result.stdout  # one streamed line per answer
    lines = tok_lines(result.stderr)
    assert len(lines) == 3 and all(line.startswith("[6 tokens, ") for line in lines), result.stderr
    assert "conversation cleared" in result.stderr


@pytest.mark.slow  # chat and generate CLI runs, turn by turn
def test_chat_greedy_turns_match_generate_and_reuse_the_cache(chat_model):
    """Greedy chat answers equal `generate` on the same rendered conversation, both for the first
    turn and for a second turn that reuses the first one's KV cache."""
    from py_engine.tokenizer import Tokenizer

    tok = Tokenizer.from_model_dir(chat_model)
    args = ("--max-new-tokens", 5, "--temperature", 0, "--repetition-penalty", 1.0)
    result = chat("--model", chat_model, *args, stdin="hi\nsecond question\n/exit\nnever read\n")
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()

    def generate(messages):
        ids = tok.encode(tok.apply_chat_template(messages), add_special_tokens=False)
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "py_engine",
                "generate",
                "--model",
                str(chat_model),
                "--ids",
                ",".join(map(str, ids)),
                "--max-new-tokens",
                "5",
                "--json",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        tokens = json.loads(out.stdout.strip().splitlines()[-1])["tokens"]
        return tok.decode([t for t in tokens if t != 257], skip_special_tokens=True)

    assert first == generate([{"role": "user", "content": "hi"}])
    assert second == generate(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": first},
            {"role": "user", "content": "second question"},
        ]
    )
    assert len(tok_lines(result.stderr)) == 2


def test_second_turn_reuses_the_kv_cache(chat_model):
    """In process: turn two prefills only what follows the cached tokens, and answers exactly as a
    conversation that prefills everything."""

    from gpu_harness import device

    from py_engine.chat import Conversation, load
    from py_engine.decode.token_choice import SamplingParams

    gpu = device(False)[0]

    async def run():
        model = await load(chat_model, gpu, 256)
        conversation = Conversation(model, SamplingParams(), 6, system="be brief")
        pieces = []
        await conversation.reply("hello there", pieces.append)
        assert conversation.reused == 0 and "".join(pieces)
        first_turn = list(conversation.messages)
        pieces.clear()
        await conversation.reply("tell me more", pieces.append)
        assert conversation.reused > len(model.tok.encode("be brief hello there")), conversation.reused
        fresh = Conversation(model, SamplingParams(), 6, system="be brief")
        fresh.reset()  # the model's prompt cache: nothing of the other conversation is reused
        fresh.messages = first_turn
        fresh_pieces = []
        await fresh.reply("tell me more", fresh_pieces.append)
        assert fresh.reused == 0
        assert "".join(fresh_pieces) == "".join(pieces)
        assert fresh.messages == conversation.messages

    asyncio.run(run())


@pytest.mark.slow  # chat CLI runs
def test_chat_system_prompt_and_context_trimming(chat_model):
    """A small context drops the oldest exchanges instead of failing."""
    result = chat(
        "--model",
        chat_model,
        "--max-new-tokens",
        8,
        "--context",
        64,
        "--system",
        "be brief",
        stdin="one two three four five\nsix seven eight nine ten\neleven twelve thirteen\n",
    )
    assert result.returncode == 0, result.stderr
    assert len(tok_lines(result.stderr)) == 3 and "dropped" in result.stderr, result.stderr


@pytest.mark.slow  # chat CLI runs
def test_chat_errors_are_one_line(chat_model, tmp_path):
    result = chat("--model", tmp_path / "nope", stdin="")
    assert result.returncode == 2 and "nope" in result.stderr and "Traceback" not in result.stderr
    result = chat("--model", chat_model, "--top-p", 0, stdin="")
    assert result.returncode == 2 and "--top-p" in result.stderr
    no_template = tmp_path / "no-template"
    shutil.copytree(chat_model, no_template)
    (no_template / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    result = chat("--model", no_template, stdin="hi\n")
    assert result.returncode == 2 and "chat template" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow  # the real default model (SmolLM2) through the CLI
def test_chat_default_model_one_turn():
    """The real default model (SmolLM2-135M-Instruct GGUF), fetched into the model cache on first use."""
    from py_engine.catalog import DEFAULT_MODEL
    from py_engine.model_cache import ensure_model

    ensure_model(DEFAULT_MODEL)  # ~98 MB the first time
    result = chat("--max-new-tokens", 8, "--temperature", 0, stdin="What is the capital of France?\n", timeout=600)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), result.stderr
    assert len(tok_lines(result.stderr)) == 1, result.stderr


def test_fit_to_context_drops_the_oldest_exchanges(chat_model):
    """What the browser worker does with a page's messages (py_engine/tokenizer/template/prompt.py): the oldest
    user/assistant pairs go first, the system message and the newest message stay, and the prompt
    leaves room for the answer."""
    from py_engine.tokenizer import Tokenizer
    from py_engine.tokenizer.template.prompt import fit_to_context

    tok = Tokenizer.from_model_dir(chat_model)
    system = {"role": "system", "content": "be brief"}
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "words " * 20} for i in range(9)]
    whole, none_dropped = fit_to_context(tok, [system] + turns, 4096, 64)
    assert none_dropped == 0
    ids, dropped = fit_to_context(tok, [system] + turns, len(whole) - 10 + 64, 64)
    assert dropped >= 1 and len(ids) + 64 <= len(whole) - 10 + 64
    kept = [system] + turns[2 * dropped :]
    want = tok.encode(tok.apply_chat_template(kept, add_generation_prompt=True), add_special_tokens=False)
    assert ids == want  # the system message and the newest turns, in order
    tiny, _ = fit_to_context(tok, [system, turns[0]], 8, 64)  # nothing left to drop: too long, said later
    assert len(tiny) > 8


def test_worker_chat_fits_the_context(chat_model):
    """The browser worker's chat (py_engine/web/worker.py, an `openai` chat completion) on the
    desktop engine: a page's conversation longer than the context (WebKit's is 512) is answered,
    its oldest exchanges left out and counted in the response's stats, instead of failing."""

    from gpu_harness import device

    from py_engine.session import load
    from py_engine.web.state import WorkerState
    from py_engine.web.worker import handle

    model = asyncio.run(load(chat_model, device(False)[0], model_id="tiny", context=96))
    events = []
    state = WorkerState(post=events.append, model=model)
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "words " * 12} for i in range(7)]
    body = {"model": "tiny", "messages": turns, "temperature": 0, "max_tokens": 8, "stream": True}
    asyncio.run(handle({"type": "openai", "id": "g1", "endpoint": "chat.completions", "body": body}, state))
    done = [e for e in events if e["type"] in ("response", "error")]
    assert [e["type"] for e in done] == ["response"], done
    stats = done[0]["stats"]
    assert stats["dropped_exchanges"] >= 1 and stats["prompt_tokens"] + 8 <= 96, stats


def test_worker_answers_token_ids_without_a_tokenizer():
    """The request the page's benchmarks send through client.generate({ids, ignoreEos}): an
    `openai` text completion whose prompt is token ids, on a model with no tokenizer (the tiny
    llama fixture): no text, and the stats carry its greedy tokens (transformers' reference), the
    whole count with ignore_eos."""
    from gpu_harness import device

    from py_engine.session import load
    from py_engine.web.protocol import check_event
    from py_engine.web.state import WorkerState
    from py_engine.web.worker import handle

    fixture = Path(__file__).parent / "fixtures" / "llama-f32"
    ref = json.loads((fixture / "reference.json").read_text())
    gpu = device(False)[0]
    model = asyncio.run(load(fixture, gpu, model_id="tiny", with_tokenizer=False, context=64, precision="exact"))
    events = []
    state = WorkerState(post=events.append, model=model)
    count = len(ref["greedy"])
    body = {"model": "tiny", "prompt": ref["prompt_ids"], "temperature": 0, "max_tokens": count, "ignore_eos": True}
    asyncio.run(
        handle({"type": "openai", "id": "b1", "endpoint": "completions", "body": {**body, "stream": True}}, state)
    )
    *chunks, response = events
    assert [c["chunk"]["choices"][0] for c in chunks] == [  # no text: only the finish's chunk
        {"index": 0, "text": "", "logprobs": None, "finish_reason": "length"}
    ]
    check_event(response)
    stats = response["stats"]
    assert stats["tokens"] == ref["greedy"] and stats["stop"] == "length" and stats["prompt_tokens"] == 12
    assert response["body"]["usage"]["completion_tokens"] == count
