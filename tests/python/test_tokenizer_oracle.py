#!/usr/bin/env python3
"""Tokenizer oracle: engine/text/ against PyPI `tokenizers` and `tiktoken` on the same files.

For each test tokenizer (engine/text/testdata/make_vocabs.py made them):
  glm_like/tokenizer.json   vs tokenizers.Tokenizer.from_file (encode, add_special_tokens=False)
  kimi_like/tiktoken.model  vs tiktoken.Encoding(Kimi K2's pattern, the ranks, the special tokens)
                            (encode, allowed_special="all")
the test encodes >= 10^5 strings (random code points of all planes, many scripts, Thai included,
and real text: the corpus sentences and lines of this repository's sources and docs) through
`tokenizer_tool encode` and requires the same ids for every string; then checks
decode(encode(s)) == s, also on arbitrary (unassigned code points, invalid UTF-8) inputs, and that
streaming detokenization (`tokenizer_tool stream`) reproduces valid UTF-8 text exactly. The same
vocabulary is also compared under GPT-2's ByteLevel regex and Qwen2's pattern (COUNT / 4 strings each).

Run: TOKENIZER_TOOL=build/engine/tokenizer_tool .venv/bin/python tests/python/test_tokenizer_oracle.py
Set TOKENIZER_ORACLE_STRINGS to change the count per tokenizer (default 100000).
"""
import base64
import glob
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTDATA = os.path.join(ROOT, "engine", "text", "testdata")
sys.path.insert(0, TESTDATA)
import make_vocabs  # noqa: E402

import tiktoken  # noqa: E402
import tokenizers  # noqa: E402

TOOL = os.environ.get("TOKENIZER_TOOL", "")
COUNT = int(os.environ.get("TOKENIZER_ORACLE_STRINGS", "100000"))


def run_tool(command, path, lines):
    proc = subprocess.run([TOOL, command, "--tokenizer", path], input="\n".join(lines) + "\n",
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError("tokenizer_tool %s failed: %s" % (command, proc.stderr))
    out = proc.stdout.split("\n")[:-1]
    assert len(out) == len(lines), (len(out), len(lines))
    return out


def encode(path, texts):
    """Our ids for each text (str or bytes)."""
    hexes = [(t.encode("utf-8", "surrogatepass") if isinstance(t, str) else t).hex() for t in texts]
    return [[int(x) for x in line.split()] for line in run_tool("encode", path, hexes)]


def decode(path, ids_list, command="decode"):
    return [bytes.fromhex(h) for h in run_tool(command, path, [" ".join(map(str, ids)) for ids in ids_list])]


def real_text_strings(rng, n):
    """Lines and paragraphs of real text: the corpus sentences and this repository's files."""
    sources = []
    for pattern in ("docs/*.md", "*.md", "engine/**/*.cc", "engine/**/*.h", "tests/**/*.py", "scripts/*.sh",
                    "controller/**/*.cc", "agent/**/*.cc"):
        for path in sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True)):
            if "testdata" in path:
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                sources.append(f.read())
    sources.extend(make_vocabs.SENTENCES)
    sources.extend(make_vocabs.corpus(500, seed=11))
    text = "\n".join(sources)
    out = []
    for _ in range(n):
        start = rng.randrange(len(text))
        out.append(text[start:start + rng.choice([20, 80, 300, 2000])])
    return out


def test_strings(seed):
    rng = random.Random(seed)
    n_real = COUNT * 2 // 5
    strings = real_text_strings(rng, n_real) + make_vocabs.random_strings(COUNT - n_real, seed)
    # Long single pieces (priority-queue merging): CJK and Thai runs, space runs.
    strings += ["我能吞下玻璃而不伤身体" * 30, "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ" * 20, " " * 500 + "x",
                "a" * 1000, "1" * 99, "\n" * 70, "'s" * 60]
    return strings


def with_specials(strings, specials, rng):
    out = []
    for s in strings:
        if rng.random() < 0.05:
            k = rng.randrange(len(s) + 1)
            s = s[:k] + rng.choice(specials) + s[k:]
        out.append(s)
    return out


