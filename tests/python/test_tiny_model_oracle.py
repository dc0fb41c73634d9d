#!/usr/bin/env python3
"""The tiny models' tokenizers (`tandem make-model`) against PyPI `tiktoken` and `tokenizers`
(docs/tiny-model.md).

Runs `tandem make-model` into a temporary directory, builds a tiktoken.Encoding from the
tiktoken.model ranks it wrote, Kimi K2's pattern and the special tokens of its
tokenizer_config.json, and requires our tokenizer (`tokenizer_tool encode` on the same files) to
give the same ids on >= 10^4 strings: random code points of all planes, real text (this
repository's sources and docs, the corpus sentences), lines of the training corpus, and
special tokens spliced in. Then decode(encode(s)) == s and the streaming detokenizer agrees. Also
checks the files agree with each other: config.json vocab_size = ranks + specials, bos/eos ids.
The tiny-glm model's tokenizer.json is compared with PyPI `tokenizers` the same way (COUNT / 2
strings).

Run: TOKENIZER_TOOL=build/engine/tokenizer_tool .venv/bin/python tests/python/test_tiny_model_oracle.py \
       --tandem build/tools/tandem
TINY_ORACLE_STRINGS sets the string count (default 20000).
"""
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

import test_tokenizer_oracle as oracle  # noqa: E402  (same directory: encode/decode helpers)
import tiktoken  # noqa: E402
import tokenizers  # noqa: E402

TANDEM = ""
COUNT = int(os.environ.get("TINY_ORACLE_STRINGS", "20000"))
CORPUS = os.path.join(oracle.ROOT, "engine", "text", "data", "tiny_corpus.txt")


class TinyModelOracleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "tiny")
        proc = subprocess.run([TANDEM, "make-model", "--out", cls.dir, "--seed", "1"], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise AssertionError("make-model failed: %s" % proc.stderr)
        print(proc.stdout, end="")
        cls.ranks = {}
        with open(os.path.join(cls.dir, "tiktoken.model")) as f:
            for line in f:
                token, rank = line.split()
                cls.ranks[base64.b64decode(token)] = int(rank)
        with open(os.path.join(cls.dir, "tokenizer_config.json")) as f:
            cls.tokenizer_config = json.load(f)
        cls.specials = {v["content"]: int(k) for k, v in cls.tokenizer_config["added_tokens_decoder"].items()}
        with open(os.path.join(cls.dir, "config.json")) as f:
            cls.config = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_files_agree(self):
        self.assertEqual(sorted(self.ranks.values()), list(range(len(self.ranks))))
        self.assertEqual(sorted(self.specials.values()),
                         list(range(len(self.ranks), len(self.ranks) + len(self.specials))))
        self.assertEqual(len(self.specials), 256)
        self.assertEqual(self.config["vocab_size"], len(self.ranks) + len(self.specials))
        self.assertEqual(self.config["bos_token_id"], self.specials[self.tokenizer_config["bos_token"]])
        self.assertEqual(self.config["eos_token_id"], self.specials[self.tokenizer_config["eos_token"]])

    def test_tiktoken_agrees(self):
        reference = tiktoken.Encoding("tandem_tiny", pat_str=oracle.make_vocabs.KIMI, mergeable_ranks=self.ranks,
                                      special_tokens=self.specials)
        rng = random.Random(17)
        n_real = COUNT * 3 // 10
        n_corpus = COUNT // 5
        with open(CORPUS, encoding="utf-8") as f:
            corpus_lines = [line for line in f.read().split("\n") if line]
        strings = oracle.real_text_strings(rng, n_real)
        strings += [rng.choice(corpus_lines) for _ in range(n_corpus)]
        strings += oracle.make_vocabs.random_strings(COUNT - n_real - n_corpus, 23)
        named = [s for s in self.specials if not s.startswith("<|reserved_token_")]
        strings = oracle.with_specials(strings, named, rng)
        path = os.path.join(self.dir, "tiktoken.model")
        ours = oracle.encode(path, strings)
        theirs = [reference.encode(s, allowed_special="all") for s in strings]
        mismatches = [i for i in range(len(strings)) if ours[i] != theirs[i]]
        n_bytes = sum(len(s.encode("utf-8")) for s in strings)
        n_tokens = sum(len(ids) for ids in ours)
        print("tiktoken %s on the tiny model: %d strings (%d bytes, %.2f bytes/token), %d mismatches" %
              (tiktoken.__version__, len(strings), n_bytes, n_bytes / max(1, n_tokens), len(mismatches)))
        for i in mismatches[:5]:
            print("  %r\n    ours   %s\n    theirs %s" % (strings[i][:200], ours[i][:40], theirs[i][:40]))
        self.assertEqual(mismatches, [])
        self.assertEqual(oracle.decode(path, ours), [s.encode("utf-8") for s in strings])
        self.assertEqual(oracle.decode(path, ours[:5000], "stream"), [s.encode("utf-8") for s in strings[:5000]])


class TinyGlmModelOracleTest(unittest.TestCase):
    """--preset tiny-glm writes a Hugging Face tokenizer.json: PyPI `tokenizers` must agree."""

    def test_tokenizers_agree(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "glm")
            proc = subprocess.run([TANDEM, "make-model", "--out", out, "--preset", "tiny-glm"], capture_output=True,
                                  text=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            path = os.path.join(out, "tokenizer.json")
            reference = tokenizers.Tokenizer.from_file(path)
            with open(os.path.join(out, "config.json")) as f:
                config = json.load(f)
            self.assertEqual(config["vocab_size"], reference.get_vocab_size(with_added_tokens=True))
            with open(CORPUS, encoding="utf-8") as f:
                corpus_lines = [line for line in f.read().split("\n") if line]
            rng = random.Random(29)
            n = COUNT // 2
            strings = oracle.real_text_strings(rng, n * 3 // 10) + [rng.choice(corpus_lines) for _ in range(n // 5)]
            strings += oracle.make_vocabs.random_strings(n - len(strings), 31)
            strings = oracle.with_specials(strings, ["<|user|>", "<|assistant|>", "<tool_call>", "</arg_value>",
                                                     "[gMASK]", "<sop>"], rng)
            ours = oracle.encode(path, strings)
            theirs = [e.ids for e in reference.encode_batch(strings, add_special_tokens=False)]
            mismatches = [i for i in range(len(strings)) if ours[i] != theirs[i]]
            print("tokenizers %s on the tiny-glm model: %d strings, %d mismatches" %
                  (tokenizers.__version__, len(strings), len(mismatches)))
            for i in mismatches[:5]:
                print("  %r\n    ours   %s\n    theirs %s" % (strings[i][:200], ours[i][:40], theirs[i][:40]))
            self.assertEqual(mismatches, [])
            self.assertEqual(oracle.decode(path, ours), [s.encode("utf-8") for s in strings])


if __name__ == "__main__":
    if "--tandem" in sys.argv:
        i = sys.argv.index("--tandem")
        TANDEM = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    if not oracle.TOOL or not TANDEM:
        sys.exit("set TOKENIZER_TOOL to build/engine/tokenizer_tool and pass --tandem build/tools/tandem")
    unittest.main(verbosity=2)
