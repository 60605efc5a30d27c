"""A vision-language model's vision tower on the GPU: tiles of patch rows in, the text tower's image
embeddings out (models/siglip.py's graph: SmolVLM / Idefics3; models/gemma3_vision.py's: Gemma 3;
Qwen3.5's, a picture a forward, is vision/qwen3_5_tower.py's Qwen35VisionEncoder).

`encoder = await load_vision_encoder(model_dir, device)` (or llama.cpp's mmproj GGUF); each tile is
one forward of the graph, its patches the rows. `encoder.commands(patches)` encodes one tile's
forward after its patch rows are written into the graph's `patches` input (by
py_engine/vision/patches.py's kernel, or here from bytes); `await encoder.encode(tiles)` runs tiles
given as f32 patch rows and reads the features back (tests, and whatever wants them on the host)."""

from __future__ import annotations

from array import array

from ..errors import ModelFileError
from ..formats.hf_dir import read_tensor_index
from ..formats.json_file import read_json
from ..formats.mmproj import mmproj_config, mmproj_tensors, read_mmproj
from ..formats.source import open_source
from ..gpu import Copy, Read
from ..models.config import architecture_of
from ..models.gemma3_vision import gemma3_vision_config, gemma3_vision_tensors
from ..models.graph_options import GraphOptions, device_options
from ..models.qwen3_5_vision import qwen3_5_vision_config, qwen3_5_vision_tensors
from ..models.siglip import shuffle_order, vision_config, vision_tensors
from ..runtime.linear_plan import arithmetic
from ..runtime.loader import upload, vision_plan
from .qwen3_5_tower import Qwen35VisionEncoder


class VisionEncoder:
    def __init__(self, device, executor, kernels, cfg, geometry: dict):
        self.device, self.executor, self.kernels, self.cfg, self.geometry = device, executor, kernels, cfg, geometry
        side = geometry["image_size"] // geometry["patch_size"]
        self.rows = side * side  # patches a tile
        self.row_values = 3 * geometry["patch_size"] ** 2  # f32 values a patch row
        self.tokens = geometry["tokens"]  # image tokens a tile
        self.width = executor.graph.outputs["image_features"].nbytes // (
            4 * self.tokens
        )  # the text tower's hidden size
        self.features = executor.buffer("image_features")
        self.patches = executor.buffer("patches")
        write = device.write_buffer
        write(executor.buffer("positions"), 0, array("I", range(self.rows)).tobytes())
        write(executor.buffer("spans"), 0, array("I", [0, self.rows] * self.rows).tobytes())
        if "shuffle" in executor.graph.inputs:  # SmolVLM's connector
            order = shuffle_order(side, geometry["scale_factor"])
            write(executor.buffer("shuffle"), 0, array("I", order).tobytes())

    def commands(self) -> list:
        """One tile's forward over the patch rows in the `patches` input; its image embeddings
        land in the `image_features` output (self.features: tokens x width f32)."""
        return self.executor.commands(self.rows, 0, logit_rows=1)

    def commands_into(self, buffer, first_row: int) -> list:
        """One tile's forward (as commands()), its image embeddings then copied into `buffer` (an
        Engine's image_embeds) from row first_row."""
        size = 4 * self.tokens * self.width
        return self.commands() + [Copy(self.features, 0, buffer, first_row * self.width * 4, size)]

    async def encode(self, tiles: list[bytes]) -> list[list[float]]:
        """Each tile's patch rows (rows x row_values f32 bytes) through the tower: its image
        embeddings, tokens rows of width floats, tile after tile."""
        reads = []
        for tile in tiles:
            if len(tile) != 4 * self.rows * self.row_values:
                raise ValueError(f"a tile is {self.rows} patch rows of {self.row_values} f32 values")
            self.device.write_buffer(self.patches, 0, tile)
            read = Read(self.features, 0, 4 * self.tokens * self.width)
            reads.append(self.device.submit(self.commands() + [read])[0])
        out = []
        for read in reads:
            values = array("f")
            values.frombytes(await self.device.fetch(read))
            flat = values.tolist()
            out += [flat[i * self.width : (i + 1) * self.width] for i in range(self.tokens)]
        return out


