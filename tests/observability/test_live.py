#!/usr/bin/env python3
"""The dashboards and alert rules against the real thing: `tandem local` (router, prefill and
decode agents) under a short load from the official OpenAI client, with injected transfer faults,
and tandem-controller reconciling deploy/examples/tiny-cpu.yaml in kube-sim, all scraped every
second by a real Prometheus that also loads deploy/prometheus/tandem-rules.yaml.

  - every query of every dashboard panel, template variables at their All values and
    $__rate_interval at 10 s, returns data (a number, not only NaN);
  - every template variable's label_values() query runs, and finds values where the code sets
    the label;
  - every series name the dashboards and rules read is in the agents' or the controller's
    exposition (so neither can drift from the code);
  - every rule evaluates without error, and the injected digest fault fires
    TandemKVTransferCorrupted.

Usage: test_live.py MODEL_DIR CONTROLLER_BIN   (TANDEM_BIN: the `tandem` binary; PROMETHEUS and
KUBECTL: those programs, else the ones on PATH)
"""
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

import openai

import obs_lib

sys.path.insert(0, os.path.join(obs_lib.REPO, "tests", "controller"))
import e2e_lib  # noqa: E402  (kube-sim, kubectl and tandem-controller as processes)

sys.path.insert(0, os.path.join(obs_lib.REPO, "tests"))
from tandem_local import TandemLocal  # noqa: E402

TANDEM = os.environ.get("TANDEM_BIN", "")
MODEL = sys.argv.pop(1) if len(sys.argv) > 1 else ""
CONTROLLER = sys.argv.pop(1) if len(sys.argv) > 1 else os.environ.get("TANDEM_CONTROLLER", "")
PROMETHEUS = os.environ.get("PROMETHEUS") or shutil.which("prometheus")
WINDOW_S = int(obs_lib.BUILTINS["__rate_interval"].rstrip("s"))  # the rate window the queries use


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %d s waiting for %s" % (timeout, what))
        time.sleep(0.2)


def host_port(url):
    return urllib.parse.urlsplit(url).netloc


def local_stack(work):
    """`tandem local` with fault injection on, as tests/agent/test_local_stack.py starts it."""
    return TandemLocal(TANDEM, MODEL, "--enable-fault-injection", "--transfer-timeout-ms", "3000", timeout=120,
                       work_dir=work)


class ControllerInSim:
    """tandem-controller reconciling tiny-cpu.yaml in kube-sim, its pods marked ready."""

    def __init__(self):
        e2e_lib.CONTROLLER = CONTROLLER
        self.cluster = e2e_lib.Cluster()
        try:
            c = self.cluster
            c.kubectl("apply", "--validate=false", "-f", os.path.join(obs_lib.REPO, "crds"))
            # A resync every second keeps reconciles (and their rates) going during the scrape.
            self.proc = c.start_controller("--resync-period", "1")
            c.kubectl("apply", "--validate=false", "-f",
                      os.path.join(obs_lib.REPO, "deploy", "examples", "tiny-cpu.yaml"))
            pods = "/api/v1/namespaces/default/pods?labelSelector=tandem.dev/deployment%3Dtiny-cpu"
            wait_until(lambda: len(c.items(pods)) >= 2, 30, "the tiny-cpu pods")
            c.pods_ready("tandem.dev/deployment=tiny-cpu")
            found = wait_until(lambda: re.search(r"metrics on (\S+)", c.controller_log(self.proc)), 10,
                               "the controller's metrics address")
            self.metrics_url = "http://%s/metrics" % found.group(1)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        self.cluster.stop()
        shutil.rmtree(self.cluster.dir, ignore_errors=True)
        shutil.rmtree(self.cluster.sim.dir, ignore_errors=True)


