"""Helpers for the controller end-to-end tests: kube-sim, the real kubectl and tandem-controller
as processes, and polling."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "kube-sim"))

from sim_testlib import SimProcess, wait_for  # noqa: E402  (kube-sim's own test helpers)

KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl") or "/usr/bin/kubectl"
CONTROLLER = os.environ.get("TANDEM_CONTROLLER", os.path.join(REPO, "build", "controller", "tandem-controller"))
API = "/apis/tandem.dev/v1alpha1/namespaces/%s/"


class Cluster:
    """kube-sim plus a kubeconfig that kubectl and tandem-controller both use."""

    def __init__(self, *sim_args):
        self.sim = SimProcess(*sim_args)
        self.dir = tempfile.mkdtemp(prefix="tandem-e2e-")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\n"
                    "clusters: [{name: sim, cluster: {server: \"%s\"}}]\n"
                    "users: [{name: me, user: {}}]\n"
                    "contexts: [{name: sim, context: {cluster: sim, user: me, namespace: default}}]\n"
                    "current-context: sim\n" % self.sim.url)
        self.controllers = []

    def kubectl(self, *args, check=True, stdin=None):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig)
        out = subprocess.run([KUBECTL, "--cache-dir", os.path.join(self.dir, "kcache")] + list(args),
                             input=stdin, capture_output=True, text=True, env=env, timeout=120)
        if check and out.returncode != 0:
            raise AssertionError("kubectl %s: %s%s" % (" ".join(args), out.stdout, out.stderr))
        return out

    def get(self, path):
        code, obj = self.sim.req("GET", path)
        return obj if code == 200 else None

    def items(self, path):
        obj = self.get(path)
        return obj["items"] if obj else []

    def start_controller(self, *args, identity=None):
        log = open(os.path.join(self.dir, "controller-%d.log" % len(self.controllers)), "w+")
        argv = [CONTROLLER, "--kubeconfig", self.kubeconfig, "--metrics-bind-address", "127.0.0.1:0",
                "--health-probe-bind-address", "127.0.0.1:0", "--leader-election-namespace", "default",
                "--agent-image", "tandem/agent:test"]
        if identity:
            argv += ["--leader-election-identity", identity]
        proc = subprocess.Popen(argv + list(args), stdout=log, stderr=subprocess.STDOUT)
        proc.log = log
        self.controllers.append(proc)
        return proc

    def controller_log(self, proc):
        proc.log.flush()
        with open(proc.log.name) as f:
            return f.read()

    def stop(self):
        """Stops every controller still running with SIGTERM, and kube-sim. A controller must exit
        0 from SIGTERM (a sanitizer's leak or error report at exit makes it fail)."""
        bad = []
        for proc in self.controllers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    if proc.wait(20) != 0:
                        bad.append("exit %d after SIGTERM:\n%s" % (proc.returncode, self.controller_log(proc)[-4000:]))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    bad.append("did not stop within 20 s of SIGTERM")
            proc.log.close()
        self.sim.stop()
        if bad:
            raise AssertionError("tandem-controller: " + "\n".join(bad))

    def stats(self):
        return self.sim.ok("GET", "/sim/stats")

    def reconcile_writes_by_verb(self):
        """{verb: count} of the reconcile clients' writes since the last reset (only verbs > 0):
        Lease renewals (a separate User-Agent) and informer reads are not counted."""
        out = {}
        for agent, verbs in self.stats().get("by_user_agent", {}).items():
            if agent.startswith("tandem-controller/") and " " not in agent:
                for v in ("create", "update", "patch", "delete", "deletecollection"):
                    if verbs.get(v, 0):
                        out[v] = out.get(v, 0) + verbs[v]
        return out

    def metrics(self, proc):
        """{series: value} scraped from the controller's /metrics (its address is in its log, read
        once per process: quiet_writes scrapes every 20 ms)."""
        if getattr(proc, "metrics_address", None) is None:
            found = wait_for(lambda: re.search(r"metrics on (\S+)", self.controller_log(proc)), 10,
                             "the controller's metrics address")
            proc.metrics_address = found.group(1)
        with urllib.request.urlopen("http://%s/metrics" % proc.metrics_address, timeout=10) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                series, value = line.rsplit(" ", 1)
                out[series] = float(value)
        return out

    def quiet_writes(self, proc, deployments, pools, rounds=3, timeout=60):
        """Lets one resync round pass, resets kube-sim's counts, then waits until `proc` (started
        with a short --resync-period) has demonstrably reconciled every object again: `rounds`
        resyncs of each controller since the reset, at least rounds-1 reconciles per object
        counted, and empty queues. Returns the reconcile clients' writes by verb in that window:
        {} for a converged controller."""
        def reconciles(m, controller):
            return sum(v for k, v in m.items()
                       if k.startswith('tandem_controller_reconcile_total{controller="%s"' % controller))

        def resyncs(m, controller):
            return m.get('tandem_controller_resyncs_total{controller="%s"}' % controller, 0)

        def after(m0, rounds, objects):
            def done():
                m = self.metrics(proc)
                return all(resyncs(m, c) >= resyncs(m0, c) + rounds and
                           reconciles(m, c) >= reconciles(m0, c) + (rounds - 1) * n * objects and
                           m.get('tandem_workqueue_depth{name="%s"}' % c, 0) == 0
                           for c, n in (("modeldeployment", deployments), ("modelpool", pools)))
            return done

        # First one whole resync round, so that writes still owed to the last change (a status
        # that lags its children by one event) are made before the count starts.
        wait_for(after(self.metrics(proc), 2, 0), timeout, "a resync round before the count")
        self.sim.ok("DELETE", "/sim/stats")
        wait_for(after(self.metrics(proc), rounds, 1), timeout, "%d forced resyncs reconciled" % rounds)
        return self.reconcile_writes_by_verb()

    def reconcile_requests(self):
        """Every request of the controllers' reconcile clients (the rate-limited ones)."""
        return sum(sum(verbs.values()) for agent, verbs in self.stats().get("by_user_agent", {}).items()
                   if agent.startswith("tandem-controller/") and " " not in agent)

    def pods_ready(self, selector, namespace="default"):
        return self.sim.ok("POST", "/sim/pods-ready",
                           {"namespace": namespace, "selector": selector, "ready": True})


def condition(obj, ctype):
    for c in (obj or {}).get("status", {}).get("conditions", []):
        if c.get("type") == ctype:
            return c
    return None


def is_ready(obj):
    """Ready=True for the object's current generation."""
    c = condition(obj, "Ready")
    return (c is not None and c["status"] == "True"
            and obj["status"].get("observedGeneration") == obj["metadata"]["generation"])