# An HF folder's vision tower by its config's architecture: its config and tensors' readers.
HF_TOWERS = {
    "SmolVLMForConditionalGeneration": (vision_config, vision_tensors),
    "Idefics3ForConditionalGeneration": (vision_config, vision_tensors),
    "Gemma3ForConditionalGeneration": (gemma3_vision_config, gemma3_vision_tensors),
    "Qwen3_5ForConditionalGeneration": (qwen3_5_vision_config, qwen3_5_vision_tensors),
}


def vision_tower(source) -> tuple:
    """(config, geometry, tensors by HF name) of a vision tower: an HF SmolVLM / Idefics3 / Gemma 3
    folder's config.json and tensor index, or llama.cpp's mmproj GGUF beside a text GGUF
    (formats/mmproj.py)."""
    if source.kind == "gguf":
        gguf = read_mmproj(source)
        cfg, geometry = mmproj_config(gguf)
        return cfg, geometry, mmproj_tensors(gguf, cfg, geometry)
    config_path = source.small_dir() / "config.json"
    raw = read_json(config_path)
    architecture = architecture_of(raw, config_path)
    if architecture not in HF_TOWERS:
        raise ModelFileError(config_path, f"{architecture!r:.60} has no vision tower Wisp runs")
    read_config, read_tensors = HF_TOWERS[architecture]
    cfg, geometry = read_config(raw, config_path)
    return cfg, geometry, read_tensors(read_tensor_index(source))


# Vision towers whose picture tokens attend to their whole picture in a prompt (Gemma 3), by
# geometry kind: the text engine's GraphOptions.picture_spans.
PICTURE_SPANS = {"smolvlm": False, "gemma3": True, "qwen3_5": False}


def picture_spans(source) -> bool:
    """Whether the picture side `source` (vision_tower's) wants its text engine's picture_spans."""
    return PICTURE_SPANS[vision_tower(source)[1]["kind"]]


def tower_rows(geometry: dict) -> int:
    """The most patches one forward of the tower takes: a tile's (SmolVLM, Gemma 3), or a picture's."""
    if "max_patches" in geometry:  # Qwen3.5: one picture a forward, its size the processor's choice
        return geometry["max_patches"]
    side = geometry["image_size"] // geometry["patch_size"]
    return side * side


def vision_files(source, options: GraphOptions | None = None):
    """(config, geometry, tensors, plan) of a vision tower (vision_tower's source), read and checked
    with no device (a missing or malformed tensor is a ModelFileError naming the file)."""
    cfg, geometry, tensors = vision_tower(source)
    rows = tower_rows(geometry)
    options = options or GraphOptions(max_rows=rows, kv_capacity=rows, precision="exact")
    return cfg, geometry, tensors, vision_plan(cfg, geometry, tensors, source.label, options)


async def load_vision_encoder(model, device, *, half: bool | None = None, precision: str = "exact", progress=None):
    """The vision tower of an HF SmolVLM / Idefics3 / Gemma 3 / Qwen3.5 folder or an mmproj GGUF (or a
    ModelSource of either) on `device`: a VisionEncoder, or Qwen3.5's Qwen35VisionEncoder (a picture a
    forward). half: keep f16 weights half (default: where the device has shader-f16). precision:
    the text engine's ("fast": the attention's arithmetic in f16 where weights stay half,
    encoder_attention_tiled.wgsl F16_MATH; the linear layers as the text engine's)."""
    source = open_source(model)
    cfg, geometry, tensors = vision_tower(source)
    rows = tower_rows(geometry)
    options = GraphOptions(
        max_rows=rows,
        kv_capacity=rows,
        **device_options(device, half=half),
        precision=arithmetic(precision, device.caps.int8_dot, device.caps.int8_emulated),
    )
    graph, _ = vision_plan(cfg, geometry, tensors, source.label, options)
    encoder = Qwen35VisionEncoder if geometry["kind"] == "qwen3_5" else VisionEncoder
    return await upload(
        device,
        graph,
        tensors,
        source,
        lambda executor, kernels, _: encoder(device, executor, kernels, cfg, geometry),
        progress,
    )
