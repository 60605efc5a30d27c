"""Load a model into the one record every answerer holds (LoadedModel: the engine, the tokenizer
if any, the stop ids, the prompt cache; or an embedding model's embedder).

Loading is two steps: read_model_files reads and checks everything a model's files say (config,
tensor index, tokenizer, stop ids) and plans its graph once, with no device; load then uploads to
a device. The CLI reads first, so a malformed model is reported before a GPU driver is opened (and
has its say on stderr)."""

from __future__ import annotations

from dataclasses import dataclass

from .decode.prompt_cache import PromptCache
from .engine import PREFILL_ROWS, Engine
from .errors import ModelFileError
from .formats.json_file import read_json
from .formats.model_files import ModelFiles, read_model
from .formats.source import open_source
from .models.config import ENCODER_ARCHITECTURES, VISION_TOWERS
from .models.config_check import FieldCheck
from .models.graph_options import GraphOptions
from .runtime.kv_cache import ring_slack
from .runtime.loader import plan


@dataclass
class LoadedModel:
    """A model ready to answer, as the CLI, the terminal chat, the browser worker and the OpenAI
    layer (api/completions.py) hold it; made by load()."""

    id: str  # the name requests use (the worker's and the server's model id)
    engine: Engine | None  # None: an embedding model
    tok: object | None  # None: a model without a tokenizer (token ids only)
    stop_ids: set
    cache: PromptCache | None  # the engine's: turns reuse the KV cache
    embedder: object = None  # an embedding model's embedding.Embedder
    vision: object = None  # a vision-language model's picture side (vision/input.py VisionInput)


def read_model_files(model, *, with_tokenizer: bool = True, mmproj=None) -> ModelFiles:
    """model: a GGUF file (tokenizer and chat template from its metadata), an HF model directory,
    or a ModelSource (the browser's). mmproj: llama.cpp's vision projector GGUF (a path or a
    ModelSource) giving the model its picture side, as llama.cpp takes a text GGUF and its
    mmproj-*.gguf (formats/mmproj.py); an HF SmolVLM, Gemma 3 or Qwen3.5 folder has its own. Raises WispError for
    anything malformed."""
    source = open_source(model)
    vision = open_source(mmproj) if mmproj is not None else None
    if vision is not None and vision.kind != "gguf":
        raise ModelFileError(vision.label, "not a GGUF file: an mmproj is llama.cpp's vision projector GGUF")
    read = read_model(source)
    cfg, tensors, gguf = read
    plan_without_device(cfg, tensors, source.label)
    files = ModelFiles(source, read, stop_ids=set(cfg.eos_token_ids))
    if gguf is not None:
        if with_tokenizer:
            from .formats.gguf_tokenizer import tokenizer_from_gguf

            files.tokenizer = tokenizer_from_gguf(gguf)
            files.stop_ids = set(files.tokenizer.eos_ids)  # llama.cpp's end-of-generation set, exactly
    else:
        hf_text_files(files, with_tokenizer)
    if vision is None and files.tokenizer is not None and is_vision_model(source):
        vision = source
    if vision is not None and files.tokenizer is not None:  # pictures need the tokenizer's picture tokens
        from .vision.input import check_vision

        check_vision(vision, files)
        files.vision = vision
    return files


def hf_text_files(files: ModelFiles, with_tokenizer: bool) -> None:
    """An HF folder's stop ids (generation_config.json) and tokenizer, into `files`."""
    source, cfg = files.source, files.cfg
    small = source.small_dir()
    if source.exists("generation_config.json"):
        path = small / "generation_config.json"
        eos = read_json(path).get("eos_token_id")
        ids = eos if isinstance(eos, list) else [] if eos is None else [eos]
        check = FieldCheck(path)
        files.stop_ids.update(check.count("eos_token_id", i, low=0, high=cfg.vocab_size - 1) for i in ids)
    if with_tokenizer:
        from .tokenizer import Tokenizer

        files.tokenizer = Tokenizer.from_model_dir(small)
        files.stop_ids.update(files.tokenizer.eos_ids)


