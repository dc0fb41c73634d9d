#!/usr/bin/env python3
"""A decode pool scaled 3 -> 1 and back up, with real agents on loopback (docs/autoscaling.md, "Drain").

One prefill and three decode `tandem-agent` processes behind a router that reads its members from
files (router.decodeMembersFile: what a headless Service's DNS records are in a cluster). The test
plays Kubernetes' part in a StatefulSet scale-down: the two members leaving come out of the
members file, one gets its preStop hook (GET /drain on the metrics port) and then SIGTERM, the
other SIGTERM alone, while 32 streaming requests from the official OpenAI client run and arrive.
Every request must finish with all its tokens; both members must exit 0 with nothing failed at the
end of their grace period. Then a fourth member joins and must take traffic within one router
refresh.

Usage: test_pool_scaling.py MODEL_DIR   (TANDEM_AGENT: the tandem-agent binary)
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

import openai

AGENT = os.environ.get("TANDEM_AGENT", "")
MODEL = sys.argv.pop(1) if len(sys.argv) > 1 else ""
REFRESH_MS = 2000  # long enough that requests reach a draining member before the router's next poll
GRACE_MS = 60000
MAX_TOKENS = 900  # long enough that the drains last a second or more on the tiny model (context 1024)
REQUESTS = 32


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path, timeout=5):
    """(status, body) of GET http://127.0.0.1:port/path; (0, error) when nothing answered."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        return 0, str(e)


def metric(port, name):
    """The sum of every sample of `name` on the agent's /metrics."""
    code, text = http_get(port, "/metrics")
    assert code == 200, (code, text)
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def series(port, name, **labels):
    """The sum of the samples of `name` on /metrics whose labels include `labels`."""
    code, text = http_get(port, "/metrics")
    assert code == 200, (code, text)
    want = ['%s="%s"' % kv for kv in labels.items()]
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(w in line.split("}")[0] for w in want):
            total += float(line.rsplit(" ", 1)[1])
    return total


