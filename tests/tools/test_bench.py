#!/usr/bin/env python3
"""`tandem bench` at CI size (--quick): every experiment runs, and what it writes parses — the
Markdown table, the CSV (the same columns as the table), the JSON (machine, config, targets,
samples) and the SVG plot (well-formed XML with a drawn line). serve and integrity run against
real `tandem local` stacks, and their numbers are checked against the load they were given.

Usage: test_bench.py MODEL_DIR   (TANDEM_BIN: the `tandem` binary)
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

TANDEM = os.environ.get("TANDEM_BIN", "")
MODEL = sys.argv.pop(1) if len(sys.argv) > 1 else ""
SVG = "{http://www.w3.org/2000/svg}"


class BenchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tandem-bench-")
        cls.out = cls.tmp.name

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_bench(self, experiment, *flags, expect=0):
        p = subprocess.run([TANDEM, "bench", experiment, "--quick", "--out", self.out, *flags],
                           capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, expect, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr[-4000:]}")
        return p

    def check_outputs(self, experiment):
        """Parses the four files; returns (json, csv rows)."""
        base = os.path.join(self.out, experiment)
        md = open(base + ".md").read()
        table = [line for line in md.splitlines() if line.startswith("| ")]
        self.assertGreaterEqual(len(table), 3, md)  # header + at least two rows (separator starts "|-")
        md_columns = [c.strip() for c in table[0].strip("|").split("|")]
        with open(base + ".csv", newline="") as f:
            rows = list(csv.reader(f))
        self.assertEqual(rows[0], md_columns)
        self.assertGreaterEqual(len(rows), 2)
        for row in rows[1:]:
            self.assertEqual(len(row), len(md_columns), row)
        report = json.load(open(base + ".json"))
        for key in ("experiment", "title", "machine", "config", "tables", "targets", "samples"):
            self.assertIn(key, report)
        self.assertEqual(report["experiment"], experiment)
        self.assertIn("logical_cores", report["machine"])
        self.assertGreater(report["machine"]["read_bandwidth_gb_s"], 0)
        self.assertTrue(report["samples"], "no samples")
        for t in report["targets"]:
            self.assertEqual(t["met"], t["value"] >= t["threshold"] if t["at_least"] else t["value"] <= t["threshold"])
            self.assertIn(t["name"], md)
        root = ET.parse(base + ".svg").getroot()
        self.assertEqual(root.tag, SVG + "svg")
        lines = root.findall(f".//{SVG}polyline") + root.findall(f".//{SVG}path")
        self.assertTrue(lines, "the plot draws no line")
        return report, rows

    def test_kv_capacity(self):
        self.run_bench("kv-capacity")
        report, rows = self.check_outputs("kv-capacity")
        kimi = next(r for r in rows[1:] if r[0] == "kimi-k2.6")
        self.assertAlmostEqual(float(kimi[4]) / float(kimi[3]), float(kimi[5]), places=3)
        self.assertGreaterEqual(float(kimi[5]), 1.99)

    def test_kv_decode(self):
        self.run_bench("kv-decode")
        report, rows = self.check_outputs("kv-decode")
        # The budget is chosen so BF16 cannot hold the largest concurrency: production's "out of memory".
        self.assertEqual(rows[-1][1], "oom")  # the CSV's raw form of "out of memory (holds N)"
        self.assertGreater(float(rows[-1][2]), 0)

    def test_weights(self):
        self.run_bench("weights")
        report, rows = self.check_outputs("weights")
        for row in rows[1:]:
            self.assertGreater(float(row[1]), 0)
            self.assertGreater(float(row[2]), 0)

    def test_serve_against_tandem_local(self):
        p = self.run_bench("serve", "--model", MODEL, "--concurrency", "1,3", "--requests", "6",
                           "--prompt-tokens", "24", "--output-tokens", "6", "--slo-ttft", "60")
        report, rows = self.check_outputs("serve")
        results = report["config"]["results"]
        self.assertEqual([r["max_concurrency"] for r in results], [1, 3])
        for r in results:
            self.assertEqual(r["completed"], 6, r["errors"])
            self.assertEqual(r["failed"], 0)
            self.assertEqual(r["total_input_tokens"], 6 * 24)
            self.assertEqual(r["total_output_tokens"], 6 * 6)  # ignore_eos: every request runs to max_tokens
            self.assertAlmostEqual(r["output_throughput"], 36 / r["duration"], places=6)
            self.assertLessEqual(r["median_ttft_ms"], r["median_e2el_ms"])
            self.assertAlmostEqual(r["request_goodput"], r["request_throughput"])  # a 60 s TTFT SLO: all good
        second = os.path.join(self.out, "serve-1.svg")
        self.assertEqual(ET.parse(second).getroot().tag, SVG + "svg")

    def test_serve_bad_url_is_a_clear_error(self):
        p = self.run_bench("serve", "--url", "https://example.invalid", expect=1)
        self.assertIn("https is not supported", p.stderr)
        p = self.run_bench("serve", "--url", "http://127.0.0.1:1", "--model-name", "m", expect=1)
        self.assertIn("connect 127.0.0.1:1", p.stderr)

    def test_integrity(self):
        self.run_bench("integrity", "--model", MODEL)
        report, rows = self.check_outputs("integrity")
        self.assertEqual([r[0] for r in rows[1:3]], ["tags off, checksum off", "tags on, checksum on"])
        self.assertEqual([r[4] for r in rows[1:3]], ["0", "0"])  # no request failed
        self.assertEqual({t["name"] for t in report["targets"]},
                         {"integrity throughput cost (%)", "integrity p95 latency cost (%)"})

    def test_unknown_experiment_and_bad_flag(self):
        p = subprocess.run([TANDEM, "bench", "frobnicate"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown experiment 'frobnicate'", p.stderr)
        p = subprocess.run([TANDEM, "bench", "kv-decode", "--concurrency", "0"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--concurrency: bad value '0'", p.stderr)


if __name__ == "__main__":
    if not TANDEM or not MODEL:
        sys.exit("usage: TANDEM_BIN=... test_bench.py MODEL_DIR")
    unittest.main()
