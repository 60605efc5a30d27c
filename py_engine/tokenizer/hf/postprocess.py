"""Post-processors: the special tokens `encode(add_special_tokens=True)` puts around the text."""

from collections.abc import Callable

from ..spec_error import SpecError


def special_token_affixes(config: dict | None, token_to_id: Callable[[str], int | None]) -> tuple[list[int], list[int]]:
    """(ids before the text, ids after it) for a single sequence, from an HF post_processor."""
    if config is None:
        return [], []
    kind = config.get("type")
    if kind == "ByteLevel":
        return [], []  # only adjusts offsets, which we do not track
    if kind == "Sequence":
        prefix, suffix = [], []
        for step in config["processors"]:
            step_prefix, step_suffix = special_token_affixes(step, token_to_id)
            prefix, suffix = prefix + step_prefix, suffix + step_suffix
        return prefix, suffix
    if kind == "BertProcessing":
        return [config["cls"][1]], [config["sep"][1]]
    if kind == "TemplateProcessing":
        return _template_affixes(config, token_to_id)
    raise SpecError(f"unsupported post_processor type {kind!r}")


def _template_affixes(config: dict, token_to_id: Callable[[str], int | None]) -> tuple[list[int], list[int]]:
    prefix: list[int] = []
    suffix: list[int] = []
    target = prefix
    for item in config["single"]:
        if "Sequence" in item:
            target = suffix
            continue
        name = item["SpecialToken"]["id"]
        special = config.get("special_tokens", {}).get(name)
        if special is not None:
            target.extend(special["ids"])
            continue
        token_id = token_to_id(name)
        if token_id is None:
            raise SpecError(f"post_processor template uses unknown token {name!r}")
        target.append(token_id)
    return prefix, suffix
