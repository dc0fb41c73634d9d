#!/usr/bin/env python3
"""`tandem eval score` and the Berkeley Function Calling Leaderboard's own AST checker give the same
verdict on hand-made answers to every BFCL case of the simple, multiple, parallel, parallel_multiple
and irrelevance categories (bfcl-eval, pinned in scripts/requirements-bfcl.txt, in .venv/bfcl/).

The cases come from tools/eval/bfcl_to_suite.py (BFCL's data and its tool conversion). For each case,
answers of several kinds, drawn with a fixed seed: the right call(s) (possible answers' first
values, parallel calls shuffled, strings re-cased and re-spaced, integers given as floats where a
float is declared), a wrong value, a missing argument, an extra argument, the wrong tool, no call,
an extra call, arguments that are not JSON. tandem judges them from the answers file; BFCL's
ast_checker judges the same calls (irrelevance: right when no call is made, as BFCL scores it).
Every verdict must agree.

Usage: test_eval_bfcl_checker.py   (TANDEM_BIN: the `tandem` binary; run with .venv/bfcl/bin/python)
"""
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "eval"))
import bfcl_to_suite  # noqa: E402

TANDEM = os.environ.get("TANDEM_BIN", "")
KINDS = ["right", "wrong_value", "missing", "extra_arg", "wrong_tool", "no_call", "extra_call", "bad_json"]


def first_value(answers):
    """A value the possible answers accept: the first one that is not "" (None when all are "")."""
    for a in answers:
        if a != "":
            return instantiate(a)
    return None


def instantiate(v):
    """A possible answer as a concrete value: dictionaries (and lists of them) list values per key."""
    if isinstance(v, dict):
        out = {}
        for k, vals in v.items():
            x = first_value(vals)
            if x is not None:
                out[k] = x
        return out
    if isinstance(v, list):
        return [instantiate(e) if isinstance(e, dict) else e for e in v]
    return v


def restyle(v, rng):
    """The same answer as a model might write it: strings re-cased and spaced, floats as ints."""
    if isinstance(v, str) and v and rng.random() < 0.5:
        return "".join(c.upper() if rng.random() < 0.3 else c for c in v) + (" " if rng.random() < 0.5 else "")
    if isinstance(v, float) and v == int(v) and rng.random() < 0.5:
        return int(v)
    return v


def right_calls(case, rng):
    calls = []
    for e in case["expected"]:
        args = {}
        for name, answers in e["arguments"].items():
            x = first_value(answers)
            if x is not None:
                args[name] = restyle(x, rng)
        calls.append({"name": e["name"], "arguments": args})
    rng.shuffle(calls)
    return calls


def mutate(value, rng):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + rng.choice([1, 7, -3])
    if isinstance(value, str):
        return value + "zz"
    if isinstance(value, list):
        return value + [value[0]] if value else ["zz"]
    if isinstance(value, dict):
        return dict(value, zz_key="zz")
    return "zz"


def answer(case, kind, rng):
    """(tool_calls as the server would send them, content)."""
    names = [t["function"]["name"] for t in case["tools"]]
    calls = right_calls(case, rng) if case["expected"] else [{"name": names[0], "arguments": {}}]
    if kind == "right":
        out = calls if case["expected"] else []
    elif kind == "no_call":
        out = []
    elif kind == "extra_call":
        out = calls + [copy.deepcopy(calls[0])]
    else:
        out = copy.deepcopy(calls)
        target = out[rng.randrange(len(out))]
        args = target["arguments"]
        if kind == "wrong_value" and args:
            k = rng.choice(sorted(args))
            args[k] = mutate(args[k], rng)
        elif kind == "missing" and args:
            del args[rng.choice(sorted(args))]
        elif kind == "extra_arg":
            args["unlisted_argument"] = 1
        elif kind == "wrong_tool":
            others = [n for n in names if n != target["name"]]
            target["name"] = others[0] if others else target["name"] + "_other"
    encoded = []
    for c in out:
        text = json.dumps(c["arguments"])
        if kind == "bad_json":
            text = text[:-1]
        encoded.append({"name": c["name"], "arguments": text})
    return encoded


def bfcl_verdict(bfcl, entry, truth, category, calls):
    if category == "irrelevance":
        return len(calls) == 0
    model_output = []
    for c in calls:
        try:
            args = json.loads(c["arguments"])
        except json.JSONDecodeError:
            return False  # BFCL cannot decode the answer: wrong
        model_output.append({c["name"]: args})
    if not model_output:
        return False
    result = bfcl.ast_checker(entry["function"], model_output, truth, bfcl.Language.PYTHON, category, "tandem")
    return bool(result["valid"])


class BfclCheckerAgreementTest(unittest.TestCase):
    def test_every_verdict_agrees(self):
        bfcl = bfcl_to_suite.import_bfcl()
        rng = random.Random(2026)
        disagreements, counts = [], {}
        with tempfile.TemporaryDirectory() as tmp:
            for category in bfcl_to_suite.CATEGORIES:
                entries = bfcl_to_suite.bfcl_entries(bfcl, category)
                cases = [bfcl_to_suite.to_case(bfcl, category, e, t) for e, t in entries]
                suite = os.path.join(tmp, "%s.jsonl" % category)
                with open(suite, "w") as f:
                    for c in cases:
                        f.write(json.dumps(c) + "\n")
                for kind in KINDS:
                    calls = [answer(c, kind, rng) for c in cases]
                    answers = os.path.join(tmp, "%s-%s.answers.jsonl" % (category, kind))
                    with open(answers, "w") as f:
                        for c, cl in zip(cases, calls):
                            f.write(json.dumps({"id": c["id"], "tool_calls": cl, "content": ""}) + "\n")
                    verdicts = os.path.join(tmp, "v.jsonl")
                    p = subprocess.run([TANDEM, "eval", "score", "--suite", suite, "--answers", answers,
                                        "--verdicts", verdicts], capture_output=True, text=True, timeout=120)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    with open(verdicts) as f:
                        ours = [json.loads(line) for line in f]
                    for (entry, truth), c, cl, v in zip(entries, cases, calls, ours):
                        self.assertEqual(v["id"], c["id"])
                        theirs = bfcl_verdict(bfcl, entry, truth, category, cl)
                        key = (category, kind, theirs)
                        counts[key] = counts.get(key, 0) + 1
                        if v["correct"] != theirs:
                            disagreements.append((c["id"], kind, theirs, v["why"], cl))
        total = sum(counts.values())
        print("%d verdicts compared; BFCL said right in %d" % (total, sum(n for k, n in counts.items() if k[2])))
        for key in sorted(counts):
            print("  %-18s %-12s bfcl=%-5s %d" % (key[0], key[1], key[2], counts[key]))
        self.assertEqual(disagreements[:20], [], "%d of %d verdicts disagree" % (len(disagreements), total))


if __name__ == "__main__":
    unittest.main()
