#!/usr/bin/env python3
"""The alert rules and dashboards without a running stack: `promtool check rules`, the promtool
unit tests (tests/observability/rules_*_test.yaml) and that every alert has a case where it fires
and one where it stays quiet, every alert's labels, annotations and runbook, and the dashboards'
shape (data source variable, All values that match an absent label, regex matchers on template
variables, every query parsed by promtool).

Usage: test_static.py   (PROMTOOL: the promtool binary, else the one on PATH)
"""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

import obs_lib

PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool")
SEVERITIES = {"page", "ticket"}


def promtool(*args):
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120)


class RulesTest(unittest.TestCase):
    def setUp(self):
        self.assertIsNotNone(PROMTOOL, "promtool is required (Debian package prometheus)")
        self.rules = obs_lib.load_rules()
        self.alerts = [r for _, r in self.rules if "alert" in r]

    def test_promtool_check_rules(self):
        out = promtool("check", "rules", obs_lib.RULES)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("SUCCESS", out.stdout)

    def test_promtool_unit_tests(self):
        self.assertTrue(obs_lib.RULE_TESTS, "no rules_*_test.yaml")
        out = promtool("test", "rules", *obs_lib.RULE_TESTS)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_every_alert_fires_and_stays_quiet_in_a_unit_test(self):
        fired, quiet = {}, set()
        for path in obs_lib.RULE_TESTS:
            with open(path) as f:
                doc = yaml.safe_load(f)
            self.assertEqual([os.path.normpath(os.path.join(os.path.dirname(path), p)) for p in doc["rule_files"]],
                             [obs_lib.RULES], path)
            for case in doc["tests"]:
                for t in case.get("alert_rule_test", []):
                    if t.get("exp_alerts"):
                        for a in t["exp_alerts"]:
                            fired.setdefault(t["alertname"], set()).add(a["exp_labels"].get("severity"))
                    else:
                        quiet.add(t["alertname"])
        for rule in self.alerts:
            name, severity = rule["alert"], rule["labels"]["severity"]
            self.assertIn(severity, fired.get(name, set()), "%s (severity %s) never fires in a unit test" %
                          (name, severity))
            self.assertIn(name, quiet, "%s has no unit test where it stays quiet" % name)
        unknown = (set(fired) | quiet) - {r["alert"] for r in self.alerts}
        self.assertFalse(unknown, "unit tests of alerts that do not exist")

    def test_labels_annotations_and_runbooks(self):
        for rule in self.alerts:
            name = rule["alert"]
            self.assertRegex(name, r"^Tandem[A-Z]\w+$")
            self.assertIn(rule["labels"].get("severity"), SEVERITIES, name)
            ann = rule.get("annotations", {})
            for key in ("summary", "description", "runbook_url"):
                self.assertTrue(ann.get(key), "%s: no %s annotation" % (name, key))
            self.assertEqual(ann["runbook_url"], obs_lib.RUNBOOK_BASE + name + ".md", name)
            path = os.path.join(obs_lib.RUNBOOKS, name + ".md")
            self.assertTrue(os.path.exists(path), "%s: no runbook %s" % (name, path))
            with open(path) as f:
                text = f.read()
            self.assertTrue(text.startswith("# " + name + "\n"), path)
            for section in ("## Meaning", "## Impact", "## Diagnosis", "## Mitigation"):
                self.assertIn(section, text, "%s: no %s section" % (path, section))
        names = {r["alert"] for r in self.alerts}
        for f in os.listdir(obs_lib.RUNBOOKS):
            if f != "README.md":
                self.assertIn(f[:-3], names, "docs/runbooks/%s has no alert" % f)


class DashboardTest(unittest.TestCase):
    def setUp(self):
        self.assertIsNotNone(PROMTOOL, "promtool is required (Debian package prometheus)")
        self.boards = obs_lib.load_dashboards()
        self.assertGreaterEqual(len(self.boards), 2)

    def test_shape(self):
        uids = set()
        for name, d in self.boards:
            self.assertNotIn(d["uid"], uids, name)
            uids.add(d["uid"])
            self.assertTrue(d.get("title"), name)
            self.assertIn("tandem", d.get("tags", []), name)
            vs = {v["name"]: v for v in obs_lib.variables(d)}
            self.assertEqual(vs.get("datasource", {}).get("type"), "datasource", name)
            self.assertEqual(vs["datasource"].get("query"), "prometheus", name)
            for wanted in ("namespace", "deployment", "pool"):
                self.assertIn(wanted, vs, "%s: no %s variable" % (name, wanted))
            for v in vs.values():
                if v["type"] != "query":
                    continue
                where = "%s: variable %s" % (name, v["name"])
                self.assertEqual(v.get("datasource"), {"type": "prometheus", "uid": "${datasource}"}, where)
                self.assertTrue(v.get("includeAll"), where)
                # ".*" also matches a label the series lack (no namespace outside Kubernetes).
                self.assertEqual(v.get("allValue"), ".*", where)
            ids = set()
            for p in obs_lib.panels(d):
                where = "%s: panel %r" % (name, p.get("title"))
                self.assertTrue(p.get("title"), where)
                self.assertTrue(p.get("description"), where + ": no description")
                self.assertNotIn(p["id"], ids, where)
                ids.add(p["id"])
                g = p["gridPos"]
                self.assertLessEqual(g["x"] + g["w"], 24, where)
                self.assertEqual(p.get("datasource"), {"type": "prometheus", "uid": "${datasource}"}, where)
                self.assertTrue(p.get("targets"), where + ": no query")
                refs = [t["refId"] for t in p["targets"]]
                self.assertEqual(len(refs), len(set(refs)), where)
                for t in p["targets"]:
                    self.assertEqual(t.get("datasource"), p["datasource"], where)
                    self.assertTrue(t.get("expr"), where)
                    # label="$var" would not match an absent label, nor a multi-value selection.
                    self.assertNotRegex(t["expr"], r'\w\s*!?=\s*"[^"]*\$', where + ": use =~ with a variable")

    def test_every_query_parses(self):
        # promtool has no expression checker, but it parses recording rules: one per query.
        rules, where = [], []
        for name, d in self.boards:
            for title, ref, expr in obs_lib.queries(d):
                rules.append({"record": "dashboard:query:%d" % len(rules), "expr": expr})
                where.append("%s: %s (%s)" % (name, title, ref))
            for var, label, selector in obs_lib.variable_queries(d):
                rules.append({"record": "dashboard:query:%d" % len(rules), "expr": selector})
                where.append("%s: variable %s" % (name, var))
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}, f)
            f.flush()
            out = promtool("check", "rules", f.name)
        msg = out.stdout + out.stderr
        for n in sorted({int(m) for m in re.findall(r"dashboard:query:(\d+)", msg)}):
            msg += "\n  query %d is %s" % (n, where[n])
        self.assertEqual(out.returncode, 0, msg)

    def test_queries_read_tandem_series_not_recorded_ones(self):
        for name, d in self.boards:
            for title, ref, expr in obs_lib.queries(d):
                self.assertTrue(obs_lib.metric_names(expr), "%s: %s (%s) reads no tandem series" % (name, title, ref))
                self.assertFalse({n for n in obs_lib.metric_names(expr) if ":" in n},
                                 "%s: %s reads a recorded series (dashboards must work without the rules)" %
                                 (name, title))


if __name__ == "__main__":
    unittest.main(verbosity=2)
