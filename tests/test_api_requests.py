"""py_engine/api/ without a GPU: OpenAI request bodies checked, stop strings over split tokens,
tool calls taken out of answers in each template's format, chunks added up into a response."""

import asyncio
import json

import pytest

from py_engine.api.completions import collect
from py_engine.api.request import RequestError, parse_chat, parse_completion, parse_embeddings
from py_engine.api.tool_calls import ToolCallStream, parse_calls, template_format
from py_engine.decode.stop_strings import StopStrings

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def test_chat_defaults_are_openais():
    request = parse_chat(CHAT)
    assert request.sampling.temperature == 1.0 and request.sampling.top_p == 1.0
    assert not request.stream and request.stop == [] and request.tool_choice == "none"
    assert parse_chat({**CHAT, "seed": 7, "temperature": 0.5}).sampling.seed == 7
    assert parse_chat({**CHAT, "top_p": 0}).sampling.temperature == 0  # an empty nucleus: greedy
    request = parse_chat({**CHAT, "stream": True, "stream_options": {"include_usage": True}, "stop": "x"})
    assert request.include_usage and request.stop == ["x"]
    assert parse_chat({**CHAT, "max_completion_tokens": 9}).max_tokens == 9
    assert request.precision is None and parse_chat({**CHAT, "precision": "exact"}).precision == "exact"
    assert not request.sampling.lookup and not request.ignore_eos  # Wisp's own fields, off by default
    wisp = parse_chat({**CHAT, "lookup": True, "ignore_eos": True})
    assert wisp.sampling.lookup and wisp.ignore_eos


@pytest.mark.parametrize(
    "change, param",
    [
        ({"model": None}, "model"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0].image_url"),
        ({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]}, "messages[0].content[0]"),
        ({"temperature": 3}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"stream": 1}, "stream"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"presence_penalty": 0.5}, "presence_penalty"),
        ({"response_format": {"type": "yaml"}}, "response_format"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tools": [{"type": "function", "function": {}}]}, "tools"),
        ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"frobnicate": 1}, "frobnicate"),
        ({"precision": "f16"}, "precision"),
        ({"lookup": "yes"}, "lookup"),
        ({"ignore_eos": 1}, "ignore_eos"),
    ],
)
def test_bad_chat_bodies_name_the_field(change, param):
    with pytest.raises(RequestError) as caught:
        parse_chat({**CHAT, **change})
    assert caught.value.param == param
    body = caught.value.body()["error"]
    assert body["type"] == "invalid_request_error" and body["param"] == param and body["message"]


def test_messages_as_templates_read_them():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    request = parse_chat(
        {
            "model": "m",
            "messages": [
                {"role": "developer", "content": [{"type": "text", "text": "be "}, {"type": "text", "text": "brief"}]},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
            ],
            "tools": [TOOL],
        }
    )
    system, assistant, tool = request.messages
    assert system == {"role": "system", "content": "be brief"}
    assert assistant["tool_calls"][0]["function"]["arguments"] == {"a": 1}  # Qwen's template: `| tojson`
    assert tool["tool_call_id"] == "c1" and request.tool_choice == "auto"


def test_completion_and_embedding_bodies():
    assert parse_completion({"model": "m", "prompt": ["once"]}).prompt == "once"
    with pytest.raises(RequestError):
        parse_completion({"model": "m", "prompt": ["a", "b"]})
    assert parse_completion({"model": "m", "prompt": [5, 17, 0]}).prompt == [5, 17, 0]  # token ids, as OpenAI's
    assert parse_completion({"model": "m", "prompt": [[5, 17]]}).prompt == [5, 17]
    for bad in ([], [5, "x"], [5, 1.5], [True]):
        with pytest.raises(RequestError):
            parse_completion({"model": "m", "prompt": bad})
    assert parse_embeddings({"model": "e", "input": "x"}).inputs == ["x"]
    for bad in ({"input": []}, {"input": [1, 2]}, {"input": "x", "encoding_format": "hex"}):
        with pytest.raises(RequestError):
            parse_embeddings({"model": "e", **bad})


def test_stop_strings_hold_back_what_may_be_a_stop():
    stops = StopStrings(["</end>", "STOP"])
    out = [stops.push(p) for p in ("Hello </", "en", "d> never")]
    assert out == ["Hello ", "", ""] and stops.stopped
    stops = StopStrings(["STOP"])
    assert stops.push("ST") == "" and stops.push("ay") == "STay" and stops.flush() == ""
    assert StopStrings(["zz"]).push("a z") == "a " and StopStrings([]).push("abc") == "abc"


def test_tool_call_formats_from_templates():
    assert template_format("{% for m in messages %}{{ m.content }}{% endfor %}") is None
    assert template_format("{% if tools %}<tool_call>{% endif %}") == "hermes"
    assert template_format("{% if tools %}[TOOL_CALLS]{% endif %}") == "mistral"
    assert template_format("{% if tools %}<|python_tag|>{% endif %}") == "llama3"


def test_calls_parsed_in_each_format():
    text, calls = parse_calls(
        "hermes", 'Sure.\n<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>{"name": "g"}'
    )
    assert (
        text == "Sure." and [c["name"] for c in calls] == ["f", "g"] and json.loads(calls[0]["arguments"]) == {"x": 1}
    )
    assert parse_calls("hermes", "<tool_call>not json</tool_call>") == ("<tool_call>not json</tool_call>", [])
    _, calls = parse_calls("llama3", '<|python_tag|>{"name": "f", "parameters": {"y": "z"}}')
    assert calls == [{"name": "f", "arguments": '{"y": "z"}'}]
    _, calls = parse_calls("mistral", '[TOOL_CALLS][{"name": "f", "arguments": {}}]')
    assert calls == [{"name": "f", "arguments": "{}"}]


def test_streamed_text_stops_where_a_call_starts():
    stream = ToolCallStream("hermes")
    sent = [stream.push(p) for p in ("Let me check. <tool", "_call>\n", '{"name": "f", "arguments": {}}\n</tool_call>')]
    assert "".join(sent) == "Let me check. "
    assert stream.finish() == ("", [{"name": "f", "arguments": "{}"}])
    plain = ToolCallStream("llama3")
    assert plain.push("  ") == "" and plain.push("Hi {") == "  Hi {" and plain.finish() == ("", [])
    bare = ToolCallStream("hermes", ["f"])  # a small model's call without its <tool_call> tags
    assert bare.push(' {"name": "f", ') == "" and bare.push('"arguments": {"a": 1}}') == ""
    assert bare.finish() == ("", [{"name": "f", "arguments": '{"a": 1}'}])
    other = ToolCallStream("hermes", ["f"])
    assert other.push('{"name": "g"}') == "" and other.finish() == ('{"name": "g"}', [])


def test_chunks_add_up_to_a_response():
    def chunk(delta, finish=None, usage=None):
        base = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return {**base, "choices": choices, **({"usage": usage} if usage else {})}

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}

    async def chunks():
        for c in (chunk({"role": "assistant", "content": ""}), chunk({"tool_calls": [call]}), chunk({}, "tool_calls")):
            yield c
        yield chunk({}, usage=usage)

    response = asyncio.run(collect(chunks()))
    message = response["choices"][0]["message"]
    assert response["object"] == "chat.completion" and response["usage"] == usage
    assert message["content"] is None and message["tool_calls"][0]["id"] == "call_1"
    assert response["choices"][0]["finish_reason"] == "tool_calls"
