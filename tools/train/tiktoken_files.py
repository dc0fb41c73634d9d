"""A Kimi-layout model directory's tokenizer as PyPI `tiktoken` reads it: the ranks of its
tiktoken.model, Kimi K2's pre-tokenizer pattern (engine/text/testdata/make_vocabs.py) and, when
asked, the special tokens of its tokenizer_config.json. Shared by the training script and the
model's test."""
import base64
import json
import os
import sys

import tiktoken

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "engine", "text", "testdata"))
import make_vocabs  # noqa: E402


def load(model_dir, name, with_specials=True):
    ranks = {}
    with open(os.path.join(model_dir, "tiktoken.model")) as f:
        for line in f:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    specials = {}
    if with_specials:
        with open(os.path.join(model_dir, "tokenizer_config.json")) as f:
            specials = {v["content"]: int(k) for k, v in json.load(f)["added_tokens_decoder"].items()}
    return tiktoken.Encoding(name, pat_str=make_vocabs.KIMI, mergeable_ranks=ranks, special_tokens=specials)
