#!/usr/bin/env python3
"""The committed small tool-calling model (models/tool-tiny, trained by tools/train/train_tool_model.py):
its checkpoint is within 20 MB and loads, its tokenizer encodes as PyPI `tiktoken` does with the same
ranks and Kimi K2's pattern, and served by `tandem local` in BF16 its tool calls on a fixed slice of
its held-out suite stay at least 75% valid (`tandem eval tools`): a floor under the 81.9% this
checkpoint measured on the slice, so that a serving regression (template, parser, quantization)
fails here. The issue's target is 95% on the whole held-out suite; this checkpoint misses it (87.9%
on all 400 cases, docs/eval.md).

Usage: test_tool_model.py   (TANDEM_BIN: the `tandem` binary; TOKENIZER_TOOL: engine/text's tool)
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import tiktoken_files  # noqa: E402

TANDEM = os.environ.get("TANDEM_BIN", "")
TOKENIZER_TOOL = os.environ.get("TOKENIZER_TOOL", "")
MODEL = os.path.join(ROOT, "models", "tool-tiny")
SLICE = 80  # held-out cases served in the validity check
MIN_VALIDITY = 0.75  # this checkpoint: 0.819 (68 of 83 calls); the 0.95 target is not met


def heldout():
    with open(os.path.join(MODEL, "heldout.jsonl")) as f:
        return [json.loads(line) for line in f]


class ToolModelTest(unittest.TestCase):
    def test_checkpoint_is_small_and_kimi_shaped(self):
        size = os.path.getsize(os.path.join(MODEL, "model.safetensors"))
        self.assertLessEqual(size, 20 * 1000 * 1000)
        with open(os.path.join(MODEL, "config.json")) as f:
            config = json.load(f)
        self.assertEqual(config["model_type"], "deepseek_v3")
        self.assertGreater(config["n_routed_experts"], 1)
        with open(os.path.join(MODEL, "training.json")) as f:
            training = json.load(f)
        self.assertLess(training["curve"][-1]["loss"], training["curve"][0]["loss"] / 10)

    def test_tokenizer_matches_tiktoken(self):
        reference = tiktoken_files.load(MODEL, "tool-tiny", with_specials=False)
        texts = []
        for case in heldout():
            texts += [m["content"] for m in case["messages"]]
            texts.append(json.dumps(case["tools"], ensure_ascii=False, separators=(",", ":")))
        texts += ["Hello, 世界! ¿Qué tal? 123456 tabs\tand\nnewlines", "functions.get_weather:0"]
        p = subprocess.run([TOKENIZER_TOOL, "encode", "--tokenizer", os.path.join(MODEL, "tiktoken.model"),
                            "--no-special"], input="".join(t.encode().hex() + "\n" for t in texts),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        ours = [[int(x) for x in line.split()] for line in p.stdout.splitlines()]
        self.assertEqual(len(ours), len(texts))
        for text, got in zip(texts, ours):
            self.assertEqual(got, reference.encode_ordinary(text), text)

    def test_bf16_validity_on_a_fixed_slice(self):
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run([TANDEM, "eval", "tools", "--model", MODEL, "--configs", "bf16", "--suite",
                                os.path.join(MODEL, "heldout.jsonl"), "--limit", str(SLICE), "--max-tokens", "128",
                                "--out", out], capture_output=True, text=True, timeout=900)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
            with open(os.path.join(out, "tools.json")) as f:
                (sample,) = json.load(f)["samples"]
        m = sample["metrics"]
        print("BF16 on %d held-out cases: validity %.3f (%d/%d calls), trigger precision %.3f, recall %.3f, "
              "argument accuracy %.3f, accuracy %.3f" % (m["cases"], m["validity"], m["valid_calls"], m["calls"],
                                                         m["trigger_precision"], m["trigger_recall"],
                                                         m["argument_accuracy"], m["accuracy"]))
        self.assertEqual(m["failed"], 0)
        self.assertGreater(m["calls"], SLICE // 2)
        self.assertGreaterEqual(m["validity"], MIN_VALIDITY)


if __name__ == "__main__":
    unittest.main()
