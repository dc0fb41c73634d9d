"""Helpers for the controller end-to-end tests: kube-sim, the real kubectl and tandem-controller
as processes, and polling."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

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
        for proc in self.controllers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            proc.log.close()
        self.sim.stop()

    def stats(self):
        return self.sim.ok("GET", "/sim/stats")

    def reconcile_writes(self):
        """Writes by the controllers' reconcile clients (Lease renewals, sent with a separate
        User-Agent, and informer reads excluded), from kube-sim's per-User-Agent counts since the
        last reset."""
        total = 0
        for agent, verbs in self.stats().get("by_user_agent", {}).items():
            if agent.startswith("tandem-controller/") and " " not in agent:
                total += sum(verbs.get(v, 0) for v in ("create", "update", "patch", "delete", "deletecollection"))
        return total

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
