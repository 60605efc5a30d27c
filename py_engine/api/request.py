"""OpenAI request bodies, checked: what a client may send to /v1/chat/completions, /v1/completions
and /v1/embeddings (or the page's module, which sends the same dicts), turned into plain values.

Field names, defaults and limits are OpenAI's (temperature and top_p default to 1; at most 4 stop
strings; n is 1). A field Wisp cannot honour is refused by name rather than ignored, except those
that change nothing about the answer (user, metadata, store, parallel_tool_calls, service_tier,
logprobs false). Besides OpenAI's fields, generation takes top_k, repetition_penalty, precision
("fast" or "exact": the arithmetic of the model's GEMV, Engine.load's; absent: the server's or the
page's load option), lookup (prompt-lookup decoding: the same tokens, faster where the answer
copies the conversation) and ignore_eos (no stop id ends the answer: benchmarks decode a fixed
count), and memory (api/memory.py: passages of the user's documents recalled into the prompt). A
text completion's prompt may be token ids, as OpenAI's may. A bad body is a
RequestError: HTTP 400 with OpenAI's error object."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..decode.token_choice import SamplingParams
from ..runtime.linear_plan import PRECISIONS
from .memory import parse_memory
from .request_error import RequestError

ROLES = ("system", "developer", "user", "assistant", "tool")
IGNORED = {"user", "metadata", "store", "parallel_tool_calls", "service_tier", "stream_options", "model"}


@dataclass
class GenerationRequest:
    """What chat and text completions share."""

    model: str
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    response_format: dict | None = None
    precision: str | None = None  # Wisp's own field: "fast" or "exact" arithmetic (None: as loaded)
    ignore_eos: bool = False  # Wisp's own field: no stop id ends the answer


@dataclass
class ChatRequest(GenerationRequest):
    messages: list[dict] = field(default_factory=list)
    tools: list[dict] = field(default_factory=list)
    tool_choice: object = "auto"  # "auto" | "none" | "required" | a function's name (str, forced)
    # image_url parts' URLs, in the order the messages give them; each such message's content
    # is a list of parts ({"type": "image"} where a picture goes), as chat templates take them.
    pictures: list[str] = field(default_factory=list)
    memory: object = None  # Wisp's own field: api/memory.py's MemoryOptions (None: no recall)


@dataclass
class CompletionRequest(GenerationRequest):
    prompt: str | list[int] = ""  # text, or token ids
    echo: bool = False


@dataclass
class EmbeddingRequest:
    model: str
    inputs: list[str]
    encoding_format: str = "float"  # or "base64": little-endian float32, as OpenAI's
    dimensions: int | None = None  # a Matryoshka model's shorter vectors (None: the whole)
    prompt_name: str | None = None  # Wisp's own field: one of the model's named prompts ("query", ...)


def _get(body: dict, name: str, kinds, default=None):
    value = body.get(name, default)
    if value is None:
        return default
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _tuple(kinds)):
        raise RequestError(f"'{name}' must be {_names(kinds)}, not {type(value).__name__}", name)
    return value


def _tuple(kinds) -> tuple:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _names(kinds) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "an array"}
    return " or ".join(names.get(k, "an object") for k in _tuple(kinds))


def _number(body: dict, name: str, default: float, low: float, high: float) -> float:
    value = float(_get(body, name, (int, float), default))
    if not low <= value <= high:
        raise RequestError(f"'{name}' must be between {low:g} and {high:g}, not {value:g}", name)
    return value


def _check_body(body, allowed: set) -> dict:
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestError("'model' is required: the id of a model (GET /v1/models lists them)", "model")
    unknown = sorted(set(body) - allowed - IGNORED)
    if unknown:
        raise RequestError(f"'{unknown[0]}' is not supported by Wisp", unknown[0])
    if body.get("n", 1) != 1:
        raise RequestError("'n' must be 1: Wisp writes one choice per request", "n")
    if body.get("logprobs") or body.get("top_logprobs"):
        raise RequestError("'logprobs' is not supported by Wisp", "logprobs")
    for name in ("frequency_penalty", "presence_penalty"):
        if _number(body, name, 0, -2, 2) != 0:
            raise RequestError(f"'{name}' is not supported by Wisp (repetition_penalty is)", name)
    if body.get("logit_bias"):
        raise RequestError("'logit_bias' is not supported by Wisp", "logit_bias")
    return body


GENERATION_FIELDS = {
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "repetition_penalty",
    "max_tokens",
    "stop",
    "seed",
    "response_format",
    "n",
    "logprobs",
    "top_logprobs",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "precision",
    "lookup",
    "ignore_eos",
}


def _generation(body: dict, request: GenerationRequest) -> None:
    request.stream = _get(body, "stream", bool, False)
    options = _get(body, "stream_options", dict, {})
    request.include_usage = bool(options.get("include_usage")) and request.stream
    seed = _get(body, "seed", int)
    temperature, top_p = _number(body, "temperature", 1.0, 0, 2), _number(body, "top_p", 1.0, 0, 1)
    temperature, top_p = (0.0, 1.0) if top_p == 0 else (temperature, top_p)  # an empty nucleus: greedy
    request.sampling = SamplingParams(
        temperature=temperature,
        top_p=top_p,
        top_k=int(_number(body, "top_k", 0, 0, 1 << 20)),
        repetition_penalty=_number(body, "repetition_penalty", 1.0, 0.01, 10),
        # No seed: a new one per request (OpenAI's answers vary); a seed: the same answer again.
        seed=seed if seed is not None else random.randrange(1 << 31) if temperature else 0,
        lookup=_get(body, "lookup", bool, False),
    )
    request.ignore_eos = _get(body, "ignore_eos", bool, False)
    tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if tokens is not None and (type(tokens) is not int or tokens < 1):
        raise RequestError("'max_tokens' must be a positive integer", "max_tokens")
    request.max_tokens = tokens
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else [] if stop is None else stop
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop):
        raise RequestError("'stop' must be a non-empty string or up to 4 of them", "stop")
    request.stop = stop
    fmt = _get(body, "response_format", dict)
    if fmt is not None and fmt.get("type") not in ("text", "json_object", "json_schema"):
        raise RequestError("'response_format.type' must be text, json_object or json_schema", "response_format")
    if fmt is not None and fmt["type"] == "json_schema" and not isinstance(fmt.get("json_schema"), dict):
        raise RequestError("'response_format.json_schema' must be an object with a schema", "response_format")
    request.response_format = None if fmt is None or fmt["type"] == "text" else fmt
    request.precision = _get(body, "precision", str)
    if request.precision not in (None, *PRECISIONS):
        raise RequestError(f"'precision' must be {' or '.join(PRECISIONS)}, not {request.precision!r}", "precision")


def parse_chat(body) -> ChatRequest:
    _check_body(body, GENERATION_FIELDS | {"messages", "tools", "tool_choice", "max_completion_tokens", "memory"})
    request = ChatRequest(model=body["model"])
    _generation(body, request)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty array", "messages")
    request.messages = [_message(m, i, request.pictures) for i, m in enumerate(messages)]
    request.tools = _tools(body.get("tools"))
    request.tool_choice = _tool_choice(body.get("tool_choice"), request.tools)
    request.memory = parse_memory(body.get("memory"))
    if request.tool_choice not in ("auto", "none") and request.response_format:
        raise RequestError("a forced tool call and a response_format cannot both shape the answer", "tool_choice")
    return request


def _message(message, index: int, pictures: list[str]) -> dict:
    """The message as the chat template takes it; its image_url parts' URLs appended to pictures."""
    where = f"messages[{index}]"
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise RequestError(f"{where} must be an object whose role is one of {', '.join(ROLES)}", where)
    content = message.get("content")
    if isinstance(content, list):  # content parts: text, and pictures in a user's message
        content = _parts(content, where, message["role"] == "user", pictures)
    if content is not None and not isinstance(content, (str, list)):
        raise RequestError(f"{where}.content must be a string or an array of content parts", f"{where}.content")
    calls = message.get("tool_calls")
    if content is None and not (message["role"] == "assistant" and calls):
        raise RequestError(f"{where}.content is required", f"{where}.content")
    out = {"role": "system" if message["role"] == "developer" else message["role"], "content": content}
    if calls is not None:
        out["tool_calls"] = _sent_tool_calls(calls, where)
    for key in ("tool_call_id", "name"):
        if isinstance(message.get(key), str):
            out[key] = message[key]
    return out


