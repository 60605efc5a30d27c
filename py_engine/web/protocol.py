"""The worker protocol: every message the page sends the worker and every event the worker sends
back, with their fields. This table is the protocol: worker.py checks each incoming message
against it (a malformed one is answered by an `error` event of kind "protocol", never raised),
and the browser tests check every event the real worker and the page tests' fake worker emit,
and every message static/client.js sends, against it.

How to read a field: "name" must be present, "name?" may be absent; its value is
  str, int, bool     a JSON string, whole number, true/false (a bool is not a number)
  float              any JSON number
  None               null
  Or(a, b, ...)      any of these;  Enum("x", "y") one of these strings
  [t]                a list of t;   Map(t) an object with any keys, each value a t
  {field: t, ...}    an object with exactly these fields;  dict  any object
Events name the request they answer by `id` (null: boot progress and errors of no request).
"""

from __future__ import annotations

from .protocol_spec import Enum, Map, Or, ProtocolError, check, describe, name_of

__all__ = ["ProtocolError", "check", "check_event", "check_message", "describe"]


ID = Or(str, int)  # the page's request id (client.js: "load-1", "gen-2", ...)
PLATFORM = dict  # static/platform.js detectPlatform(): {webkit, reason, ...}
GROUP = Or(str, int, None)  # dispatches per command buffer, or "all"
DEVICE_OPTIONS = {  # how load and diagnose open the device (web/webkit.py load_policy, gpu/submit_strategy.py)
    "context?": Or(int, str, None),
    "f32?": bool,
    "precision?": Or(Enum("fast", "exact"), None),  # Engine.load's (None: fast)
    "gpu_budget_mb?": Or(int, str, None),
    "platform?": PLATFORM,
    "group?": GROUP,
    "probe?": Or({"group": Or(str, int), "reason?": str, "ceiling?": GROUP}, {"error": str}),
}
LOAD_OPTIONS = {
    **DEVICE_OPTIONS,
    # The caller sends text (the chat page): a model with no tokenizer is refused at load, before its
    # weights, instead of failing at the first message. Without it (the API), token ids still work.
    "needs_text?": bool,
}
MODEL = {  # what /api/models lists, plus where its files are served (client.js modelRef)
    "id": str,
    "name?": str,
    "kind": Enum("gguf", "hf"),  # hf: a safetensors folder (MLX-quantized or not)
    "base": str,
    "files": Map(int),
    "hashes?": Or(Map(Or({"sha256": str}, {"etag": str})), None),
    # A model the user brought (static/byo.js), absent for our server's: "url": base is another
    # origin's absolute URL; "local": the user's files, base "local:<id>/", each File in blobs
    # (worker.js hands them to the weight store; Python never sees them).
    "source?": Enum("url", "local"),
    "blobs?": Map(object),
    # A GGUF model's vision projector (python -m app --mmproj): which of `files` is llama.cpp's
    # mmproj GGUF, read beside the text GGUF (worker.py's load), so the model reads pictures.
    "mmproj?": str,
}
SPEECH_TASK = Enum("transcription", "speech")
MESSAGES = {  # page -> worker
    "load": {"id": ID, "model": MODEL, "options?": LOAD_OPTIONS},
    # The one generation message: OpenAI's API (py_engine/api/; static/openai.js, and the page's chat
    # through static/client.js's generate), a request body as the desktop's /v1 takes it (with Wisp's
    # own fields: api/request.py), answered with `chunk` events (stream: true) and one `response`;
    # the loaded model answers. A chat's image_url parts (a vision model's: `loaded`'s vision) name
    # their pictures by data: URL, by a blob: URL the page made of the user's file, or by http(s)
    # where CORS allows; the worker decodes them itself (worker/pictures.js, web/pictures.py).
    "openai": {
        "id": ID,
        "endpoint": Enum("chat.completions", "completions", "embeddings"),
        "body": dict,
        "embedder?": MODEL,  # a body with `memory` (Wisp's extension): the embedding model that recalls
    },
    "cancel": {"id": ID},
    "unload": {"id?": ID},
    "store_list": {"id": ID},
    "store_remove": {"id": ID, "model": str},
    "store_persist": {"id": ID},
    # a model the user brought: is a stored model byte for byte the same? (the `store` event's twin)
    "store_twin": {"id": ID, "model": MODEL},
    "diagnose": {"id": ID, "options?": DEVICE_OPTIONS},  # "Check this device": no model needed
    "probe": {"id": ID, "group": int, "steps?": int},  # WebKit's submit probe; group 0: all in one
    # Memory (web/memory.py): a collection of the user's documents in OPFS, embedded by `embedder` (an
    # embedding model, loaded beside the chat model on first use; the store refuses another model's).
    # Each is answered by one `memory` event; an add narrates itself in `memory_progress` events, and
    # the embedder's first load in `progress` events as any load does.
    "memory_list": {"id": ID, "collection": str, "embedder": MODEL},
    # a file's bytes (data: the page's ArrayBuffer, transferred; read by read_document) or a text
    "memory_add": {
        "id": ID,
        "collection": str,
        "embedder": MODEL,
        "name": str,
        "data?": object,
        "text?": str,
        "media_type?": Or(str, None),
        "metadata?": dict,
        "options?": DEVICE_OPTIONS,  # the device to open when no model holds one yet
    },
    "memory_delete": {"id": ID, "collection": str, "embedder": MODEL, "document": str},
    "memory_recall": {
        "id": ID,
        "collection": str,
        "embedder": MODEL,
        "query": str,
        "k?": int,
        "token_budget?": int,
        "filter?": Or(dict, None),
        "options?": DEVICE_OPTIONS,
    },
    # memory/transfer.py's JSON lines (web/memory_transfer.py): an export comes back in `memory_lines`
    # events, then its `memory` event (`exported`); an import is sent in batches, each one message
    # carrying the export's header line and some of its lines (`line`: the number of the first, for
    # errors; `name`: the file's), answered by a `memory` event (`imported`, `skipped`)
    "memory_export": {"id": ID, "collection": str, "embedder": MODEL},
    "memory_import": {
        "id": ID,
        "collection": str,
        "embedder": MODEL,
        "header": str,
        "lines": [str],
        "line": int,
        "name?": str,
        "options?": DEVICE_OPTIONS,  # another model's export is embedded again: the device to open
    },
    # Speech (web/speech.py): a transcription model (Whisper, Moonshine) or a speech model (Kani-TTS-2),
    # loaded on its first request through the weight store onto the worker's device (opened with
    # `options` when no model holds one) and kept; one speech request at a time, beside a chat answer.
    # Each is answered by one `speech` event; a first load narrates itself in `progress` events.
    "speech_load": {"id": ID, "model": MODEL, "task": SPEECH_TASK, "options?": DEVICE_OPTIONS},
    # OpenAI's request bodies with Wisp's fields (/v1/audio's, checked by audio/requests.py as the
    # desktop checks them). audio: 16 kHz mono float32 samples (a Float32Array); segments come as
    # `transcript_segment` events and the `speech` event has the transcript in the body's
    # response_format; task "translate": /v1/audio/translations' (into English)
    "transcribe": {
        "id": ID,
        "model": MODEL,
        "audio": object,
        "body": dict,
        "task?": Enum("transcribe", "translate"),
        "options?": DEVICE_OPTIONS,
    },
    # the PCM comes in `speech_audio` events: the bytes of the body's response_format (pcm: PCM16
    # little-endian; wav: a stream's header first) or, float32, the samples (the page's player)
    "speak": {"id": ID, "model": MODEL, "body": dict, "float32?": bool, "options?": DEVICE_OPTIONS},
}
SUBMIT = {
    "strategy": Enum("single-pass", "grouped"),
    "group": GROUP,
    "reason": str,
    "probed?": bool,
    "ceiling?": GROUP,
}
ADAPTER = {
    "name": str,
    "features": [str],
    "limits": Map(int),
    "subgroup_min_size": int,
    "webkit": bool,
    "platform_reason": str,
    "submit": SUBMIT,
    "workarounds": [str],
}
RESULT = {"name": str, "ok": bool, "detail": str, "ms": float}  # one self-test
STATS = {  # a completion's numbers (web/openai_messages.py generation_stats): the page's stats line
    "tokens": [int],  # every token generated, a final stop id included
    "prompt_tokens": int,
    "dropped_exchanges": int,  # a chat's oldest exchanges left out to fit the context
    "prefilled_tokens": int,  # prompt tokens computed (the others were in the KV cache)
    "ttft_ms": float,
    "prefill_tok_s": float,
    "decode_tok_s": float,
    "host_ms_per_token": float,
    # eos: a stop id; stop: a stop string, or the constraint was finished
    "stop": Enum("eos", "stop", "length", "cancel"),
    "command_buffers": int,
    # a prompt with pictures: how many, their picture tokens (in prompt_tokens), and the ms from
    # decoding them (worker/pictures.js) to their embeddings done on the GPU
    "pictures?": int,
    "picture_tokens?": int,
    "picture_ms?": float,
}
SEGMENT = {"start": float, "end": float, "text": str, "tokens?": [int]}  # a transcript's piece (its ids: Whisper's)
MEMORY_DOCUMENT = {"id": str, "source": str, "metadata": dict, "chars": int, "passages": int}
STORED = {
    "model": {"id": str, "name": Or(str, None), "kind": Or(str, None)},
    "files": [{"name": str, "size": int, "written": int, "complete": bool}],
    "bytes": int,
}

