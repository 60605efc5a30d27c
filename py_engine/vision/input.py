"""Pictures in a prompt, for a loaded vision-language model (session.LoadedModel.vision): an HF
SmolVLM, Gemma 3 or Qwen3.5 folder's picture side, or llama.cpp's mmproj GGUF beside a text model's
(formats/mmproj.py).

A prompt is rendered by the chat template with a picture part where each picture goes (the
template writes the processor's placeholder there: SmolVLM's `<image>`, Gemma 3's
`<start_of_image>`, Qwen3.5's `<|image_pad|>` between its vision start and end), or written by hand with
those placeholders; `expand` replaces each by the text the processor gives that picture
(vision/smolvlm.py: its tiles' and global view's picture tokens; vision/gemma3.py: its soft tokens
between boi and eoi; vision/qwen3_5.py: one <|image_pad|> a merged token), in order, and `encode` puts
the pictures' image embeddings where the engine's splice reads them (and, for Qwen3.5, their grids
where its multimodal RoPE reads them). A picture is RGBA8 bytes and its size,
decoded by the host (the browser's ImageBitmap, Pillow on the desktop)."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ..errors import ModelFileError, WispError
from ..formats.json_file import read_json
from ..formats.mmproj import mmproj_config, mmproj_settings, read_mmproj
from ..models.config import architecture_of
from ..models.gemma3_vision import gemma3_vision_config
from ..models.qwen3_5_vision import qwen3_5_vision_config
from .encoder import VisionEncoder, load_vision_encoder, vision_files
from .gemma3 import Gemma3Tokens, gemma3_plan, gemma3_prompt, gemma3_settings, gemma3_tokens
from .pictures import picture_embeddings, qwen3_5_embeddings
from .qwen3_5 import DEFAULT_IDS, Qwen35Tokens, qwen3_5_plan, qwen3_5_prompt, qwen3_5_settings, qwen3_5_tokens
from .smolvlm import (
    MODEL_FILE,
    PREPROCESSOR_FILE,
    PROCESSOR_FILE,
    TOKENIZER_CONFIG_FILE,
    ImagePlan,
    ImageTokens,
    image_plan,
    image_prompt,
    image_tokens,
    smolvlm_settings,
)


class PictureText(NamedTuple):
    """A model family's processor, for the prompt: its settings (vision/pictures.py reads them), what
    the chat template writes where a picture goes (placeholder), what the processor decides for a
    picture of (height, width) (plan) and the text a plan's picture becomes (prompt); how a picture
    becomes its image embeddings on the GPU (embed: picture_embeddings' signature), and whether the text
    tower's RoPE places a picture's tokens by their grid (mrope, Qwen3.5: its plans' merged grids go to
    Engine.picture_grids)."""

    settings: object
    placeholder: str
    plan: Callable[[int, int], ImagePlan]
    prompt: Callable[[ImagePlan], str]
    embed: Callable = picture_embeddings
    mrope: bool = False


def smolvlm_text(settings, tokens: ImageTokens) -> PictureText:
    return PictureText(
        settings,
        tokens.image,
        lambda h, w: image_plan(h, w, settings),
        lambda plan: image_prompt(plan, settings, tokens),
    )


def gemma3_text(settings, tokens) -> PictureText:
    return PictureText(
        settings, tokens.boi, lambda h, w: gemma3_plan(h, w, settings), lambda plan: gemma3_prompt(settings, tokens)
    )


def qwen3_5_text(settings, tokens, max_patches: int) -> PictureText:
    return PictureText(
        settings,
        tokens.image,
        lambda h, w: qwen3_5_plan(h, w, settings, max_patches),
        lambda plan: qwen3_5_prompt(plan, tokens),
        qwen3_5_embeddings,
        mrope=True,
    )


class Picture(NamedTuple):
    rgba: bytes  # height rows of width pixels, 4 bytes each (straight alpha)
    width: int
    height: int
    # What tells this picture from others (a digest of its pixels), for the prompt cache to go on
    # past its tokens when a later prompt has the same picture there; None: never reused.
    key: str | None = None


class VisionInput:
    def __init__(self, encoder: VisionEncoder, text: PictureText, image_token_id: int):
        self.encoder, self.text, self.image_token_id = encoder, text, image_token_id

    def expand(self, text: str, pictures: list[Picture]) -> tuple[str, list[ImagePlan]]:
        """The prompt text with its placeholders (one per picture, in order) replaced by each
        picture's picture tokens, and the pictures' plans."""
        placeholder = self.text.placeholder
        parts = text.split(placeholder)
        if len(parts) - 1 != len(pictures):
            raise WispError(
                f"the prompt has {len(parts) - 1} {placeholder} placeholder(s) for {len(pictures)} picture(s)"
            )
        plans = [self.text.plan(p.height, p.width) for p in pictures]
        expanded = [parts[0]]
        for plan, rest in zip(plans, parts[1:]):
            expanded += [self.text.prompt(plan), rest]
        return "".join(expanded), plans

    def picture_keys(self, ids: list[int], pictures: list[Picture]) -> list:
        """What the prompt cache compares the prompt's positions by: a text token by its id, the
        j-th token of a picture by (its picture's key, j), so that a picture is reused where the
        same one stands (a picture without a key: by a new object, never equal)."""
        counts = [self.text.plan(p.height, p.width).num_image_tokens for p in pictures]
        token = self.image_token_id
        if ids.count(token) != sum(counts):
            raise WispError(
                f"the prompt has {ids.count(token)} picture tokens for {len(pictures)} picture(s) of {sum(counts)}"
            )
        marks = [(p.key, p.width, p.height) if p.key is not None else object() for p in pictures]
        owner = [(mark, j) for mark, count in zip(marks, counts) for j in range(count)]
        seen = iter(owner)
        return [next(seen) if t == token else t for t in ids]

    async def encode(self, engine, pictures: list[Picture]) -> int:
        """The pictures' image embeddings into the engine's image_embeds, in order (submitted);
        returns their rows (the prompt's picture tokens)."""
        rows, settings, grids = 0, self.text.settings, []
        for picture in pictures:
            plan = self.text.plan(picture.height, picture.width)
            await self.text.embed(
                self.encoder, picture.rgba, picture.width, picture.height, settings, engine.image_embeds, rows, plan
            )
            rows += plan.num_image_tokens
            grids.append(plan.merged if self.text.mrope else None)
        if self.text.mrope:
            engine.picture_grids(grids)
        return rows


def image_token_id(tok, tokens, path) -> int:
    """The tokenizer's id of the picture token (one token, or the model's files disagree)."""
    return token_id(tok, tokens.image, path)


def token_id(tok, text: str, path) -> int:
    """The tokenizer's id of one of the prompt's picture tokens (`path`: the tokenizer's file)."""
    ids = tok.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ModelFileError(path, f"the tokenizer does not have the picture token {text} as one token")
    return ids[0]


def vision_settings(source, files) -> tuple[PictureText, int]:
    """(the processor's PictureText, the picture token's id) of a model's picture side (source: its
    HF SmolVLM or Gemma 3 folder, or llama.cpp's mmproj GGUF beside the text model of `files`, a
    ModelFiles), read and checked with no device."""
    if source.kind == "gguf":
        return mmproj_settings_and_tokens(source, files)
    small = source.small_dir()
    configs = [read_json(small / name) if source.exists(name) else None for name in (PREPROCESSOR_FILE, PROCESSOR_FILE)]
    if configs[0] is None:
        raise ModelFileError(small / PREPROCESSOR_FILE, "missing: a vision model needs its image processor's settings")
    model = read_json(small / MODEL_FILE)
    config = read_json(small / TOKENIZER_CONFIG_FILE) if source.exists(TOKENIZER_CONFIG_FILE) else None
    tokenizer_path = small / "tokenizer.json"
    architecture = architecture_of(model, small / MODEL_FILE)
    if architecture == "Gemma3ForConditionalGeneration":
        return gemma3_settings_and_tokens(configs, model, config, files.tokenizer, small)
    if architecture == "Qwen3_5ForConditionalGeneration":
        return qwen3_5_settings_and_tokens(configs[0], model, config, files.tokenizer, small)
    settings = smolvlm_settings(configs[0], configs[1], model)
    tokens = image_tokens(config)
    return smolvlm_text(settings, tokens), image_token_id(files.tokenizer, tokens, tokenizer_path)


def gemma3_settings_and_tokens(configs: list, model: dict, tokenizer_config, tok, small) -> tuple[PictureText, int]:
    """vision_settings of a Gemma 3 folder: its processor files checked against its tower's geometry,
    and its boi, soft and eoi tokens each one token of the tokenizer, the ids config.json names."""
    geometry = gemma3_vision_config(model, small / MODEL_FILE)[1]
    settings = gemma3_settings(*configs, geometry, (small / PREPROCESSOR_FILE, small / PROCESSOR_FILE))
    tokens = gemma3_tokens(tokenizer_config, small / TOKENIZER_CONFIG_FILE)
    ids = {}
    for key, text in (
        ("boi_token_index", tokens.boi),
        ("image_token_index", tokens.image),
        ("eoi_token_index", tokens.eoi),
    ):
        ids[key] = token_id(tok, text, small / "tokenizer.json")
        named = model.get(key)
        if named is not None and named != ids[key]:
            raise ModelFileError(
                small / MODEL_FILE, f"{key} is {named!r:.20}, but the tokenizer's {text} is {ids[key]}"
            )
    return gemma3_text(settings, tokens), ids["image_token_index"]


def qwen3_5_settings_and_tokens(preprocessor, model: dict, tokenizer_config, tok, small) -> tuple[PictureText, int]:
    """vision_settings of a Qwen3.5 folder: its processor file checked against its tower's geometry, and its
    vision start, picture and vision end tokens each one token of the tokenizer, the ids config.json names
    (transformers' Qwen3_5Config defaults where it names none)."""
    geometry = qwen3_5_vision_config(model, small / MODEL_FILE)[1]
    settings = qwen3_5_settings(preprocessor, geometry, small / PREPROCESSOR_FILE)
    tokens = qwen3_5_tokens(tokenizer_config, small / TOKENIZER_CONFIG_FILE)
    ids = {}
    for key, text in (
        ("vision_start_token_id", tokens.vision_start),
        ("image_token_id", tokens.image),
        ("vision_end_token_id", tokens.vision_end),
    ):
        ids[key] = token_id(tok, text, small / "tokenizer.json")
        named = model.get(key, DEFAULT_IDS[key])
        if named != ids[key]:
            raise ModelFileError(
                small / MODEL_FILE, f"{key} is {named!r:.20}, but the tokenizer's {text} is {ids[key]}"
            )
    return qwen3_5_text(settings, tokens, geometry["max_patches"]), ids["image_token_id"]


def mmproj_settings_and_tokens(source, files) -> tuple[PictureText, int]:
    """vision_settings of an mmproj: the settings its metadata gives (formats/mmproj.py mmproj_settings).
    It names no tokens, so they are the processor's defaults (SmolVLMProcessor's, Gemma 3's, Qwen3VLProcessor's), the strings
    llama.cpp's mtmd looks up too; the text model's tokenizer must hold each as one token."""
    gguf = read_mmproj(source)
    geometry = mmproj_config(gguf)[1]
    settings = mmproj_settings(gguf, geometry)
    if geometry["kind"] == "qwen3_5":
        tokens = Qwen35Tokens()
        for text in (tokens.vision_start, tokens.vision_end):
            token_id(files.tokenizer, text, files.source.label)
        return qwen3_5_text(settings, tokens, geometry["max_patches"]), token_id(
            files.tokenizer, tokens.image, files.source.label
        )
    if geometry["kind"] == "gemma3":
        tokens = Gemma3Tokens()
        for text in (tokens.boi, tokens.eoi):
            token_id(files.tokenizer, text, files.source.label)
        return gemma3_text(settings, tokens), token_id(files.tokenizer, tokens.image, files.source.label)
    tokens = ImageTokens()
    for text in (tokens.fake_image, tokens.global_image):
        token_id(files.tokenizer, text, files.source.label)
    return smolvlm_text(settings, tokens), image_token_id(files.tokenizer, tokens, files.source.label)


def check_vision(source, files) -> None:
    """Everything a model's picture side reads, checked before a device opens
    (session.read_model_files): its processor settings, its picture tokens in the text model's
    tokenizer, its vision tower's tensors, and that the tower's image embeddings are as wide as the
    text model's (an mmproj made for another model is not)."""
    vision_settings(source, files)
    _, geometry, _, (graph, _) = vision_files(source)
    width = graph.outputs["image_features"].nbytes // (4 * geometry["tokens"])
    text_width = files.cfg.hidden_size
    if width != text_width:
        raise ModelFileError(
            source.label,
            f"its image embeddings are {width} wide, but the text model's ({files.source.label}) are {text_width}",
        )


async def load_vision(source, device, files, precision: str = "exact") -> VisionInput:
    """The picture side `source` (vision_settings') on `device`, for the text model of `files`,
    in its text engine's precision."""
    text, picture_id = vision_settings(source, files)
    return VisionInput(await load_vision_encoder(source, device, precision=precision), text, picture_id)
