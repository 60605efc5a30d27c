"""Embeddings from the engine: `embedder = await load_embedder(model, device)`, then
`vectors, prompt_tokens = await embedder.embed(["text", ...])` (an Embeddings).

Two kinds of model embed: encoders (BERT: models/bert.py; mean or CLS pooling as their
sentence-transformers files say; EmbeddingGemma: models/gemma3.py, mean pooling then Dense
projections) and causal LMs of the architectures the engine runs, pooled at the last token's
final-norm state (Qwen3-Embedding). Vectors are L2-normalised unless asked otherwise. A model's
named prompts (config_sentence_transformers.json) go before a text when asked for by name, and a
Matryoshka model's vector may be cut to one of the sizes it was trained for (normalised again).

Loading is two steps, as for generation (session.py), through loader.py's plan and upload:
read_embedder_files reads and checks everything the model's files say (config, tensors, tokenizer,
pooling) and plans the graph once with no device, so a malformed folder is a typed error before a
GPU opens; load_embedder uploads."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

from ..errors import WispError
from ..formats.model_files import ModelFiles, read_model
from ..formats.source import ModelSource, open_source
from ..models.config import ENCODER_ARCHITECTURES
from ..models.gemma3 import bidirectional_reach
from ..models.graph_options import GraphOptions, device_options
from ..models.tensor_check import check_tensors
from ..runtime.kv_cache import kv_formats
from ..runtime.loader import Plan, plan, upload
from ..runtime.memory import ModelTooLargeError, size
from .runners import DecoderRunner, EncoderRunner
from .settings import EmbedSettings, embed_settings

BATCH_TOKENS = 512  # an encoder forward's rows (at least the longest input): texts packed per forward
PREFILL_ROWS = 128  # a decoder embedder's forward: a longer text is several, as a chat prompt's prefill


class Embeddings(NamedTuple):
    vectors: list[list[float]]  # one per input, in order
    prompt_tokens: int  # tokens the model read, special tokens included (OpenAI's usage.prompt_tokens)


@dataclass
class EmbedderFiles:
    """A model's files read and checked for embedding: what loading needs besides a device."""

    source: ModelSource
    cfg: object
    tensors: dict
    tokenizer: object | None
    settings: EmbedSettings
    encoder: bool


def read_embedder_files(model, *, pooling: str | None = None, max_tokens: int | None = None) -> EmbedderFiles:
    """model: an HF directory or GGUF file, a ModelSource (the browser's), or the ModelFiles
    session.read_model_files gives. pooling ("cls", "mean", "lasttoken") / max_tokens: override the model's files.
    Raises WispError (ModelFileError naming the file and field) for anything malformed."""
    if isinstance(model, EmbedderFiles):
        if pooling is None and max_tokens is None:
            return model
        settings = embed_settings(model.source, model.cfg, model.encoder, pooling, max_tokens)
        return replace(model, settings=settings)
    tokenizer = None
    if isinstance(model, ModelFiles):
        source, (cfg, tensors, gguf), tokenizer = model.source, model.read, model.tokenizer
    else:
        source = open_source(model)
        cfg, tensors, gguf = read_model(source)
    encoder = cfg.architecture in ENCODER_ARCHITECTURES
    if cfg.architecture != "BertModel":
        tensors = _backbone_names(cfg, tensors, source)
    settings = embed_settings(source, cfg, encoder, pooling, max_tokens)
    for layer in settings.dense:
        tensors = {**tensors, **layer.tensors}
    if tokenizer is None:
        tokenizer = _read_tokenizer(source, gguf)
    files = EmbedderFiles(source, cfg, tensors, tokenizer, settings, encoder)
    _plan(files)  # missing tensors, dtypes: before a device
    return files


def _backbone_names(cfg, tensors: dict, source) -> dict:
    """Qwen3-Embedding's and EmbeddingGemma's checkpoints are saved from the bare text model:
    "embed_tokens.weight", "layers.N....", "norm.weight", no "model." prefix (and no LM head,
    which pooling never reads)."""
    if "model.embed_tokens.weight" in tensors or "embed_tokens.weight" not in tensors:
        return tensors
    renamed = {name if name.startswith("lm_head.") else "model." + name: info for name, info in tensors.items()}
    check_tensors(cfg, renamed, source.label)
    return renamed


def _read_tokenizer(source, gguf):
    if gguf is not None:
        from ..formats.gguf_tokenizer import tokenizer_from_gguf

        return tokenizer_from_gguf(gguf)
    if not source.exists("tokenizer.json"):
        return None  # token ids only (a test fixture)
    from ..tokenizer import Tokenizer

    return Tokenizer.from_model_dir(source.small_dir())


