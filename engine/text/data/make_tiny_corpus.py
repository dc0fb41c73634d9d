#!/usr/bin/env python3
"""Writes tiny_corpus.txt, the text `tandem make-model` trains the tiny model's BPE vocabulary on.

Everything here is our own writing (plus the SENTENCES of engine/text/testdata/make_vocabs.py):
prose about serving models, chat turns in the shapes our chat templates produce, code, JSON tool
calls, numbers and dates, and sentences in many scripts (Chinese, Japanese, Korean, Thai, Arabic,
Hebrew, Hindi, Russian, Greek, Vietnamese, European languages, emoji). The passages are shuffled
and recombined with a fixed seed, with generated numbers, dates and tool-call arguments, so the
file is the same on every run. The output is committed; C++ embeds it (tools/CMakeLists.txt).

Run from the repo root: python3 engine/text/data/make_tiny_corpus.py
"""
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "testdata"))
import make_vocabs  # noqa: E402

sys.path.insert(0, HERE)
from tiny_corpus_passages import CHAT, CODE, PROSE, SCRIPTS  # noqa: E402

CITIES = ["Paris", "Tokyo", "Nairobi", "Lima", "Oslo", "Hanoi", "Cairo", "Seoul", "Berlin", "Austin",
          "Bangkok", "Toronto", "Mumbai", "Madrid", "Sydney", "Beijing", "Istanbul", "Warsaw"]
TOOLS = ["get_weather", "search_web", "read_file", "run_query", "send_email", "get_time", "calculate",
         "list_files", "create_issue", "translate_text"]
UNITS = ["tokens", "requests", "pages", "bytes", "seconds", "ms", "GB", "MB", "tok/s", "%"]


def numbers_line(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return "%d-%02d-%02d %02d:%02d:%02d" % (rng.randint(1990, 2030), rng.randint(1, 12), rng.randint(1, 28),
                                               rng.randrange(24), rng.randrange(60), rng.randrange(60))
    if kind == 1:
        return "%s %s" % (format(rng.randint(0, 10 ** rng.randint(1, 9)), ","), rng.choice(UNITS))
    if kind == 2:
        return "%.*f" % (rng.randint(1, 5), rng.uniform(-1000, 1000))
    if kind == 3:
        return "| %d | %d | %.1f%% |" % (rng.choice([1, 8, 16, 32, 64]), rng.randint(50, 2500), rng.uniform(-10, 60))
    if kind == 4:
        return "0x%X" % rng.getrandbits(rng.choice([8, 16, 32]))
    return "%d + %d = %d" % ((a := rng.randint(0, 999)), (b := rng.randint(0, 999)), a + b)


def tool_call(rng, index):
    name = rng.choice(TOOLS)
    city = rng.choice(CITIES)
    args = rng.choice([
        '{"city": "%s", "days": %d}' % (city, rng.randint(1, 7)),
        '{"query": "weather in %s", "limit": %d}' % (city, rng.randint(1, 20)),
        '{"path": "/home/user/notes/%s.md"}' % city.lower(),
        '{"expression": "%d * %d"}' % (rng.randint(2, 99), rng.randint(2, 99)),
        '{"to": "team@example.com", "subject": "Report for %s", "urgent": %s}' % (city, rng.choice(["true", "false"])),
    ])
    return "functions.%s:%d %s" % (name, index, args)


def main():
    rng = random.Random(20261201)
    blocks = []
    sources = [(PROSE, 3), (CHAT, 3), (CODE, 3), (SCRIPTS, 4), (make_vocabs.SENTENCES, 2)]
    for passages, copies in sources:
        for _ in range(copies):
            blocks.extend(passages)
    for _ in range(900):
        blocks.append(" ".join(numbers_line(rng) for _ in range(rng.randint(1, 4))))
    for _ in range(500):
        blocks.append("\n".join(tool_call(rng, i) for i in range(rng.randint(1, 3))))
    for _ in range(150):
        words = []
        for _ in range(rng.randint(2, 10)):
            words.append(make_vocabs.script_words(rng))
        blocks.append(" ".join(words))
    rng.shuffle(blocks)
    text = "\n\n".join(b.strip("\n") for b in blocks) + "\n"
    with open(os.path.join(HERE, "tiny_corpus.txt"), "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote tiny_corpus.txt: %d bytes, %d blocks" % (len(text.encode("utf-8")), len(blocks)))


if __name__ == "__main__":
    main()