def plan_without_device(cfg, tensors: dict, label: str) -> None:
    """Plan the model's graph once as Engine.load will (the device only changes which formats
    weights are read in and how they are split): every tensor the architecture reads is present
    and in a dtype some kernel reads, or a ModelFileError says which is not."""
    options = GraphOptions(
        max_rows=PREFILL_ROWS, kv_capacity=min(cfg.max_position, 2048), ring_slack=ring_slack(PREFILL_ROWS)
    )
    plan(cfg, tensors, label, options)


async def load(
    model,
    device,
    *,
    model_id: str | None = None,
    with_tokenizer: bool = True,
    embedders: bool = False,
    progress=None,
    packed_kv: bool = False,
    gpu_budget: int | None = None,
    mmproj=None,
    **engine_options,
) -> LoadedModel:
    """The LoadedModel of `model` (what read_model_files takes, or its ModelFiles) on `device`.
    mmproj: read_model_files' (ModelFiles carry their own).
    model_id: its id (default: the model's folder or file name). embedders: an embedding model (an
    encoder architecture: models/bert.py) loads as an Embedder (else read_model_files refuses
    it). progress, packed_kv, gpu_budget: Engine.load's, and load_embedder's. engine_options:
    Engine.load's others (context, precision, …), which an embedding model has no use for."""
    source = model.source if isinstance(model, ModelFiles) else open_source(model)
    model_id = model_id or source.label.rstrip("/").rpartition("/")[2]
    shared = {"progress": progress, "packed_kv": packed_kv, "gpu_budget": gpu_budget}
    if embedders and is_embedding_model(source):
        from .embedding import load_embedder

        embedder = await load_embedder(source, device, model_id=model_id, **shared)
        return LoadedModel(model_id, None, embedder.tokenizer, set(), None, embedder=embedder)
    if isinstance(model, ModelFiles):
        files = model
    else:
        files = read_model_files(source, with_tokenizer=with_tokenizer, mmproj=mmproj)
    sees = files.vision is not None
    if sees:  # every position of the context may hold a picture token
        from .vision.encoder import picture_spans

        spans = picture_spans(files.vision)  # Gemma 3: a picture's tokens see all of it
        engine_options = {"image_rows": engine_options.get("context", 2048), "picture_spans": spans, **engine_options}
        if gpu_budget is not None:  # the vision tower's share first: the text engine gets the rest
            shared["gpu_budget"] = gpu_budget - vision_footprint(files.vision, gpu_budget)
    engine = await Engine.load(files.source, device, read=files.read, **shared, **engine_options)
    vision = None
    if sees:
        from .vision.input import load_vision

        vision = await load_vision(files.vision, device, files, engine.precision)
    return LoadedModel(model_id, engine, files.tokenizer, files.stop_ids, PromptCache(engine), vision=vision)


def is_embedding_model(source) -> bool:
    """Whether an HF folder's config.json names an encoder architecture (an embedding model: it
    embeds, and has nothing to generate with; a GGUF of one is refused when read)."""
    if source.kind != "hf":
        return False
    architectures = read_json(source.small_dir() / "config.json").get("architectures") or [None]
    return architectures[0] in ENCODER_ARCHITECTURES


def is_vision_model(source) -> bool:
    """Whether an HF folder's config.json names a vision-language model whose vision tower Wisp
    runs (models/config.py VISION_TOWERS: SmolVLM / Idefics3, Gemma 3, Qwen3.5; its text tower alone reads
    as a causal LM)."""
    if source.kind != "hf":
        return False
    architectures = read_json(source.small_dir() / "config.json").get("architectures") or [None]
    return architectures[0] in VISION_TOWERS


def vision_footprint(source, budget: int) -> int:
    """The GPU bytes a vision tower (an HF SmolVLM, Gemma 3 or Qwen3.5 folder's, or an mmproj's) takes (weights,
    one tile's or picture's activations), refused
    (ModelTooLargeError) where they alone pass the budget."""
    from .runtime.memory import ModelTooLargeError, size
    from .vision.encoder import vision_files

    need = vision_files(source)[3].footprint
    if need.total >= budget:
        raise ModelTooLargeError(
            f"{source.label}: its vision tower alone needs {need.describe()} of GPU memory, more than this "
            f"device's budget of {size(budget)}"
        )
    return need.total
