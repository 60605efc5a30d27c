"""What every tokenizer offers besides text <-> ids: stop ids, the chat template, streaming decode."""

from ..errors import WispError
from .stream_decoder import StreamDecoder
from .template import chat


class TokenizerBase:
    def __init__(self, *, bos_id: int | None, eos_ids, chat_template: str | None, template_tokens: dict[str, str]):
        self.bos_id: int | None = bos_id
        self.eos_ids: set[int] = set(eos_ids)
        self.chat_template: str | None = chat_template
        self._template_tokens = template_tokens
        self._compiled_template = None

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        raise NotImplementedError

    def _skipped(self, token_id: int) -> bool:
        """Whether skip_special_tokens drops `token_id` before decoding."""
        return False

    def add_eos_ids(self, ids) -> None:
        """Also stop on these ids (e.g. generation_config.json's eos_token_id list)."""
        self.eos_ids.update(ids)

    def stream_decoder(self, skip_special_tokens: bool = True) -> StreamDecoder:
        return StreamDecoder(
            lambda ids: self.decode(ids, skip_special_tokens),
            lambda token_id: skip_special_tokens and self._skipped(token_id),
        )

    def apply_chat_template(self, messages: list[dict], add_generation_prompt: bool = True, **variables) -> str:
        """Render `messages` ([{"role": ..., "content": ...}]) to prompt text.

        Extra keyword arguments (tools, enable_thinking, ...) are passed to the template."""
        if self.chat_template is None:
            raise WispError("this model has no chat template")
        if self._compiled_template is None:
            self._compiled_template = chat.compile_template(self.chat_template)
        return chat.render(
            self._compiled_template, messages, add_generation_prompt, {**self._template_tokens, **variables}
        )
