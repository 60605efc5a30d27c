"""Wisp's image-to-first-token on a text GGUF + mmproj GGUF pair and a picture file. Prints one JSON object.

    python benchmarks/vision_wisp.py --model TEXT.gguf --mmproj MMPROJ.gguf --picture PIC [--prompt TEXT]
                                     [--runs 3] [--new-tokens 4] [--context 4096] [--precision fast|exact]

Each run goes the way `python -m py_engine generate --chat --mmproj --image` goes (py_engine/cli.py generate),
timed from before the picture file is read to the first answer token's arrival on the host: Pillow decodes
the file (vision/files.py read_picture), the chat template renders the user message (the picture, then the
prompt), VisionInput.expand writes the picture's tokens, the tokenizer encodes, and AnswerStream generates
(greedy, --new-tokens, no stop) through the prompt cache, which encodes the picture on the GPU (resizes,
tiles, tower, projector) before the prompt's prefill and the first token. Parts: "read" (file to token ids),
"encode" (AnswerStream.started to .encoded: the picture's bytes to its image embeddings, a GPU wait
included) and "prefill" (.encoded to the first token). The prompt cache is reset before each run, or the
second run would reuse the picture's tokens (a later question about the same picture does so, by design).

The tower alone: VisionEncoder.encode over as many tiles of patch rows as the picture makes (zeros; the
values do not change the work), each tile's forward then its image embeddings read back to the host, as
llama.cpp's image encode hands them back: "tower_ms" and patch rows per second. One warm-up of each comes
first (pipelines compile on first use); the medians of --runs are reported, every run too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from py_engine.cli import add_precision_arg  # noqa: E402
from py_engine.decode.answer_stream import AnswerStream  # noqa: E402
from py_engine.decode.token_choice import SamplingParams  # noqa: E402
from py_engine.gpu import open_device  # noqa: E402
from py_engine.session import load, read_model_files  # noqa: E402
from py_engine.vision.files import read_picture  # noqa: E402

PROMPT = "Describe this picture in one sentence."


async def one_answer(model, picture_path: Path, prompt: str, new_tokens: int) -> dict:
    """One picture question from its file to the first token, as the CLI's generate --chat runs it."""
    tok = model.tok
    start = time.perf_counter()
    picture = read_picture(picture_path)
    message = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}
    text, _ = model.vision.expand(tok.apply_chat_template([message]), [picture])
    ids = tok.encode(text, add_special_tokens=False)
    answer = AnswerStream(model, ids, new_tokens, SamplingParams(), pictures=[picture], ignore_eos=True)
    async for _ in answer:
        pass
    first = answer.token_times[0]
    return {
        "image_to_first_token_ms": 1e3 * (first - start),
        "read_ms": 1e3 * (answer.started - start),
        "encode_ms": 1e3 * (answer.encoded - answer.started),
        "prefill_ms": 1e3 * (first - answer.encoded),
        "prompt_tokens": len(ids),
        "tokens": answer.tokens,
    }


async def tower_time(vision, tiles: int) -> float:
    encoder = vision.encoder
    patches = [bytes(4 * encoder.rows * encoder.row_values)] * tiles
    start = time.perf_counter()
    await encoder.encode(patches)
    return time.perf_counter() - start


def median_of(runs: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 2)


async def measure(args) -> dict:
    started = time.perf_counter()
    files = read_model_files(args.model, mmproj=args.mmproj)
    device = await open_device()
    model = await load(files, device, context=args.context, precision=args.precision)
    loaded = time.perf_counter() - started
    runs = []
    for _ in range(1 + args.runs):  # the first warms up: not reported in the medians
        model.cache.reset()
        runs.append(await one_answer(model, args.picture, args.prompt, args.new_tokens))
    picture = read_picture(args.picture)
    plan = model.vision.text.plan(picture.height, picture.width)
    towers = [await tower_time(model.vision, plan.num_images) for _ in range(1 + args.runs)]
    tower = statistics.median(towers[1:] or towers)  # --runs 0: the warm-up's alone
    rows = plan.num_images * model.vision.encoder.rows
    timed = runs[1:] or runs
    return {
        "adapter": device.caps.adapter,
        "model": str(args.model),
        "mmproj": str(args.mmproj),
        "precision": args.precision,
        "picture": f"{args.picture.name} {picture.width} x {picture.height}",
        "tiles": plan.num_images,
        "patch_rows": rows,
        "picture_tokens": plan.num_image_tokens,
        "prompt_tokens": runs[0]["prompt_tokens"],
        "load_s": round(loaded, 2),
        **{key: median_of(timed, key) for key in ("image_to_first_token_ms", "read_ms", "encode_ms", "prefill_ms")},
        "tower_ms": round(1e3 * tower, 2),
        "tower_rows_per_s": round(rows / tower),
        "warm_up": {k: round(v, 2) for k, v in runs[0].items() if k.endswith("_ms")}
        | {"tower_ms": round(1e3 * towers[0], 2)},
        "runs": [{k: round(v, 2) for k, v in r.items() if k.endswith("_ms")} for r in timed],
        "tower_runs_ms": [round(1e3 * t, 2) for t in towers[1:]],
        "first_tokens": runs[-1]["tokens"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="the text GGUF")
    parser.add_argument("--mmproj", type=Path, required=True, help="its vision projector GGUF")
    parser.add_argument("--picture", type=Path, required=True)
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=4)
    parser.add_argument("--context", type=int, default=4096)
    add_precision_arg(parser)
    print(json.dumps(asyncio.run(measure(parser.parse_args()))))


if __name__ == "__main__":
    main()
