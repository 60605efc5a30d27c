"""A tool round trip on the desktop engine through the OpenAI layer (py_engine/api, what
`python -m app` serves): the model calls a tool, the tool's result goes back, the model answers.
benchmarks/dawn/openai.mjs sends the same requests through the page's transport. Prints JSON.

    python benchmarks/tool_round_trip.py [--model qwen2.5-coder-0.5b-instruct]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
RESULT = {"city": "Paris", "temperature_c": 18, "sky": "sunny"}


async def main(argv=None) -> dict:
    from py_engine.api.completions import chat_chunks, collect
    from py_engine.api.request import parse_chat
    from py_engine.gpu import open_device
    from py_engine.model_cache import ensure_model
    from py_engine.session import load

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    args = parser.parse_args(argv)
    model = await load(ensure_model(args.model), await open_device(), model_id=args.model, context=2048)

    async def ask(messages, max_tokens):
        body = {"model": args.model, "messages": messages, "tools": [WEATHER], "temperature": 0}
        return await collect(chat_chunks(model, parse_chat({**body, "max_tokens": max_tokens})))

    messages = [{"role": "user", "content": "What is the weather in Paris right now?"}]
    call = await ask(messages, 100)
    message = call["choices"][0]["message"]
    results = [
        {"role": "tool", "tool_call_id": c["id"], "content": json.dumps(RESULT)} for c in message.get("tool_calls", [])
    ]
    answer = await ask([*messages, message, *results], 60)
    return {"model": args.model, "call": call, "answer": answer}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=1))