def _plan(files: EmbedderFiles, **device) -> Plan:
    """loader.plan of the embedding graph, its rows and KV cache sized by the files' settings.
    device: GraphOptions' half, cpu, subgroup_min_size, kv_formats, max_binding and normalize (none:
    as with no device)."""
    settings = files.settings
    max_rows = max(settings.max_tokens, BATCH_TOKENS) if files.encoder else PREFILL_ROWS
    options = GraphOptions(
        max_rows=max_rows,
        kv_capacity=max_rows if files.encoder else settings.max_tokens,  # an encoder has no KV cache
        pooling=settings.pooling,
        dense=settings.dense,
        precision="exact",  # int8 activations are measured (benchmarks/fidelity.py) for generation only
        **device,
    )
    planned = plan(files.cfg, files.tensors, files.source.label, options)
    if planned.graph.recurrent:
        raise WispError(f"{files.source.label}: {files.cfg.architecture} has recurrent layers, which cannot embed yet")
    return planned


async def load_embedder(
    model,
    device,
    *,
    pooling: str | None = None,
    normalize: bool = True,
    max_tokens: int | None = None,
    model_id: str | None = None,
    progress=None,
    gpu_budget: int | None = None,
    f32: bool = False,
    packed_kv: bool = False,
    max_binding: int = 0,
) -> Embedder:
    """An Embedder of `model` (what read_embedder_files takes, or its EmbedderFiles) on `device`.
    pooling / max_tokens: override the model's files (max_tokens: the longest input; an encoder's
    default is its sentence-transformers max_seq_length or max_position_embeddings, a decoder's at
    most 2048, which sizes its KV cache). normalize: L2-normalise (default). model_id: the name
    Embedder.model_id reports (default the model's folder or file name). progress, gpu_budget,
    packed_kv, max_binding: as Engine.load's. f32: no f16 weights even with shader-f16."""
    files = read_embedder_files(model, pooling=pooling, max_tokens=max_tokens)
    half = device.caps.shader_f16 and not f32
    graph, need = _plan(
        files,
        kv_formats=kv_formats(files.tensors, half, packed_kv),
        **device_options(device, half=half, max_binding=max_binding),
        normalize=normalize,
    )
    if gpu_budget is not None and need.total > gpu_budget:
        raise ModelTooLargeError(
            f"{files.source.label} needs {need.describe()} of GPU memory to embed, more than this "
            f"device's budget of {size(gpu_budget)}"
        )
    dim = files.settings.dimensions[0]

    def make(executor, kernels, weight_bytes):
        if files.encoder:
            return EncoderRunner(device, executor, dim, bidirectional_reach(files.cfg))
        return DecoderRunner(device, executor, dim)

    runner = await upload(device, graph, files.tensors, files.source, make, progress)
    name = model_id or files.source.label.rstrip("/").rpartition("/")[2]
    embedder = Embedder(files, runner, name, normalize)
    embedder.footprint = need
    return embedder


