"""py_engine/decode/answer_stream.py without a GPU: the one token-to-text stream (the CLI's generate, the
terminal chat, the OpenAI layer) over a stand-in prompt cache and tokenizer. Why an answer ends
(a stop id, a stop string split across tokens, a cancel, a finished constraint, the length), what
it counts, and that the generation is closed at once when the answer stops early."""

import asyncio
from types import SimpleNamespace

from py_engine.decode.answer_stream import AnswerStream
from py_engine.session import LoadedModel

STOP = 0
WORDS = {1: "Hel", 2: "lo", 3: " wor", 4: "ld", 5: "!", STOP: "<eos>"}


class Decoder:
    """A stream decoder that holds each token's text back one token (as a split character would)."""

    def __init__(self):
        self.held = ""

    def push(self, token: int) -> str:
        out, self.held = self.held, WORDS[token]
        return out

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out


class Cache:
    """A prompt cache whose answer is fixed; it records whether the generation was closed."""

    def __init__(self, answer: list[int]):
        self.answer, self.closed, self.asked = answer, None, None

    async def generate(self, ids, max_new_tokens, sampling, stop_ids, constraint=None, keys=None, prepare=None):
        self.asked, self.closed = (ids, max_new_tokens, set(stop_ids)), False
        try:
            for token in self.answer[:max_new_tokens]:
                yield token
                if token in stop_ids:
                    return
        finally:
            self.closed = True


def model(answer, tok=True) -> LoadedModel:
    tok = SimpleNamespace(stream_decoder=lambda skip_special_tokens: Decoder()) if tok else None
    return LoadedModel("m", None, tok, {STOP}, Cache(answer))


def run(answer: AnswerStream) -> list[str]:
    async def pieces():
        return [piece async for piece in answer]

    return asyncio.run(pieces())


def test_a_stop_id_ends_it_and_is_no_answer_token():
    loaded = model([1, 2, 3, 4, STOP, 5])
    answer = AnswerStream(loaded, [9, 9], 10, None)
    assert "".join(run(answer)) == "Hello world"
    assert answer.stop == "eos" and answer.tokens == [1, 2, 3, 4, STOP] and answer.completion_tokens == 4
    assert len(answer.token_times) == 5 and answer.started <= answer.token_times[0]
    assert loaded.cache.asked == ([9, 9], 10, {STOP}) and loaded.cache.closed


def test_the_length_ends_it():
    answer = AnswerStream(model([1, 2, 3, 4, STOP]), [9], 3, None)
    assert "".join(run(answer)) == "Hello wor" and answer.stop == "length" and answer.completion_tokens == 3


def test_a_stop_string_split_across_tokens_never_shows():
    loaded = model([1, 2, 3, 4, 5, STOP])
    answer = AnswerStream(loaded, [9], 10, None, stop_strings=["o w"])
    assert "".join(run(answer)) == "Hell" and answer.stop == "stop"
    assert loaded.cache.closed  # closed when the answer stopped, not when collected


def test_a_cancel_ends_it_after_the_token_in_hand():
    answer = AnswerStream(model([1, 2, 3, 4, STOP]), [9], 10, None, cancelled=lambda: len(answer.tokens) >= 2)
    assert "".join(run(answer)) == "Hello"  # the decoder's tail still comes
    assert answer.stop == "cancel" and answer.tokens == [1, 2]


def test_a_finished_constraint_ends_it_with_stop():
    finished = SimpleNamespace(finished=True)
    answer = AnswerStream(model([1, 2]), [9], 2, None, constraint=finished)
    run(answer)
    assert answer.stop == "stop"  # the generation ended by itself (the engine stops a finished constraint)


def test_ignore_eos_decodes_through_stop_ids():
    loaded = model([1, STOP, 2])
    answer = AnswerStream(loaded, [9], 3, None, ignore_eos=True)
    run(answer)
    assert answer.tokens == [1, STOP, 2] and answer.stop == "length" and loaded.cache.asked[2] == set()


def test_without_a_tokenizer_only_tokens():
    answer = AnswerStream(model([1, 2, STOP], tok=False), [9], 5, None)
    assert run(answer) == [] and answer.tokens == [1, 2, STOP] and answer.stop == "eos"
