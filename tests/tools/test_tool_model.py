#!/usr/bin/env python3
"""The committed small tool-calling model (models/tool-tiny, trained by tools/train/train_tool_model.py):
its checkpoint is within 20 MB and loads, its tokenizer encodes as PyPI `tiktoken` does with the same
ranks and Kimi K2's pattern, and served by `tandem local` in BF16 its tool calls on a fixed slice of
its held-out suite stay at least 75% valid (`tandem eval tools --unknown-tool-calls forward`): a floor
under the 81.9% this checkpoint measured on the slice, so that a serving regression (template,
parser, quantization) fails here. The issue's target is 95% on the whole held-out suite; this
checkpoint misses it (87.9% on all 400 cases, docs/eval.md). With the agents' default policy the
calls it makes to functions a case did not offer are dropped: the same slice then returns exactly the
forwarded calls less those.

Usage: test_tool_model.py   (TANDEM_BIN: the `tandem` binary; TOKENIZER_TOOL: engine/text's tool)
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import tiktoken_files  # noqa: E402
from tandem_local import TandemLocal  # noqa: E402

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

    def run_eval(self, out, unknown_tool_calls):
        p = subprocess.run([TANDEM, "eval", "tools", "--model", MODEL, "--configs", "bf16", "--suite",
                            os.path.join(MODEL, "heldout.jsonl"), "--limit", str(SLICE), "--max-tokens", "128",
                            "--unknown-tool-calls", unknown_tool_calls, "--concurrency", "1", "--out", out],
                           capture_output=True, text=True, timeout=900)
        self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
        with open(os.path.join(out, "tools.json")) as f:
            (sample,) = json.load(f)["samples"]
        with open(os.path.join(out, "tools-heldout-bf16.answers.jsonl")) as f:
            answers = {a["id"]: a for a in map(json.loads, f)}
        m = sample["metrics"]
        print("BF16 on %d held-out cases, unknown tool calls %s: validity %.3f (%d/%d calls), trigger precision "
              "%.3f, recall %.3f, argument accuracy %.3f, accuracy %.3f" % (
                  m["cases"], unknown_tool_calls, m["validity"], m["valid_calls"], m["calls"],
                  m["trigger_precision"], m["trigger_recall"], m["argument_accuracy"], m["accuracy"]))
        self.assertEqual(m["failed"], 0)
        return m, answers

    def test_bf16_validity_on_a_fixed_slice(self):
        # The model's own calls (the stack passes on calls to functions a case did not offer): the
        # floor that catches a serving regression.
        with tempfile.TemporaryDirectory() as out:
            m, forwarded = self.run_eval(out, "forward")
        self.assertGreater(m["calls"], SLICE // 2)
        self.assertGreaterEqual(m["validity"], MIN_VALIDITY)
        # The agents' default: such calls are dropped. The cases run one at a time with greedy
        # decoding, so the model writes the same text both times: what comes back is exactly the
        # forwarded calls less those naming a function the case did not offer.
        with tempfile.TemporaryDirectory() as out:
            dropped, kept = self.run_eval(out, "drop")
        offered = {c["id"]: {t["function"]["name"] for t in c["tools"]} for c in heldout()[:SLICE]}
        unknown = 0
        for case_id, names in offered.items():
            want = [c for c in forwarded[case_id]["tool_calls"] if c["name"] in names]
            unknown += len(forwarded[case_id]["tool_calls"]) - len(want)
            self.assertEqual(kept[case_id]["tool_calls"], want, case_id)
        self.assertGreater(unknown, 0, "no call to an un-offered function in the slice: the check proves nothing")
        self.assertEqual(dropped["calls"], m["calls"] - unknown)
        self.assertGreaterEqual(dropped["validity"], m["validity"])

        # One such case again, streamed through a stack of its own: no chunk carries the dropped
        # call, and the router counts it in tandem_tool_calls_dropped_total.
        case = next(c for c in heldout()[:SLICE]
                    if any(t["name"] not in offered[c["id"]] for t in forwarded[c["id"]]["tool_calls"]))
        stack = TandemLocal(TANDEM, MODEL, "--prefill-weights", "bf16", "--decode-weights", "bf16",
                            "--decode-kv", "bf16")
        try:
            body = {"model": stack.model, "messages": case["messages"], "tools": case["tools"],
                    "tool_choice": "auto", "temperature": 0, "max_tokens": 128, "stream": True}
            request = urllib.request.Request(stack.base_url.rstrip("/") + "/chat/completions",
                                             data=json.dumps(body).encode(), method="POST", headers={
                                                 "Content-Type": "application/json",
                                                 "Authorization": "Bearer " + stack.api_key})
            with urllib.request.urlopen(request, timeout=120) as r:
                events = [line[6:] for line in r.read().decode().splitlines() if line.startswith("data: ")]
            self.assertEqual(events[-1], "[DONE]")
            names = [call["function"]["name"] for e in events[:-1] for choice in json.loads(e)["choices"]
                     for call in choice["delta"].get("tool_calls") or [] if "name" in call.get("function", {})]
            self.assertEqual(names, [c["name"] for c in kept[case["id"]]["tool_calls"]], case["id"])
            with urllib.request.urlopen(stack.info["metrics"]["router"], timeout=10) as r:
                counted = [line for line in r.read().decode().splitlines()
                           if line.startswith("tandem_tool_calls_dropped_total{")]
            want = len(forwarded[case["id"]]["tool_calls"]) - len(kept[case["id"]]["tool_calls"])
            self.assertEqual(len(counted), 1, counted)
            self.assertEqual(float(counted[0].rsplit(" ", 1)[1]), want, counted)
        finally:
            self.assertEqual(stack.stop(), 0)


if __name__ == "__main__":
    unittest.main()