class Embedder:
    kv_formats = ()  # no KV cache is kept between requests (what the worker's `loaded` reports, as an Engine's)

    def __init__(self, files: EmbedderFiles, runner, model_id: str, normalize: bool):
        """Use load_embedder."""
        self.files, self.runner, self.model_id, self.normalize = files, runner, model_id, normalize
        self.footprint = None  # memory.Footprint of its graph (load_embedder sets it)
        self.tokenizer = files.tokenizer
        self._affixes = special_affixes(self.tokenizer) if self.tokenizer else ([], [])

    @property
    def dimensions(self) -> int:
        """A whole vector's numbers."""
        return self.files.settings.dimensions[0]

    @property
    def dimension_choices(self) -> tuple:
        """The sizes embed() may cut a vector to: the whole, then a Matryoshka model's smaller ones."""
        return self.files.settings.dimensions

    @property
    def prompts(self) -> dict:
        """The model's named prompts (name -> the text embed() puts before an input)."""
        return self.files.settings.prompts

    @property
    def max_tokens(self) -> int:
        return self.files.settings.max_tokens

    @property
    def context(self) -> int:  # as an Engine's: the longest input
        return self.max_tokens

    @property
    def pooling(self) -> str:
        return self.files.settings.pooling

    def text_ids(self, ids: list[int]) -> list[int] | None:
        """The ids embed() reads for a text whose tokenizer.encode(text) is `ids` (its special tokens
        added, cut to max_tokens), so a caller that tokenized the text already (memory's chunking)
        need not again; None where embed() would read that text otherwise: a lowercasing model (it
        encodes the lowered text) or a default prompt (put before the text)."""
        settings = self.files.settings
        if self.tokenizer is None or settings.lowercase or settings.default_prompt is not None:
            return None
        prefix, suffix = self._affixes
        return prefix + list(ids[: max(self.max_tokens - len(prefix) - len(suffix), 0)]) + suffix

    def tokens(self, item, truncate: bool = True, prompt: str = "") -> list[int]:
        """The token ids the model reads for one input: a text (after `prompt`, its special tokens
        added, as sentence-transformers does) or a list of token ids (taken as they are), cut to
        max_tokens (truncate=False: longer is a WispError)."""
        limit = self.max_tokens
        if isinstance(item, str):
            if self.tokenizer is None:
                raise WispError(f"{self.model_id} has no tokenizer: give token ids, not text")
            text = prompt + item
            text = text.lower() if self.files.settings.lowercase else text
            ids = text_tokens(self.tokenizer, text, limit, self._affixes, truncate)
        elif isinstance(item, list) and all(type(i) is int for i in item):
            if len(item) > limit and not truncate:
                raise WispError(f"an input of {len(item)} tokens exceeds {limit}")
            ids = item[:limit]
        else:
            raise WispError("each input must be a string or a list of token ids")
        vocab = self.files.cfg.vocab_size
        bad = next((i for i in ids if not 0 <= i < vocab), None)
        if bad is not None:
            raise WispError(f"token id {bad} is outside the model's vocabulary (0..{vocab - 1})")
        if not ids:
            raise WispError("an input is empty (no tokens to embed)")
        return ids

    async def embed(
        self, inputs, *, truncate: bool = True, prompt_name: str | None = None, dimensions: int | None = None
    ) -> Embeddings:
        """Vectors of `inputs`: a string, a list of strings, a list of token ids or a list of such
        lists (OpenAI's `input`). truncate: cut inputs longer than max_tokens (sentence-transformers'
        behaviour); False: refuse them with a WispError. prompt_name: one of the model's prompts,
        put before each text (default: its default_prompt_name's, if any). dimensions: one of
        dimension_choices, the vector's first numbers kept (and normalised again)."""
        if isinstance(inputs, str) or (isinstance(inputs, list) and inputs and all(type(i) is int for i in inputs)):
            inputs = [inputs]
        if not isinstance(inputs, (list, tuple)) or not inputs:
            raise WispError("input must be a string, a list of strings or token ids, and not empty")
        settings = self.files.settings
        if prompt_name is not None and not all(isinstance(item, str) for item in inputs):
            raise WispError("a prompt goes before text: give strings, not token ids, with prompt_name")
        prompt_name = settings.default_prompt if prompt_name is None else prompt_name
        if prompt_name is not None and prompt_name not in settings.prompts:
            named = ", ".join(settings.prompts) or "none"
            raise WispError(f"{self.model_id} has no prompt named {prompt_name!r:.60} (its prompts: {named})")
        dimensions = self.dimensions if dimensions is None else dimensions
        if dimensions not in settings.dimensions:
            sizes = ", ".join(map(str, settings.dimensions))
            raise WispError(f"{self.model_id}'s vectors may have {sizes} dimensions, not {dimensions!r:.20}")
        prompt = settings.prompts[prompt_name] if prompt_name is not None else ""
        sequences = [self.tokens(item, truncate, prompt) for item in inputs]
        vectors = await self.runner.run(sequences)
        if dimensions != self.dimensions or (self.normalize and settings.dense):  # the graph normalised none
            vectors = [_finished(v[:dimensions], self.normalize) for v in vectors]
        return Embeddings(vectors, sum(map(len, sequences)))


def _finished(vector: list[float], normalize: bool) -> list[float]:
    """A vector cut to its Matryoshka size (or projected after pooling), L2-normalised as
    torch's F.normalize does (v / max(|v|, 1e-12)) where the embedder normalises."""
    if not normalize:
        return vector
    norm = max(math.sqrt(math.fsum(x * x for x in vector)), 1e-12)
    return [x / norm for x in vector]


def text_tokens(tokenizer, text: str, limit: int, affixes=None, truncate: bool = True) -> list[int]:
    """encode(text, add_special_tokens=True) cut to `limit` tokens as HF truncates (the text's
    tokens, keeping room for the special tokens around them); truncate=False: a WispError instead."""
    prefix, suffix = affixes or special_affixes(tokenizer)
    ids = tokenizer.encode(text)
    room = max(limit - len(prefix) - len(suffix), 0)
    if len(ids) > room and not truncate:
        raise WispError(f"an input of {len(ids) + len(prefix) + len(suffix)} tokens exceeds {limit}")
    return prefix + ids[:room] + suffix


def special_affixes(tokenizer) -> tuple[list[int], list[int]]:
    """(ids before the text, ids after it) that encode(text, add_special_tokens=True) adds: [CLS]
    and [SEP] for BERT, a BOS or an EOS for a decoder's. Found by comparing the two encodings of a
    probe text, so any tokenizer with the usual encode() works (HF tokenizer.json, GGUF's)."""
    empty = tokenizer.encode("", add_special_tokens=True)
    plain = tokenizer.encode("a", add_special_tokens=False)
    full = tokenizer.encode("a", add_special_tokens=True)
    for cut in range(len(empty) + 1):
        if full[cut : cut + len(plain)] == plain and full[:cut] + full[cut + len(plain) :] == empty:
            return full[:cut], full[cut + len(plain) :]
    return [], empty  # not prefix + text + suffix: keep the specials after the text
