#!/usr/bin/env python3
"""The closing count of scripts/test.sh: every skipped test and every unregistered suite by name.

  check_skips.py [--strict] BUILD_DIR:JUNIT_XML ...

For each build tree: JUNIT_XML is what `ctest --output-junit` wrote there; the tests' labels come
from `ctest --show-only=json-v1`, and BUILD_DIR/unregistered-suites.txt (written at configure
time, cmake/TandemSuites.cmake) names the suites configure left out for a missing dependency.

A skip is accepted when the test carries the `gpu` label (no GPU here) or its skip message starts
with a declared reason (common/test_skip.h: `[isa-absent]`). With --strict (CI=true) any other
skip, and any unregistered suite, fails: a green run must mean every suite ran.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

DECLARED = ("[isa-absent]",)


def labels_by_test(build_dir):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build_dir, capture_output=True, text=True,
                         check=True).stdout
    labels = {}
    for test in json.loads(out).get("tests", []):
        for prop in test.get("properties", []):
            if prop.get("name") == "LABELS":
                labels[test["name"]] = set(prop.get("value", []))
    return labels


def skip_reason(output):
    """The GoogleTest skip message (the line after `Skipped`), or unittest's summary."""
    m = re.search(r"^[^\n]*Skipped\n(.*?)\n", output, re.M)
    if m and m.group(1).strip():
        return m.group(1).strip()
    m = re.search(r"^OK \(skipped=\d+\)", output, re.M)
    if m:
        skipped = re.findall(r"\.\.\. skipped '([^']*)'", output)
        return "unittest: " + ("; ".join(skipped) if skipped else m.group(0))
    return "(no message)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strict", action="store_true", help="fail on an undeclared skip or a missing suite")
    ap.add_argument("runs", nargs="+", help="BUILD_DIR:JUNIT_XML")
    args = ap.parse_args()

    passed = failed = 0
    accepted, refused, unregistered = [], [], []
    for run in args.runs:
        build_dir, junit = run.split(":", 1)
        tree = ET.parse(junit)
        labels = labels_by_test(build_dir)
        for case in tree.getroot().iter("testcase"):
            name = case.get("name")
            if case.find("skipped") is not None:
                reason = skip_reason(case.findtext("system-out") or "")
                entry = "%s: %s (%s)" % (build_dir, name, reason)
                if "gpu" in labels.get(name, set()) or reason.startswith(DECLARED):
                    accepted.append(entry)
                else:
                    refused.append(entry)
            elif case.find("failure") is not None or case.get("status") not in ("run", None):
                failed += 1
            else:
                passed += 1
        listing = os.path.join(build_dir, "unregistered-suites.txt")
        if os.path.exists(listing):
            with open(listing) as f:
                unregistered += ["%s: %s" % (build_dir, line.strip()) for line in f if line.strip()]

    skipped = accepted + refused
    print("tests: %d passed, %d failed, %d skipped" % (passed, failed, len(skipped)))
    for entry in accepted:
        print("  skipped: " + entry)
    for entry in refused:
        print("  skipped WITHOUT a declared reason: " + entry)
    if unregistered:
        print("%d suites not registered: %s" % (len(unregistered), "; ".join(unregistered)))
    if args.strict and (refused or unregistered):
        print("check_skips: with CI=true a skip outside the gpu label needs a declared reason "
              "(common/test_skip.h) and every suite must be registered", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