class TokenizerOracleTest(unittest.TestCase):
    def compare(self, name, path, strings, reference_encode):
        ours = encode(path, strings)
        theirs = reference_encode(strings)
        mismatches = [i for i in range(len(strings)) if ours[i] != theirs[i]]
        print("%s: %d strings (%d bytes), %d mismatches" %
              (name, len(strings), sum(len(s.encode("utf-8")) for s in strings), len(mismatches)))
        for i in mismatches[:5]:
            print("  %r\n    ours   %s\n    theirs %s" % (strings[i][:200], ours[i][:40], theirs[i][:40]))
        self.assertEqual(mismatches, [])
        # decode(encode(s)) == s, and the streaming detokenizer gives the same text.
        self.assertEqual(decode(path, ours), [s.encode("utf-8") for s in strings])
        sample = strings[:20000]
        self.assertEqual(decode(path, ours[:20000], "stream"), [s.encode("utf-8") for s in sample])
        return ours

    def round_trip_arbitrary(self, path):
        rng = random.Random(5)
        texts = [s.encode("utf-8", "surrogatepass") for s in make_vocabs.random_strings(20000, 9, assigned_only=False)]
        texts += [bytes(rng.randrange(256) for _ in range(rng.randrange(60))) for _ in range(20000)]
        self.assertEqual(decode(path, encode(path, texts)), texts)

    def test_hf_byte_level_bpe(self):
        path = os.path.join(TESTDATA, "glm_like", "tokenizer.json")
        reference = tokenizers.Tokenizer.from_file(path)
        strings = with_specials(test_strings(1), make_vocabs.GLM_SPECIALS, random.Random(2))

        def theirs(texts):
            return [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]

        ours = self.compare("tokenizers %s" % tokenizers.__version__, path, strings, theirs)
        # Their decoder agrees with our bytes on valid text.
        sample = list(range(0, len(strings), 50))
        decoded = reference.decode_batch([ours[i] for i in sample], skip_special_tokens=False)
        self.assertEqual(decoded, [strings[i] for i in sample])
        self.round_trip_arbitrary(path)

    def test_hf_other_patterns(self):
        """The same vocabulary under GPT-2's ByteLevel regex and Qwen2's Split pattern."""
        with open(os.path.join(TESTDATA, "glm_like", "tokenizer.json")) as f:
            config = json.load(f)
        split = config["pre_tokenizer"]["pretokenizers"][0]
        variants = {
            "gpt2": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "qwen2": dict(config["pre_tokenizer"], pretokenizers=[
                dict(split, pattern={"Regex": make_vocabs.CL100K.replace(r"\p{N}{1,3}", r"\p{N}")}),
                config["pre_tokenizer"]["pretokenizers"][1]]),
        }
        strings = test_strings(7)
        random.Random(8).shuffle(strings)
        strings = strings[:COUNT // 4]
        with tempfile.TemporaryDirectory() as tmp:
            for name, pre_tokenizer in variants.items():
                path = os.path.join(tmp, name + ".json")
                with open(path, "w") as f:
                    json.dump(dict(config, pre_tokenizer=pre_tokenizer), f)
                reference = tokenizers.Tokenizer.from_file(path)
                self.compare("tokenizers %s, %s pattern" % (tokenizers.__version__, name), path, strings,
                             lambda texts: [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)])

    def test_tiktoken_ranks(self):
        path = os.path.join(TESTDATA, "kimi_like", "tiktoken.model")
        ranks = {}
        with open(path) as f:
            for line in f:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
        with open(os.path.join(TESTDATA, "kimi_like", "tokenizer_config.json")) as f:
            specials = {v["content"]: int(k) for k, v in json.load(f)["added_tokens_decoder"].items()}
        reference = tiktoken.Encoding("kimi_like", pat_str=make_vocabs.KIMI, mergeable_ranks=ranks,
                                      special_tokens=specials)
        strings = with_specials(test_strings(3), sorted(specials), random.Random(4))

        def theirs(texts):
            return [reference.encode(t, allowed_special="all") for t in texts]

        self.compare("tiktoken %s" % tiktoken.__version__, path, strings, theirs)
        self.round_trip_arbitrary(path)


if __name__ == "__main__":
    if not TOOL:
        sys.exit("set TOKENIZER_TOOL to build/engine/tokenizer_tool")
    unittest.main(verbosity=2)
