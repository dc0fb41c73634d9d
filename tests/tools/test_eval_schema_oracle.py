#!/usr/bin/env python3
"""Tool-call validity as `tandem eval score` judges it (tools/eval/json_schema.h) agrees with Python's
`jsonschema` (Draft 2020-12) on random schemas and arguments: types and type lists, enum, const,
number and length bounds, arrays (items, min/maxItems, uniqueItems), objects (properties, required,
additionalProperties as a bool or a schema) and anyOf / oneOf / allOf / not, nested up to three
levels, with values drawn both from the schema (mostly valid) and at random (mostly not).

Usage: test_eval_schema_oracle.py   (TANDEM_BIN: the `tandem` binary; needs jsonschema)
"""
import json
import os
import random
import subprocess
import tempfile
import unittest

import jsonschema

TANDEM = os.environ.get("TANDEM_BIN", "")
CASES = 3000
TYPES = ["object", "array", "string", "integer", "number", "boolean", "null"]
STRINGS = ["", "a", "ab", "abc", "Paris", "é", "日本語", "celsius", "x y"]


def rand_number(rng):
    return rng.choice([0, 1, 2, -3, 7, 2.0, 2.5, -0.5, 10, 100, 1e3])


def rand_value(rng, depth=0):
    kind = rng.choice(["int", "num", "str", "bool", "null"] + (["list", "dict"] if depth < 2 else []))
    if kind == "int":
        return rng.choice([0, 1, 2, -3, 7, 10])
    if kind == "num":
        return rand_number(rng)
    if kind == "str":
        return rng.choice(STRINGS)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [rand_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rng.choice("abcxyz"): rand_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def rand_schema(rng, depth=0):
    roll = rng.random()
    if depth < 3 and roll < 0.12:
        key = rng.choice(["anyOf", "oneOf", "allOf"])
        return {key: [rand_schema(rng, depth + 1) for _ in range(rng.randrange(1, 3))]}
    if depth < 3 and roll < 0.16:
        return {"not": rand_schema(rng, depth + 1)}
    if roll < 0.22:
        return {"enum": [rand_value(rng, 2) for _ in range(rng.randrange(1, 4))]}
    if roll < 0.25:
        return {"const": rand_value(rng, 2)}
    if roll < 0.3:
        return {"type": rng.sample(TYPES, 2)}
    t = rng.choice(TYPES if depth < 3 else TYPES[2:])
    s = {"type": t}
    if t in ("integer", "number"):
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if rng.random() < 0.25:
                s[k] = rand_number(rng)
    elif t == "string":
        if rng.random() < 0.3:
            s["minLength"] = rng.randrange(3)
        if rng.random() < 0.3:
            s["maxLength"] = rng.randrange(1, 4)
        if rng.random() < 0.2:
            s["enum"] = rng.sample(STRINGS, 3)
    elif t == "array":
        if rng.random() < 0.7:
            s["items"] = rand_schema(rng, depth + 1)
        if rng.random() < 0.3:
            s["minItems"] = rng.randrange(3)
        if rng.random() < 0.3:
            s["maxItems"] = rng.randrange(1, 4)
        if rng.random() < 0.2:
            s["uniqueItems"] = True
    elif t == "object":
        props = {k: rand_schema(rng, depth + 1) for k in rng.sample("abcxyz", rng.randrange(1, 4))}
        s["properties"] = props
        s["required"] = [k for k in props if rng.random() < 0.5]
        r = rng.random()
        if r < 0.3:
            s["additionalProperties"] = False
        elif r < 0.45:
            s["additionalProperties"] = rand_schema(rng, depth + 1)
    if rng.random() < 0.2:
        s["description"] = "ignored"
    return s


def value_for(schema, rng, depth=0):
    """A value shaped after the schema (often valid), or sometimes just any value."""
    if rng.random() < 0.15 or depth > 4:
        return rand_value(rng)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return value_for(rng.choice(schema[key]), rng, depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = rng.choice(t)
    if t == "object":
        props = schema.get("properties", {})
        out = {k: value_for(v, rng, depth + 1) for k, v in props.items() if rng.random() < 0.8}
        if rng.random() < 0.2:
            out["extra"] = rand_value(rng, 2)
        return out
    if t == "array":
        items = schema.get("items", {})
        return [value_for(items, rng, depth + 1) for _ in range(rng.randrange(4))]
    if t == "string":
        return rng.choice(STRINGS)
    if t == "integer":
        return rng.choice([0, 1, 2, 7, -3, 2.0])
    if t == "number":
        return rand_number(rng)
    if t == "boolean":
        return rng.random() < 0.5
    if t == "null":
        return None
    return rand_value(rng)


class SchemaOracleTest(unittest.TestCase):
    def test_validity_agrees_with_jsonschema(self):
        rng = random.Random(7)
        cases, answers, want = [], [], []
        for i in range(CASES):
            schema = rand_schema(rng)
            params = {"type": "object", "properties": {"v": schema}, "required": ["v"]}
            args = {"v": value_for(schema, rng)}
            cases.append({"id": "s%d" % i, "messages": [{"role": "user", "content": "x"}],
                          "tools": [{"type": "function", "function": {"name": "f", "parameters": params}}],
                          "expected": [{"name": "f", "arguments": {}}]})
            answers.append({"id": "s%d" % i, "tool_calls": [{"name": "f", "arguments": json.dumps(args)}]})
            want.append(jsonschema.Draft202012Validator(params).is_valid(args))
        with tempfile.TemporaryDirectory() as tmp:
            suite, ans, out = (os.path.join(tmp, n) for n in ("s.jsonl", "a.jsonl", "v.jsonl"))
            for path, rows in ((suite, cases), (ans, answers)):
                with open(path, "w") as f:
                    f.writelines(json.dumps(r) + "\n" for r in rows)
            p = subprocess.run([TANDEM, "eval", "score", "--suite", suite, "--answers", ans, "--verdicts", out],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                got = [json.loads(line)["verdicts"][0] for line in f]
        wrong = [(cases[i]["tools"][0]["function"]["parameters"]["properties"]["v"], answers[i]["tool_calls"][0]
                  ["arguments"], want[i], got[i]["why"]) for i in range(CASES) if got[i]["valid"] != want[i]]
        print("%d cases, %d valid by jsonschema, %d disagreements" % (CASES, sum(want), len(wrong)))
        self.assertGreater(sum(want), CASES // 5)  # both verdicts well represented
        self.assertLess(sum(want), CASES * 4 // 5)
        self.assertEqual(wrong[:10], [])


if __name__ == "__main__":
    unittest.main()
