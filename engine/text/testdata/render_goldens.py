#!/usr/bin/env python3
"""Renders the chat-template golden cases with jinja2 (the oracle) into chat_goldens.json.

The templates beside this script are our reconstructions of the models' official chat templates
(docs/chat-templates.md says from which versions and what is uncertain). The environment mirrors
Hugging Face transformers' chat-template rendering: trim_blocks, lstrip_blocks, and a `tojson`
that is json.dumps(ensure_ascii=False) with keys in insertion order.

Usage: python3 engine/text/testdata/render_goldens.py   (rewrites chat_goldens.json; needs jinja2)
       python3 engine/text/testdata/render_goldens.py --check   (fails when the committed goldens
       differ from what the templates render: the CTest oracle.chat_templates)
"""
import functools
import json
import os
import sys

import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


@functools.lru_cache(maxsize=None)
def compiled(template_file):
    """The template beside this script, compiled once (tools/train renders it ~10^5 times)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    with open(os.path.join(HERE, template_file)) as f:
        return env.from_string(f.read())


def render(template_file, case):
    template = compiled(template_file)
    messages = []
    for m in case["messages"]:
        m = dict(m)
        if "tool_calls" in m:
            calls = []
            for tc in m["tool_calls"]:
                args = tc["arguments"]
                # GLM's template iterates arguments.items(): it needs a mapping, as HF users pass.
                if template_file == "glm.jinja":
                    args = json.loads(args)
                calls.append({"id": tc["id"], "type": "function",
                              "function": {"name": tc["name"], "arguments": args}})
            m["tool_calls"] = calls
        messages.append(m)
    kwargs = {"messages": messages, "add_generation_prompt": case.get("add_generation_prompt", True)}
    if case.get("tools"):
        kwargs["tools"] = [json.loads(t) for t in case["tools"]]
    if "enable_thinking" in case:
        kwargs["enable_thinking"] = case["enable_thinking"]
    return template.render(**kwargs)


WEATHER = ('{"type":"function","function":{"name":"get_weather","description":"Current weather",'
           '"parameters":{"type":"object","properties":{"city":{"type":"string"},'
           '"days":{"type":"integer"}},"required":["city"]}}}')
TIME = ('{"type":"function","function":{"name":"get_time","description":"Local time, e.g. «12:00»",'
        '"parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}}')

CASES = [
    {"name": "plain_chat", "messages": [{"role": "user", "content": "Hello!"}]},
    {"name": "system_prompt", "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi"}]},
    {"name": "multi_turn", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "and 3+3?"}]},
    {"name": "no_generation_prompt", "add_generation_prompt": False, "messages": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}]},
    {"name": "tools_declared", "tools": [WEATHER, TIME], "messages": [
        {"role": "user", "content": "Weather in Paris?"}]},
    {"name": "tool_call_round_trip", "tools": [WEATHER], "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "functions.get_weather:0", "name": "get_weather",
             "arguments": '{"city": "Paris", "days": 2}'}]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0",
         "content": '{"temp_c": 18, "sky": "clear"}'},
        {"role": "assistant", "content": "It is 18 °C and clear in Paris."},
        {"role": "user", "content": "Thanks"}]},
    {"name": "parallel_tool_calls", "tools": [WEATHER, TIME], "messages": [
        {"role": "user", "content": "Weather and time in Oslo?"},
        {"role": "assistant", "content": "Checking both.", "tool_calls": [
            {"id": "functions.get_weather:0", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
            {"id": "functions.get_time:1", "name": "get_time",
             "arguments": '{"tz": "Europe/Oslo", "verbose": true, "n": [1, 2.5, null]}'}]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "rain, 7 C"},
        {"role": "tool", "tool_call_id": "functions.get_time:1", "content": "14:05"}]},
    {"name": "thinking_off", "enable_thinking": False, "messages": [
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Bye"}]},
    {"name": "reasoning_history", "messages": [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1", "reasoning_content": "old thought"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "<think>\nnew thought\n</think>\nA2"}],
     "add_generation_prompt": False},
    {"name": "named_user", "messages": [{"role": "user", "name": "alice", "content": "Hi"}]},
]


def main():
    out = []
    for case in CASES:
        expected = {"kimi_k2": render("kimi_k2.jinja", case), "glm": render("glm.jinja", case)}
        out.append({"case": case, "expected": expected})
    path = os.path.join(HERE, "chat_goldens.json")
    if "--check" in sys.argv[1:]:
        with open(path) as f:
            committed = json.load(f)
        if committed != out:
            names = [o["case"]["name"] for o, c in zip(out, committed) if o != c]
            sys.exit(f"chat_goldens.json is stale (cases {names or 'count'}); rerun {sys.argv[0]}")
        print(f"chat_goldens.json matches jinja2 {jinja2.__version__} on {len(out)} cases x 2 templates")
        return
    with open(path, "w") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