class Load(threading.Thread):
    """A digest and a tag fault, then streaming and non-streaming chat and completions until
    stopped, with a digest fault every tenth round."""

    def __init__(self, info):
        super().__init__(daemon=True)
        self.client = openai.OpenAI(base_url=info["base_url"], api_key=info["api_key"], max_retries=0, timeout=60)
        self.model = info["model"]
        self.stopping = threading.Event()
        self.done = 0
        self.faults_failed = self.faults_answered = 0
        self.error = None

    def chat(self, text, **kw):
        return self.client.chat.completions.create(model=self.model, messages=[{"role": "user", "content": text}],
                                                   max_tokens=8, **kw)

    def fault(self, kind):
        try:
            self.chat("the victim of a %s fault" % kind, extra_headers={"x-tandem-fault": kind})
            self.faults_answered += 1
        except openai.InternalServerError:
            self.faults_failed += 1

    def run(self):
        try:
            self.fault("digest")
            self.fault("tag")
            i = 0
            while not self.stopping.is_set():
                if i % 10 == 9:
                    self.fault("digest")  # so the failure panels move inside every rate window
                self.chat("tell me about request %d" % (i % 7), temperature=0.5, seed=i)
                for _ in self.chat("stream number %d" % i, stream=True):
                    pass
                # The same prompt again: a prefix-cache hit.
                self.client.completions.create(model=self.model, prompt="Once upon a time " * 8, max_tokens=4)
                self.done += 3
                i += 1
                self.stopping.wait(0.05)  # a steady load, not a benchmark: the host has other work
        except Exception as e:  # reported by the test, not lost in the thread
            self.error = e


