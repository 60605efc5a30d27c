"""A chat's prompt that fits the context: the desktop chat and the browser worker share it."""

from __future__ import annotations


def fit_to_context(
    tok, messages: list[dict], context: int, max_new_tokens: int, encode=None, **variables
) -> tuple[list[int], int]:
    """(prompt ids, exchanges dropped): `messages` rendered with the chat template (variables: the
    template's other arguments, e.g. tools), the oldest user/assistant exchanges dropped (a leading
    system message stays, the last message too) until the prompt leaves room for the answer:
    max_new_tokens, at most half the context. encode(text, kept messages) -> ids turns a rendering
    into ids (default: the tokenizer's, adding no special tokens; a vision model's chat expands the
    kept messages' pictures first)."""
    system = messages[:1] if messages and messages[0].get("role") == "system" else []
    rest = list(messages[len(system) :])
    room = min(max_new_tokens, context // 2)

    def render():
        text = tok.apply_chat_template(system + rest, add_generation_prompt=True, **variables)
        return encode(text, system + rest) if encode else tok.encode(text, add_special_tokens=False)

    ids, dropped = render(), 0
    while len(ids) + room > context and len(rest) > 2:
        del rest[:2]  # the oldest user message and its answer
        dropped += 1
        ids = render()
    return ids, dropped
