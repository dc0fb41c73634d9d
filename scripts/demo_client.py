#!/usr/bin/env python3
"""The README demo's client: one streaming chat request with a tool through the official OpenAI
Python client (PyPI `openai`) against `tandem local`, then the stack's key metrics.

Usage: demo_client.py READY_FILE   (the JSON `tandem local --ready-file` writes)
"""
import json
import sys
import time
import urllib.request

import openai

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def scrape(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def value(text, name, labels=""):
    total, found = 0.0, False
    for line in text.splitlines():
        if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " ") and labels in line:
            total += float(line.rsplit(" ", 1)[1])
            found = True
    return total if found else None


def main():
    with open(sys.argv[1]) as f:
        info = json.load(f)
    client = openai.OpenAI(base_url=info["base_url"], api_key=info["api_key"], max_retries=0)
    print(f"client: openai {openai.__version__} -> {info['base_url']} (model {info['model']})")
    print("request: streaming chat, tools=[get_weather], \"What's the weather like in Paris today?\"\n")
    start = time.perf_counter()
    first = None
    tokens = 0
    calls = {}
    finish = None
    usage = None
    stream = client.chat.completions.create(
        model=info["model"], messages=[{"role": "user", "content": "What's the weather like in Paris today?"}],
        tools=TOOLS, stream=True, stream_options={"include_usage": True}, max_tokens=64, temperature=0)
    print("answer: ", end="", flush=True)
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        if delta.content:
            if first is None:
                first = time.perf_counter()
            print(delta.content, end="", flush=True)
        for call in delta.tool_calls or []:
            if first is None:
                first = time.perf_counter()
            entry = calls.setdefault(call.index, {"name": "", "arguments": ""})
            if call.function and call.function.name:
                entry["name"] = call.function.name
            if call.function and call.function.arguments:
                entry["arguments"] += call.function.arguments
        if choice.finish_reason:
            finish = choice.finish_reason
    end = time.perf_counter()
    print()
    for i, call in sorted(calls.items()):
        print(f"tool call {i}: {call['name']}({call['arguments']})")
    if not calls:
        print("tool call: none")
    tokens = usage.completion_tokens if usage else 0
    ttft = (first or end) - start
    total = end - start
    print(f"finish_reason: {finish}; prompt {usage.prompt_tokens if usage else '?'} tokens, "
          f"completion {tokens} tokens")
    # A tool call streams as one chunk once the parser has the whole call, so the time to the first
    # chunk is then most of the request; the rate is over the whole request.
    print(f"first chunk {ttft * 1e3:.1f} ms, whole answer {total * 1e3:.1f} ms, "
          f"{tokens / total if total > 0 else 0.0:.1f} tok/s end to end (through router, gRPC and SSE)\n")

    print("metrics (scraped from each agent's /metrics):")
    for agent, url in info["metrics"].items():
        text = scrape(url)
        if agent.startswith("router"):
            print(f"  {agent:10s} requests finished {value(text, 'tandem_requests_finished_total'):.0f}")
            continue
        usage_ratio = value(text, "tandem_kv_cache_usage_ratio") or 0.0
        cap = value(text, "tandem_kv_cache_capacity_tokens") or 0
        checked = value(text, "tandem_kv_integrity_pages_checked_total") or 0
        aborts = value(text, "tandem_kv_integrity_aborts_total") or 0
        sent = value(text, "tandem_kv_transfer_bytes_total", 'direction="out"') or 0
        got = value(text, "tandem_kv_transfer_bytes_total", 'direction="in"') or 0
        fails = value(text, "tandem_kv_transfer_failures_total") or 0
        print(f"  {agent:10s} KV usage {usage_ratio * 100:.2f}% of {cap:.0f} tokens, pages checked {checked:.0f}, "
              f"integrity aborts {aborts:.0f}, KV bytes out {sent:.0f} / in {got:.0f}, transfer failures {fails:.0f}")


if __name__ == "__main__":
    main()