DETAILS = ("auto", "low", "high")  # image_url.detail: accepted; the processor decides the tiles


def _parts(parts: list, where: str, user: bool, pictures: list[str]):
    """Text parts joined into a string; with image_url parts (a user's), the template's parts."""
    out = []
    for i, part in enumerate(parts):
        at = f"{where}.content[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            out.append({"type": "text", "text": part["text"]})
        elif kind == "image_url" and user:
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else None
            if not isinstance(url, str) or not url:
                raise RequestError(f"{at}.image_url.url must be a URL string", f"{at}.image_url")
            if image.get("detail", "auto") not in DETAILS:
                raise RequestError(f"{at}.image_url.detail must be one of {', '.join(DETAILS)}", f"{at}.image_url")
            pictures.append(url)
            out.append({"type": "image"})
        else:
            allowed = "text and image_url parts" if user else "text parts"
            raise RequestError(f"{at}: only {allowed} are supported here", at)
    if all(part["type"] == "text" for part in out):
        return "".join(part["text"] for part in out)
    return out


def _sent_tool_calls(calls, where: str) -> list[dict]:
    """An assistant message's tool_calls, as templates read them: arguments as an object (OpenAI
    sends a JSON string; Qwen's template writes `arguments | tojson`)."""
    import json

    if not isinstance(calls, list):
        raise RequestError(f"{where}.tool_calls must be an array", f"{where}.tool_calls")
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RequestError(f"{where}.tool_calls: each needs function.name", f"{where}.tool_calls")
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError:
                raise RequestError(f"{where}.tool_calls: arguments is not JSON", f"{where}.tool_calls") from None
        function = {"name": function["name"], "arguments": arguments}
        out.append({"id": call.get("id"), "type": "function", "function": function})
    return out