class Prometheus:
    def __init__(self, work, agents, controller):
        self.port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [obs_lib.RULES],
            "scrape_configs": [
                {"job_name": "tandem-agents", "static_configs": [{"targets": agents}]},
                {"job_name": "tandem-controller", "static_configs": [{"targets": [controller]}]},
            ],
        }
        path = os.path.join(work, "prometheus.yml")
        with open(path, "w") as f:
            json.dump(config, f)  # JSON is YAML
        self.log = open(os.path.join(work, "prometheus.log"), "w+")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + path, "--storage.tsdb.path=" + os.path.join(work, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port], stdout=self.log, stderr=subprocess.STDOUT)
        self.api = "http://127.0.0.1:%d/api/v1/" % self.port

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("prometheus exited %s" % self.proc.returncode)
            try:
                return get("http://127.0.0.1:%d/-/ready" % self.port, timeout=2)
            except OSError:
                return None

        wait_until(ready, 30, "prometheus /-/ready")

    def call(self, path, **params):
        body = json.loads(get(self.api + path + "?" + urllib.parse.urlencode(params, doseq=True)))
        if body.get("status") != "success":
            raise AssertionError("%s %s: %s" % (path, params, body))
        return body["data"]

    def query(self, expr):
        return self.call("query", query=expr)["result"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class LiveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.mkdtemp(prefix="tandem_obs_")
        cls.stack = cls.controller = cls.prom = cls.load = None
        try:
            cls._start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _start(cls):
        started = {}

        def start_controller():
            try:
                started["controller"] = ControllerInSim()
            except BaseException as e:
                started["error"] = e

        t = threading.Thread(target=start_controller)
        t.start()
        cls.stack = local_stack(cls.work)
        t.join()
        cls.controller = started.get("controller")
        if "error" in started:
            raise started["error"]
        agents = [host_port(u) for u in cls.stack.info["metrics"].values()]
        cls.prom = Prometheus(cls.work, agents, host_port(cls.controller.metrics_url))
        # Every target scraped once before the faults, so their counters' first samples are 0 (a
        # counter first seen at 1 has no increase).
        wait_until(lambda: len(cls.prom.query("up == 1")) == len(agents) + 1, 30, "every target up")
        cls.load = Load(cls.stack.info)
        cls.load.start()
        load_started = time.monotonic()

        def enough():
            if cls.load.error:
                raise AssertionError("the load failed: %r" % cls.load.error)
            up = cls.prom.query("count_over_time(up[%ds])" % WINDOW_S)
            return (len(up) == len(agents) + 1 and all(float(r["value"][1]) >= WINDOW_S - 2 for r in up)
                    and time.monotonic() - load_started > WINDOW_S + 2 and cls.load.done >= 30)

        # A full rate window of scrapes, all of it under load.
        wait_until(enough, 60, "%d s of scrapes under load" % WINDOW_S)

    @classmethod
    def tearDownClass(cls):
        if cls.load:
            cls.load.stopping.set()
            cls.load.join(60)
        for part in (cls.prom, cls.stack, cls.controller):
            if part:
                part.stop()
        shutil.rmtree(cls.work, ignore_errors=True)

    def test_faults_were_injected(self):
        self.assertGreaterEqual(self.load.faults_failed, 3, "injected transfer faults end in a 500")
        self.assertEqual(self.load.faults_answered, 0, "a request with an injected transfer fault was answered")

    def test_every_panel_returns_data(self):
        self.assertIsNone(self.load.error, "the load stopped")
        failures, checked = [], 0
        for board, d in obs_lib.load_dashboards():
            for title, ref, expr in obs_lib.queries(d):
                where = "%s: panel %r (%s)" % (board, title, ref)
                result = self.prom.query(expr)
                checked += 1
                numbers = [r for r in result if not math.isnan(float(r["value"][1]))]
                gap = obs_lib.metric_names(expr) & set(obs_lib.NOT_EMITTED)
                if gap:
                    if result:
                        failures.append("%s: returns data now; drop %s from obs_lib.NOT_EMITTED" % (where, gap))
                elif not result:
                    failures.append("%s: no data for %s" % (where, expr))
                elif not numbers:
                    failures.append("%s: only NaN for %s" % (where, expr))
        self.assertGreater(checked, 40)
        self.assertFalse(failures, "\n".join(failures))

    def test_variables_find_their_values(self):
        # namespace (and pod) come from Kubernetes service discovery: absent here, so the query
        # must run but may find nothing; the labels the code sets must have values.
        for board, d in obs_lib.load_dashboards():
            for var, label, selector in obs_lib.variable_queries(d):
                values = self.prom.call("label/%s/values" % label, **{"match[]": selector})
                if label != "namespace":
                    self.assertTrue(values, "%s: variable %s finds no %s values" % (board, var, label))

    def test_every_series_read_is_exported(self):
        exported = set()
        for url in list(self.stack.info["metrics"].values()) + [self.controller.metrics_url]:
            exported |= obs_lib.exposition_names(get(url))
        read = {}
        for board, d in obs_lib.load_dashboards():
            for title, _, expr in obs_lib.queries(d):
                for name in obs_lib.metric_names(expr):
                    read.setdefault(name, "%s: %s" % (board, title))
        for group, rule in obs_lib.load_rules():
            for name in obs_lib.metric_names(rule["expr"]):
                read.setdefault(name, "rule %s" % (rule.get("alert") or rule.get("record")))
        for where, expr in obs_lib.autoscaling_example_queries():
            for name in obs_lib.metric_names(expr):
                read.setdefault(name, where)
        recorded = obs_lib.recorded_names()
        wrong = []
        for name, where in sorted(read.items()):
            if name in recorded:
                continue
            if name in obs_lib.NOT_EMITTED:
                if name in exported:
                    wrong.append("%s is exported now: drop it from obs_lib.NOT_EMITTED" % name)
            elif name not in exported:
                wrong.append("%s (read by %s) is in no exposition" % (name, where))
        self.assertGreater(len(read), 20)
        self.assertFalse(wrong, "\n".join(wrong))

    def test_rules_evaluate_and_the_digest_fault_alerts(self):
        def evaluated():
            groups = self.prom.call("rules")["groups"]
            rules = [r for g in groups for r in g["rules"]]
            return rules if rules and all(not r["lastEvaluation"].startswith("0001") for r in rules) else None

        rules = wait_until(evaluated, 20, "every rule evaluated once")
        self.assertEqual(len(rules), len(obs_lib.load_rules()))
        for r in rules:
            self.assertEqual(r["health"], "ok", "%s: %s" % (r["name"], r.get("lastError")))
        firing = {a["labels"]["alertname"]: a for a in self.prom.call("alerts")["alerts"] if a["state"] == "firing"}
        self.assertIn("TandemKVTransferCorrupted", firing)
        self.assertEqual(firing["TandemKVTransferCorrupted"]["labels"]["deployment"], "local")
        self.assertNotIn("TandemKVIntegrityAbort", firing)


if __name__ == "__main__":
    if not TANDEM or not MODEL or not CONTROLLER:
        sys.exit("usage: TANDEM_BIN=... test_live.py MODEL_DIR CONTROLLER_BIN")
    unittest.main(verbosity=2)