def write_members(path, endpoints):
    """Replaces the file in one rename, as a ConfigMap update or a DNS change is seen: whole."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join(e + "\n" for e in endpoints))
    os.replace(tmp, path)


class Member:
    def __init__(self, workdir, role, *extra):
        self.role = role
        self.grpc = free_port()
        self.metrics = free_port()
        self.http = free_port()
        self.log_path = os.path.join(workdir, "%s-%d.log" % (role, self.grpc))
        self.log = open(self.log_path, "w")
        args = [AGENT, "--role", role, "--model", MODEL, "--host", "127.0.0.1", "--deployment", "scale",
                "--pool", role, "--grpc-port", str(self.grpc), "--metrics-port", str(self.metrics),
                "--http-port", str(self.http), "--shutdown-grace-ms", str(GRACE_MS), "--threads", "1", *extra]
        if role != "router":
            args += ["--kv-cache-bytes", str(64 << 20)]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def endpoint(self):
        return "127.0.0.1:%d" % self.grpc

    def wait_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("%s exited %s before it was ready:\n%s" % (self.role, self.proc.returncode,
                                                                                self.output()))
            if http_get(self.metrics, "/readyz", timeout=2)[0] == 200:
                return
            time.sleep(0.1)
        raise AssertionError("%s not ready within %d s:\n%s" % (self.role, timeout, self.output()))

    def output(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, timeout=90):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class PoolScalingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tandem_scale_")
        cls.prefill_file = os.path.join(cls.dir, "prefill-members")
        cls.decode_file = os.path.join(cls.dir, "decode-members")
        cls.prefill = Member(cls.dir, "prefill")
        cls.decodes = [Member(cls.dir, "decode") for _ in range(3)]
        write_members(cls.prefill_file, [cls.prefill.endpoint])
        write_members(cls.decode_file, [d.endpoint for d in cls.decodes])
        cls.router = Member(cls.dir, "router", "--prefill-members-file", cls.prefill_file, "--decode-members-file",
                            cls.decode_file, "--refresh-ms", str(REFRESH_MS), "--name", "tiny")
        cls.members = [cls.prefill, *cls.decodes, cls.router]
        for m in cls.members:
            m.wait_ready()
        # Each member is ready; the router learns it at its next poll (every REFRESH_MS). Requests
        # sent before then would all go to the members it saw first.
        deadline = time.time() + 30
        while series(cls.router.metrics, "tandem_router_members", target_pool="decode", state="ready") < 3:
            assert time.time() < deadline, "the router never saw 3 ready decode members:\n" + cls.router.output()
            time.sleep(0.05)
        cls.client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % cls.router.http, api_key="none",
                                   max_retries=0, timeout=120)

    @classmethod
    def tearDownClass(cls):
        for m in reversed(cls.members):
            m.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def stream_one(self, i, results):
        """One streaming chat request; results[i] = (tokens, finish_reason) or the exception text."""
        try:
            stream = self.client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": "request %d: tell me a long story" % i}],
                max_tokens=MAX_TOKENS, temperature=0, stream=True, stream_options={"include_usage": True},
                extra_body={"ignore_eos": True})
            finish, usage = None, None
            for chunk in stream:
                if chunk.choices and chunk.choices[0].finish_reason:
                    finish = chunk.choices[0].finish_reason
                if chunk.usage is not None:
                    usage = chunk.usage.completion_tokens
            results[i] = (usage, finish)
        except Exception as e:  # noqa: BLE001 (any failure is the test's finding)
            results[i] = "%s: %s" % (type(e).__name__, e)

    def test_1_scale_down_3_to_1_during_32_streams_fails_none(self):
        keep, leaving_prestop, leaving_sigterm = self.decodes
        results = [None] * REQUESTS
        threads = [threading.Thread(target=self.stream_one, args=(i, results)) for i in range(REQUESTS)]
        for t in threads[:REQUESTS // 2]:
            t.start()
        # The scale-down starts once both leaving members hold running requests: the counts that
        # showed it are the ones reported (a request may end in the milliseconds before the drain).
        started = time.time()
        deadline = started + 60
        running_at_drain = [0.0] * len(self.decodes)
        while time.time() < deadline and not all(r >= 1 for r in running_at_drain[1:]):
            running_at_drain = [metric(d.metrics, "tandem_requests_running") for d in self.decodes]
        self.assertTrue(all(r >= 1 for r in running_at_drain[1:]),
                        (running_at_drain, "%.1f s" % (time.time() - started), results, self.router.output()[-3000:]))

        # Kubernetes' part: endpoints follow the StatefulSet's scale (the highest ordinals leave), the
        # kubelet runs the preStop hook where there is one, then sends SIGTERM.
        write_members(self.decode_file, [keep.endpoint])
        prestop = {}

        def pre_stop_then_term():
            prestop["started"] = time.time()
            prestop["answer"] = http_get(leaving_prestop.metrics, "/drain", timeout=GRACE_MS / 1000 + 5)
            prestop["seconds"] = time.time() - prestop["started"]
            leaving_prestop.proc.send_signal(signal.SIGTERM)

        hook = threading.Thread(target=pre_stop_then_term)
        hook.start()
        leaving_sigterm.proc.send_signal(signal.SIGTERM)
        time.sleep(0.05)
        # More requests arrive during the drain: those that reach a leaving member before the
        # router's next poll are handed back (UNAVAILABLE before any token) to the member that stays.
        for t in threads[REQUESTS // 2:]:
            t.start()
        # While they drain (requests still in flight): readiness is false (the readiness probe and
        # GetStatus follow it).
        for d in (leaving_prestop, leaving_sigterm):
            code, body = http_get(d.metrics, "/readyz")
            if code == 0 and d.proc.poll() == 0:
                continue  # already drained and gone: the exit code is checked below
            self.assertEqual(code, 503, body)
        for t in threads:
            t.join(timeout=300)
        hook.join(timeout=GRACE_MS / 1000 + 10)

        failed = [(i, r) for i, r in enumerate(results) if r != (MAX_TOKENS, "length")]
        self.assertEqual(failed, [], "requests that did not finish with all their tokens")
        self.assertEqual(prestop["answer"][0], 200, prestop)
        self.assertEqual(prestop["answer"][1], "drained\n", prestop)
        for d in (leaving_prestop, leaving_sigterm):
            self.assertEqual(d.proc.wait(timeout=GRACE_MS / 1000 + 10), 0, d.output())
            self.assertNotIn("still in flight at the end of the grace period", d.output())
        router_log = self.router.output()
        handed_back = sum(1 for line in router_log.splitlines() if "attempt" in line and "draining" in line)
        print("scale-down 3->1: %d/%d streams finished with %d tokens; running on the members when the drain "
              "began: %s; preStop /drain answered after %.2f s; requests handed back by a draining member: %d"
              % (REQUESTS - len(failed), REQUESTS, MAX_TOKENS, running_at_drain, prestop["seconds"], handed_back))
        self.members.remove(leaving_prestop)
        self.members.remove(leaving_sigterm)
        # The member that stayed serves on.
        r = self.client.completions.create(model="tiny", prompt="after the scale-down", max_tokens=4)
        self.assertEqual(r.usage.completion_tokens, 4)

    def test_2_scale_up_takes_traffic_within_one_refresh(self):
        keep = self.decodes[0]
        new = Member(self.dir, "decode")
        self.members.append(new)
        new.wait_ready()
        added = time.time()
        write_members(self.decode_file, [keep.endpoint, new.endpoint])
        first_traffic = None
        while time.time() - added < 30 and first_traffic is None:
            batch = [threading.Thread(target=lambda: self.client.completions.create(
                model="tiny", prompt="scale up", max_tokens=2)) for _ in range(4)]
            sent = time.time()
            for t in batch:
                t.start()
            for t in batch:
                t.join()
            if metric(new.metrics, "tandem_kv_transfer_bytes_total") > 0:
                first_traffic = sent - added
            else:
                time.sleep(0.05)
        self.assertIsNotNone(first_traffic, "the new member took no request within 30 s")
        print("scale-up 1->2: the new member's first request was sent %.2f s after it joined the members file "
              "(router refresh %.1f s)" % (first_traffic, REFRESH_MS / 1000))
        # One refresh re-reads the file and polls the member; a batch sent after it reaches the new member.
        self.assertLessEqual(first_traffic, REFRESH_MS / 1000 + 1.0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