def _tools(tools) -> list[dict]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise RequestError("'tools' must be an array", "tools")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise RequestError(f"tools[{i}] must be {{type: 'function', function: {{name, parameters}}}}", "tools")
        if not isinstance(function.get("parameters", {}), dict):
            raise RequestError(f"tools[{i}].function.parameters must be a JSON schema object", "tools")
    return tools


def _tool_choice(choice, tools: list[dict]):
    if choice is None:
        return "auto" if tools else "none"
    if choice in ("auto", "none", "required"):
        if choice == "required" and not tools:
            raise RequestError("tool_choice 'required' needs tools", "tool_choice")
        return choice
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if name not in [t["function"]["name"] for t in tools]:
        raise RequestError("tool_choice must be auto, none, required or a declared function", "tool_choice")
    return name


def parse_completion(body) -> CompletionRequest:
    _check_body(body, GENERATION_FIELDS | {"prompt", "echo", "suffix", "best_of"})
    request = CompletionRequest(model=body["model"])
    _generation(body, request)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # one prompt in a list of them
    ids = isinstance(prompt, list) and prompt and all(type(i) is int for i in prompt)
    if not isinstance(prompt, str) and not ids:
        raise RequestError("'prompt' must be a string or a list of token ids (one prompt per request)", "prompt")
    if body.get("suffix") or body.get("best_of", 1) != 1:
        raise RequestError("'suffix' and 'best_of' are not supported by Wisp", "suffix")
    request.prompt, request.echo = prompt, _get(body, "echo", bool, False)
    return request


def parse_embeddings(body) -> EmbeddingRequest:
    _check_body(body, {"input", "encoding_format", "dimensions", "prompt_name"})
    inputs = body.get("input")
    inputs = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) and t for t in inputs):
        raise RequestError("'input' must be a non-empty string or an array of them", "input")
    if len(inputs) > 2048:
        raise RequestError("'input' holds at most 2048 strings", "input")
    fmt = _get(body, "encoding_format", str, "float")
    if fmt not in ("float", "base64"):
        raise RequestError("'encoding_format' must be float or base64", "encoding_format")
    dims = _get(body, "dimensions", int)
    return EmbeddingRequest(body["model"], inputs, fmt, dims, _get(body, "prompt_name", str))
