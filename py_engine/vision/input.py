"""Pictures in a prompt, for a loaded vision-language model (session.LoadedModel.vision): an HF
SmolVLM folder's picture side, or llama.cpp's mmproj GGUF beside a text model's (formats/mmproj.py).

A prompt is rendered by the chat template with a picture part where each picture goes (the
template writes the processor's `<image>` placeholder there), or written by hand with those
placeholders; `expand` replaces each by the text the processor gives that picture (its tiles' and
global view's picture tokens: vision/smolvlm.py), in order, and `encode` puts the pictures' image
embeddings where the engine's splice reads them. A picture is RGBA8 bytes and its size, decoded by
the host (the browser's ImageBitmap, Pillow on the desktop)."""

from __future__ import annotations

from typing import NamedTuple

from ..errors import ModelFileError, WispError
from ..formats.json_file import read_json
from ..formats.mmproj import mmproj_config, mmproj_settings, read_mmproj
from ..models.siglip import PROJECTION
from .encoder import VisionEncoder, load_vision_encoder, vision_files
from .pictures import picture_embeddings
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


class Picture(NamedTuple):
    rgba: bytes  # height rows of width pixels, 4 bytes each (straight alpha)
    width: int
    height: int
    # What tells this picture from others (a digest of its pixels), for the prompt cache to go on
    # past its tokens when a later prompt has the same picture there; None: never reused.
    key: str | None = None


class VisionInput:
    def __init__(self, encoder: VisionEncoder, settings, tokens, image_token_id: int):
        self.encoder, self.settings, self.tokens, self.image_token_id = encoder, settings, tokens, image_token_id

    def expand(self, text: str, pictures: list[Picture]) -> tuple[str, list[ImagePlan]]:
        """The prompt text with its `<image>` placeholders (one per picture, in order) replaced by
        each picture's picture tokens, and the pictures' plans."""
        parts = text.split(self.tokens.image)
        if len(parts) - 1 != len(pictures):
            raise WispError(
                f"the prompt has {len(parts) - 1} {self.tokens.image} placeholder(s) for {len(pictures)} picture(s)"
            )
        plans = [image_plan(p.height, p.width, self.settings) for p in pictures]
        expanded = [parts[0]]
        for plan, rest in zip(plans, parts[1:]):
            expanded += [image_prompt(plan, self.settings, self.tokens), rest]
        return "".join(expanded), plans

    def picture_keys(self, ids: list[int], pictures: list[Picture]) -> list:
        """What the prompt cache compares the prompt's positions by: a text token by its id, the
        j-th token of a picture by (its picture's key, j), so that a picture is reused where the
        same one stands (a picture without a key: by a new object, never equal)."""
        counts = [image_plan(p.height, p.width, self.settings).num_image_tokens for p in pictures]
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
        rows = 0
        for picture in pictures:
            plan = await picture_embeddings(
                self.encoder, picture.rgba, picture.width, picture.height, self.settings, engine.image_embeds, rows
            )
            rows += plan.num_image_tokens
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


def vision_settings(source, files):
    """(processor settings, image tokens, the picture token's id) of a model's picture side (source:
    its HF SmolVLM folder, or llama.cpp's mmproj GGUF beside the text model of `files`, a ModelFiles),
    read and checked with no device."""
    if source.kind == "gguf":
        return mmproj_settings_and_tokens(source, files)
    small = source.small_dir()
    configs = [read_json(small / name) if source.exists(name) else None for name in (PREPROCESSOR_FILE, PROCESSOR_FILE)]
    if configs[0] is None:
        raise ModelFileError(small / PREPROCESSOR_FILE, "missing: a vision model needs its image processor's settings")
    settings = smolvlm_settings(configs[0], configs[1], read_json(small / MODEL_FILE))
    config = read_json(small / TOKENIZER_CONFIG_FILE) if source.exists(TOKENIZER_CONFIG_FILE) else None
    tokens = image_tokens(config)
    return settings, tokens, image_token_id(files.tokenizer, tokens, small / "tokenizer.json")


def mmproj_settings_and_tokens(source, files):
    """vision_settings of an mmproj: the settings its metadata gives (formats/mmproj.py mmproj_settings).
    It names no tokens, so they are SmolVLMProcessor's defaults, the strings llama.cpp's mtmd looks up
    for idefics3 too; the text model's tokenizer must hold each as one token."""
    gguf = read_mmproj(source)
    settings = mmproj_settings(gguf, mmproj_config(gguf)[1])
    tokens = ImageTokens()
    for text in (tokens.fake_image, tokens.global_image):
        token_id(files.tokenizer, text, files.source.label)
    return settings, tokens, image_token_id(files.tokenizer, tokens, files.source.label)


def check_vision(source, files) -> None:
    """Everything a model's picture side reads, checked before a device opens
    (session.read_model_files): its processor settings, its picture tokens in the text model's
    tokenizer, its vision tower's tensors, and that the tower's image embeddings are as wide as the
    text model's (an mmproj made for another model is not)."""
    vision_settings(source, files)
    tensors = vision_files(source)[2]
    width, text_width = tensors[PROJECTION].shape[0], files.cfg.hidden_size
    if width != text_width:
        raise ModelFileError(
            source.label,
            f"its image embeddings are {width} wide, but the text model's ({files.source.label}) are {text_width}",
        )


async def load_vision(source, device, files) -> VisionInput:
    """The picture side `source` (vision_settings') on `device`, for the text model of `files`."""
    settings, tokens, picture_id = vision_settings(source, files)
    return VisionInput(await load_vision_encoder(source, device), settings, tokens, picture_id)
