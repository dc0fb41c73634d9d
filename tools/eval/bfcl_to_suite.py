#!/usr/bin/env python3
"""Writes Berkeley Function Calling Leaderboard categories as `tandem eval tools` suites (JSONL).

The data, its possible answers and the tool conversion are BFCL's own, from the pinned PyPI package
`bfcl-eval` (scripts/requirements-bfcl.txt, installed by scripts/install-deps.sh into .venv/bfcl/):
each case's functions become OpenAI tools exactly as BFCL sends them to an OpenAI-compatible model
(`convert_to_tool(..., GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)`: "dict" -> object,
"float" -> number, "tuple" -> array, "any" -> string, dots in names -> underscores), and its
possible answers become `expected` (with the same renaming). Categories: simple (simple_python),
multiple, parallel, parallel_multiple, irrelevance (no call is right).

Usage: .venv/bfcl/bin/python tools/eval/bfcl_to_suite.py --out DIR [--categories simple,irrelevance]
       [--limit N]   (writes DIR/bfcl-<category>.jsonl; prints where BFCL's files were read from)
"""
import argparse
import json
import os
import re
import sys
import types

CATEGORIES = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
    "irrelevance": "irrelevance",
}


def import_bfcl():
    """bfcl_eval's modules we use, without its model registry (which imports every vendor SDK)."""
    registry = types.ModuleType("bfcl_eval.constants.model_config")

    class OpenAiStyle:  # the one entry the AST checker reads: names were sent with "." -> "_"
        underscore_to_dot = True

    registry.MODEL_CONFIG_MAPPING = {"tandem": OpenAiStyle()}
    sys.modules["bfcl_eval.constants.model_config"] = registry
    import bfcl_eval
    from bfcl_eval.constants.enums import Language, ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import convert_to_tool
    return types.SimpleNamespace(
        data_dir=os.path.join(os.path.dirname(bfcl_eval.__file__), "data"), Language=Language,
        convert=lambda functions: convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS),
        ast_checker=ast_checker)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def bfcl_entries(bfcl, category):
    """[(entry, ground_truth or None)] of one category, in BFCL's order."""
    name = CATEGORIES[category]
    entries = read_jsonl(os.path.join(bfcl.data_dir, "BFCL_v4_%s.json" % name))
    answers_path = os.path.join(bfcl.data_dir, "possible_answer", "BFCL_v4_%s.json" % name)
    answers = {a["id"]: a["ground_truth"] for a in read_jsonl(answers_path)} if os.path.exists(answers_path) else {}
    return [(e, answers.get(e["id"])) for e in entries]


def to_case(bfcl, category, entry, ground_truth):
    expected = []
    for call in ground_truth or []:
        (name, args), = call.items()
        expected.append({"name": re.sub(r"\.", "_", name), "arguments": args})
    return {"id": entry["id"], "category": category, "messages": entry["question"][0],
            "tools": bfcl.convert(entry["function"]), "expected": expected}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--categories", default=",".join(CATEGORIES))
    ap.add_argument("--limit", type=int, default=0, help="first N cases of each category (0: all)")
    args = ap.parse_args(argv)
    bfcl = import_bfcl()
    os.makedirs(args.out, exist_ok=True)
    for category in args.categories.split(","):
        if category not in CATEGORIES:
            ap.error("unknown category %r (known: %s)" % (category, ", ".join(CATEGORIES)))
        entries = bfcl_entries(bfcl, category)
        if args.limit:
            entries = entries[:args.limit]
        path = os.path.join(args.out, "bfcl-%s.jsonl" % category)
        with open(path, "w") as f:
            for entry, truth in entries:
                f.write(json.dumps(to_case(bfcl, category, entry, truth)) + "\n")
        print("%s: %d cases -> %s" % (category, len(entries), path))
    print("from %s" % bfcl.data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
