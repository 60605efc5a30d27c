"""Pictures in a prompt, for a loaded vision-language model (session.LoadedModel.vision).

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
from .encoder import VisionEncoder, load_vision_encoder, vision_files
from .pictures import picture_embeddings
from .smolvlm import (
    MODEL_FILE,
    PREPROCESSOR_FILE,
    PROCESSOR_FILE,
    TOKENIZER_CONFIG_FILE,
    ImagePlan,
    image_plan,
    image_prompt,
    image_tokens,
    smolvlm_settings,
)


class Picture(NamedTuple):
    rgba: bytes  # height rows of width pixels, 4 bytes each (straight alpha)
    width: int
    height: int


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
    ids = tok.encode(tokens.image, add_special_tokens=False)
    if len(ids) != 1:
        raise ModelFileError(path, f"the tokenizer does not have the picture token {tokens.image} as one token")
    return ids[0]


def vision_settings(source, tok):
    """(processor settings, image tokens, the picture token's id) of an HF SmolVLM folder, read
    and checked with no device."""
    small = source.small_dir()
    files = [read_json(small / name) if source.exists(name) else None for name in (PREPROCESSOR_FILE, PROCESSOR_FILE)]
    if files[0] is None:
        raise ModelFileError(small / PREPROCESSOR_FILE, "missing: a vision model needs its image processor's settings")
    settings = smolvlm_settings(files[0], files[1], read_json(small / MODEL_FILE))
    config = read_json(small / TOKENIZER_CONFIG_FILE) if source.exists(TOKENIZER_CONFIG_FILE) else None
    tokens = image_tokens(config)
    return settings, tokens, image_token_id(tok, tokens, small / "tokenizer.json")


def check_vision(source, tok) -> None:
    """Everything a vision model's picture side reads, checked before a device opens
    (session.read_model_files): its processor files, its picture token, its vision tower's tensors."""
    vision_settings(source, tok)
    vision_files(source)


async def load_vision(source, device, tok) -> VisionInput:
    """The picture side of an HF SmolVLM / Idefics3 folder on `device`, with its text tokenizer."""
    settings, tokens, token_id = vision_settings(source, tok)
    return VisionInput(await load_vision_encoder(source, device), settings, tokens, token_id)
