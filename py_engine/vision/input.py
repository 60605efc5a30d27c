"""Pictures in a prompt, for a loaded vision-language model (session.LoadedModel.vision).

A prompt is rendered by the chat template with a picture part where each picture goes (the
template writes the processor's `<image>` placeholder there), or written by hand with those
placeholders; `expand` replaces each by the text the processor gives that picture (its tiles' and
global view's picture tokens: vision/smolvlm.py), in order, and `encode` puts the pictures' image
embeddings where the engine's splice reads them. A picture is RGBA8 bytes and its size, decoded by
the host (the browser's ImageBitmap, Pillow on the desktop)."""

from __future__ import annotations

from typing import NamedTuple

from ..errors import WispError
from ..formats.json_file import read_json
from .encoder import VisionEncoder, load_vision_encoder
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


def image_token_id(tok, tokens) -> int:
    """The tokenizer's id of the picture token (one token, or the model's files disagree)."""
    ids = tok.encode(tokens.image, add_special_tokens=False)
    if len(ids) != 1:
        raise WispError(f"the tokenizer does not have {tokens.image} as one token")
    return ids[0]


async def load_vision(source, device, tok) -> VisionInput:
    """The picture side of an HF SmolVLM / Idefics3 folder on `device`, with its text tokenizer."""
    small = source.small_dir()
    files = [read_json(small / name) if source.exists(name) else None for name in (PREPROCESSOR_FILE, PROCESSOR_FILE)]
    if files[0] is None:
        raise WispError(f"{source.label}: a vision model needs {PREPROCESSOR_FILE}")
    settings = smolvlm_settings(files[0], files[1], read_json(small / MODEL_FILE))
    config = read_json(small / TOKENIZER_CONFIG_FILE) if source.exists(TOKENIZER_CONFIG_FILE) else None
    tokens = image_tokens(config)
    encoder = await load_vision_encoder(source, device)
    return VisionInput(encoder, settings, tokens, image_token_id(tok, tokens))