EVENTS = {  # worker -> page
    "booted": {"pyodide_ms": float},
    # download also has bytes_per_s and eta_s; verify counts one file's bytes read back (file: its name),
    # upload the bytes landed in GPU buffers
    "progress": {
        "id": Or(ID, None),
        "phase": Enum("boot", "store", "download", "verify", "upload", "compile"),
        "done": float,
        "total": float,
        "bytes_per_s?": float,
        "eta_s?": Or(float, None),
        "file?": str,
    },
    # usage: the origin's bytes, never less than the stored models' (store.js report)
    "store": {
        "id": ID,
        "models": [STORED],
        "usage": float,
        "quota": float,
        "persisted": bool,
        "backend?": str,
        "twin?": Or(str, None),  # store_twin's answer: the stored model with the same bytes, or null
    },
    "loaded": {
        "id": ID,
        "model": str,
        "adapter": ADAPTER,
        "load_ms": float,
        "context": int,
        "kv_cache": str,  # "K/V" formats
        "precision?": Enum("fast", "exact"),  # the generating model's arithmetic (not an embedder's)
        "vision?": bool,  # it reads pictures (image_url parts): the page offers attaching them
        "gpu_bytes": {"weights": int, "kv_cache": int, "activations": int, "other": int},
        "wasm_memory_bytes": int,
        # bytes streamed into GPU buffers, their wall ms, this thread's seconds per phase (load_clock.js),
        # and where the last download was written and hashed (the store's writer thread, or here)
        "weights?": {
            "bytes": int,
            "ms": float,
            "phases": Map({"s": float, "bytes": int}),
            "writer?": Enum("thread", "here"),
        },
    },  # weights never pass through the worker's heap
    "probe": {
        "id": ID,
        "group": int,
        "steps": int,
        "ok": bool,
        "detail": str,
        "ms": float,
        "command_buffers": int,
        "adapter": {"name": str, "vendor": str, "architecture": str, "description": str},
    },
    "chunk": {"id": ID, "chunk": dict},  # an OpenAI stream's chunk, as the desktop's server-sent events carry
    # the whole OpenAI response (after a stream: the chunks added up); a completion's with its stats
    "response": {"id": ID, "body": dict, "stats?": STATS},
    # The GPU device was lost (web/recovery.py): the worker runs the load `id` again on a new device,
    # from the weight store. "reloading" per attempt (attempt: losses in a row), then "reloaded", or
    # "failed" (message: why) when it gives up. reason: the browser's ("destroyed", "unknown").
    "device_lost": {
        "id": ID,
        "status": Enum("reloading", "reloaded", "failed"),
        "attempt": int,
        "model": str,
        "reason": str,
        "message": str,
    },
    # A memory message's answer: the collection's documents (list, add, delete: `added` / `deleted` say
    # what changed), the store's bytes and the origin's usage and quota, records that did not read
    # (`damaged`: the rest is there); a recall's passages (memory.collection.Recalled's fields).
    "memory": {
        "id": ID,
        "collection": str,
        "documents?": [MEMORY_DOCUMENT],
        "bytes?": int,
        "usage?": float,
        "quota?": float,
        "damaged?": [str],
        "added?": MEMORY_DOCUMENT,
        "deleted?": str,
        "hits?": [dict],
        "exported?": int,  # documents (their lines came in `memory_lines` events before)
        "imported?": int,  # an import batch's documents added, and those already there
        "skipped?": int,
    },
    # a part of an export: whole lines (the header first), `done` of `total` documents written
    "memory_lines": {"id": ID, "text": str, "done": int, "total": int},
    # an add's steps: read (the file), embedder (its first load), embed (done of total passages)
    "memory_progress": {
        "id": ID,
        "file": str,
        "phase": Enum("read", "embedder", "embed"),
        "done": int,
        "total": int,
    },
    # a transcription's segment, as the model finishes it (seconds from the audio's start)
    "transcript_segment": {"id": ID, **SEGMENT},
    # a speak's chunk of audio (a Uint8Array: float32 samples or the response_format's bytes) as the
    # codec decodes it; samples: how many it holds
    "speech_audio": {"id": ID, "audio": object, "samples": int, "sample_rate": int},
    # A speech message's answer: the model (load_ms when this request loaded it; a speech model's voices);
    # a transcription's text, segments, language, the audio's seconds and its body in the response_format
    # asked; a speech's samples, and whether it ended or was cancelled
    "speech": {
        "id": ID,
        "model": str,
        "task": SPEECH_TASK,
        "sample_rate": int,
        "load_ms?": float,
        "voices?": [str],
        "text?": str,
        "segments?": [SEGMENT],
        "language?": Or(str, None),
        "duration?": float,
        "body?": Or(dict, str),
        "samples?": int,
        "stop?": Enum("end", "cancel"),
    },
    "diagnostic": {"id": ID, "result": RESULT},  # one per self-test, as it finishes
    "diagnostics": {"id": ID, "adapter": ADAPTER, "results": [RESULT]},
    "error": {
        "id": Or(ID, None),
        "message": str,
        # device-lost: the request's GPU device was lost (an openai request's: `device_lost` events follow)
        "kind": Enum(
            "no-webgpu",
            "protocol",
            "load",
            "quota",
            "generate",
            "request",  # an OpenAI request the API refuses (api/request.py RequestError): its message names the field
            "store",
            "document",  # a document memory cannot read (memory.documents' DocumentError, naming it)
            "memory",  # a memory message that failed otherwise (the collection's store: its message says)
            "speech",  # a speech message that failed (its model's load, or its audio or text: the message says)
            "probe",
            "diagnose",
            "device-lost",
            "internal",
        ),
    },
}
TEST_HOOK = {  # only a worker started as /worker/worker.js?test (worker.js; tests/test_browser_gpu.py)
    "test_exec": {"id": ID, "code": str},
    "test_result": {"id": ID, "result?": object, "error?": str},
}


def check_message(message) -> str:
    """The message's type, once it fits the table; else ProtocolError saying what does not."""
    return _check_typed(message, MESSAGES, "message")


def check_event(event) -> str:
    return _check_typed(event, EVENTS, "event")


def _check_typed(value, table: dict, what: str) -> str:
    if not isinstance(value, dict):
        raise ProtocolError(f"a worker {what} must be an object, not {name_of(value)}")
    kind = value.get("type")
    if kind not in table:
        raise ProtocolError(f"unknown {what} type {kind!r}; known: {', '.join(table)}")
    check(value, {"type": str, **table[kind]}, kind)
    return kind
