"""Test helpers: start kube_sim.py as a process on port 0 and talk raw HTTP to it."""

import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KUBE_SIM = os.path.join(HERE, "kube_sim.py")


def wait_for(predicate, timeout=10.0, what="condition"):
    """Polls predicate until it returns a truthy value (returned) or the timeout passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.02)


class SimProcess:
    """kube_sim.py in a subprocess (python3 from sys.executable) with extra CLI args."""

    def __init__(self, *args, tls_context=None, token=None):
        self.dir = tempfile.mkdtemp(prefix="kube-sim-test-")
        self.port_file = os.path.join(self.dir, "port")
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen(
            [sys.executable, KUBE_SIM, "--port", "0", "--port-file", self.port_file] + list(args),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.port = int(wait_for(self._read_port, 20, "kube-sim port file"))
        self.scheme = "https" if tls_context else "http"
        self.tls_context = tls_context
        self.token = token
        self._conn = None

    def _read_port(self):
        if self.proc.poll() is not None:
            self.log.seek(0)
            raise AssertionError("kube-sim exited %s: %s" % (self.proc.returncode,
                                                            self.log.read()))
        try:
            with open(self.port_file) as f:
                return f.read().strip()
        except FileNotFoundError:
            return None

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % (self.scheme, self.port)

    def connect(self, timeout=30):
        if self.tls_context:
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                               context=self.tls_context)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def req(self, method, path, body=None, ctype="application/json", headers=None, raw=False):
        """(status, parsed JSON body or text) over one kept-alive connection."""
        hdrs = dict(headers or {})
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs["Content-Type"] = ctype
        if self.token and "Authorization" not in hdrs:
            hdrs["Authorization"] = "Bearer " + self.token
        for attempt in range(2):
            if self._conn is None:
                self._conn = self.connect()
            try:
                self._conn.request(method, path, body=data, headers=hdrs)
                resp = self._conn.getresponse()
                text = resp.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
        if raw:
            return resp.status, text, resp
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text.decode(errors="replace")

    def ok(self, method, path, body=None, ctype="application/json", want=(200, 201)):
        code, obj = self.req(method, path, body, ctype)
        if code not in want:
            raise AssertionError("%s %s -> %d %s" % (method, path, code, obj))
        return obj

    def stop(self):
        if self._conn is not None:
            self._conn.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class WatchStream:
    """A raw watch: reads chunked newline-delimited JSON events one at a time."""

    def __init__(self, sim, path, timeout=10):
        self.conn = sim.connect(timeout=timeout)
        hdrs = {"Authorization": "Bearer " + sim.token} if sim.token else {}
        self.conn.request("GET", path, headers=hdrs)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.cut = False  # the stream ended without its closing chunk
        self.buf = b""

    def next(self):
        """The next event dict, or None at the end of the stream (clean, or cut: self.cut)."""
        # read1 (not readline, whose peek hides a truncated chunked body) tells a cut stream.
        while b"\n" not in self.buf:
            try:
                data = self.resp.read1(65536)
            except (http.client.IncompleteRead, ConnectionResetError):
                self.cut = True
                return None
            if not data:
                return None
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def events(self):
        """All remaining events until the stream ends."""
        out = []
        while True:
            ev = self.next()
            if ev is None:
                return out
            out.append(ev)

    def close(self):
        self.conn.close()


def make_certs(d):
    """A CA, a server cert for 127.0.0.1 and a client cert, made with the openssl CLI."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=kube-sim-test-ca")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    for name, ext in (("server", ["-extfile", "san.ext"]), ("client", [])):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out",
            name + ".csr", "-subj", "/CN=" + name)
        run("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "2", *ext)
    return {n: os.path.join(d, n) for n in ("ca.crt", "server.crt", "server.key", "client.crt",
                                             "client.key")}


# ---- fixtures shared by the cases_*.py test modules ----------------------------------------------

MDEP = "/apis/tandem.dev/v1alpha1/namespaces/default/modeldeployments"
POOLS = "/apis/tandem.dev/v1alpha1/namespaces/default/modelpools"
CMS = "/api/v1/namespaces/default/configmaps"
STS = "/apis/apps/v1/namespaces/default/statefulsets"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
PODS = "/api/v1/namespaces/default/pods"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def load_crds():
    """The CRDs of crds/ (read with PyYAML, which the test venv has)."""
    import yaml
    docs = []
    crd_dir = os.path.join(REPO, "crds")
    for name in sorted(os.listdir(crd_dir)):
        if name.endswith(".yaml"):
            with open(os.path.join(crd_dir, name)) as f:
                docs.extend(d for d in yaml.safe_load_all(f) if d)
    return docs


def mdep(name, **spec):
    body = {"model": {"name": "tandem/tiny", "dummy": {"preset": "tiny", "seed": 1}}}
    body.update(spec)
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
            "metadata": {"name": name}, "spec": body}


def cm(name, data=None, labels=None, owners=None, finalizers=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    if owners:
        meta["ownerReferences"] = [{"apiVersion": o["apiVersion"], "kind": o["kind"],
                                    "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]}
                                   for o in owners]
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}


def sts(name, replicas, labels=None, policy=None):
    labels = labels or {"app": name}
    obj = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
           "spec": {"replicas": replicas, "serviceName": name,
                     "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "agent"}]}}}}
    if policy:
        obj["spec"]["podManagementPolicy"] = policy
    return obj


class SimTestCase(unittest.TestCase):
    ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.sim = SimProcess(*cls.ARGS)
        for crd in load_crds():
            cls.sim.ok("POST", CRDS, crd)

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
