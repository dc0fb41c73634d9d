#!/usr/bin/env python3
"""The agent stays within a memory limit while a flood of big request bodies arrives (#22).

A standalone `tandem-agent` runs inside a memory cgroup (what `systemd-run -p MemoryMax=` and a
Kubernetes pod's memory limit set up; v1 or v2) whose limit is its idle usage plus a headroom.
Then 128 clients each send the head of an 8 MiB request and all of its body but the last byte,
and hold: the slow upload that makes a server buffer every body at once (1 GiB here). Meanwhile
small chat requests keep coming.

Checks, with `api.maxBufferedBodyBytes: 64 MiB`: the agent is never OOM-killed and stays under
the limit, the excess bodies are answered 429 with Retry-After, every small request is answered
200 (none of them refused: a request's first 64 KiB are not charged to the budget), and a
request after the flood is served. The negative control then runs the same flood against an agent
whose budget is as good as unbounded and expects the cgroup to kill it: a flood that does not
press memory would prove nothing.

Usage: test_memory_limit.py MODEL_DIR   (TANDEM_AGENT: the `tandem-agent` binary)
Exits 77 (CTest: skipped) when no memory cgroup can be made on this machine.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

AGENT = os.environ.get("TANDEM_AGENT", "")
BODY_BYTES = 8 << 20          # the agent's default api.maxBodyBytes
BUDGET_BYTES = 64 << 20       # api.maxBufferedBodyBytes under test
HEADROOM_BYTES = 256 << 20    # the limit: idle usage + this
FLOOD_CLIENTS = 128           # 128 x 8 MiB = 1 GiB of bodies
PREFIX = b'{"model":"m","messages":[{"role":"user","content":"'
SUFFIX = b'"}]}'
FLOOD_BODY = PREFIX + b"a" * (BODY_BYTES - len(PREFIX) - len(SUFFIX)) + SUFFIX  # one copy, shared


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MemoryCgroup:
    """A fresh memory cgroup (v1 or v2) that processes are started in."""

    def __init__(self, name):
        v1 = "/sys/fs/cgroup/memory"
        v2 = "/sys/fs/cgroup"
        self.path = None
        if os.path.isdir(v1) and os.access(v1, os.W_OK):
            self.v2 = False
            self.path = os.path.join(v1, name)
        elif (os.path.exists(os.path.join(v2, "cgroup.controllers")) and os.access(v2, os.W_OK)
              and "memory" in open(os.path.join(v2, "cgroup.subtree_control")).read().split()):
            self.v2 = True
            self.path = os.path.join(v2, name)
        else:
            raise OSError("no writable memory cgroup (v1 /sys/fs/cgroup/memory or v2 with +memory)")
        os.makedirs(self.path, exist_ok=True)

    def _read(self, name):
        with open(os.path.join(self.path, name)) as f:
            return f.read()

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(str(value))

    def enter(self):
        """For preexec_fn: moves the calling (child) process in."""
        self._write("cgroup.procs", os.getpid())

    def usage(self):
        return int(self._read("memory.current" if self.v2 else "memory.usage_in_bytes"))

    def peak(self):
        return int(self._read("memory.peak" if self.v2 else "memory.max_usage_in_bytes"))

    def reset_peak(self):
        self._write("memory.peak" if self.v2 else "memory.max_usage_in_bytes", 0)

    def set_limit(self, limit):
        self._write("memory.max" if self.v2 else "memory.limit_in_bytes", limit)

    def oom_kills(self):
        text = self._read("memory.events" if self.v2 else "memory.oom_control")
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


class Agent:
    def __init__(self, model, cgroup, budget):
        self.dir = tempfile.mkdtemp(prefix="tandem_memlimit_")
        self.port = free_port()
        config = os.path.join(self.dir, "agent.yaml")
        with open(config, "w") as f:
            f.write(f"api: {{maxBodyBytes: {BODY_BYTES}, maxBufferedBodyBytes: {budget}, maxInflight: 4}}\n")
        self.log = open(os.path.join(self.dir, "agent.log"), "w")
        self.proc = subprocess.Popen(
            [AGENT, "--role", "standalone", "--model", model, "--host", "127.0.0.1", "--http-port", str(self.port),
             "--metrics-port", str(free_port()), "--kv-cache-bytes", str(64 << 20), "--threads", "1",
             "--config", config], stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=cgroup.enter)
        deadline = time.time() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tandem-agent exited with {self.proc.returncode}; log in {self.log.name}")
            try:
                self.model = json.loads(self.get("/v1/models"))["data"][0]["id"]
                break
            except (OSError, ValueError):
                if time.time() > deadline:
                    raise RuntimeError("tandem-agent was not serving within 60 s")
                time.sleep(0.1)

    def get(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
            return r.read().decode()

    def chat(self, text, timeout=30):
        """(status, headers, body) of a small non-streamed chat completion."""
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": text}],
                           "max_tokens": 4, "temperature": 0}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def flood_client(port, results, index, hold):
    """Sends the head of a BODY_BYTES chat request and all of its body but the last byte, then
    waits (the slow upload) until `hold` is set or the server answers."""
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(FLOOD_BODY)}\r\n\r\n").encode()
    outcome = "held"
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    except OSError:
        results[index] = ("no connection", None, False)
        hold.wait()
        return
    try:
        sock.sendall(head)
        view = memoryview(FLOOD_BODY)[:-1]
        for at in range(0, len(view), 1 << 20):
            sock.sendall(view[at:at + (1 << 20)])
    except OSError:
        outcome = "cut"  # refused while sending: the answer may still be readable
    # Read what the server answers; a body still held after a second of quiet counts as held.
    sock.settimeout(0.2)
    answer = b""
    quiet_since = time.time()
    while True:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            if outcome != "held" or time.time() - quiet_since > 1.0:
                break
            continue
        except OSError:
            break
        if not chunk:
            break
        answer += chunk
        outcome = "answered"
    head_text = answer.split(b"\r\n\r\n", 1)[0].lower()
    status = int(answer[9:12]) if answer.startswith(b"HTTP/1.1 ") else None
    results[index] = (outcome, status, b"\r\nretry-after: 1" in head_text)
    hold.wait()
    sock.close()


def small_requests(agent, stop, out):
    while not stop.is_set():
        started = time.time()
        try:
            status, _, _ = agent.chat("hello there")
        except OSError:
            status = None  # no answer at all (the negative control's agent is gone)
        out.append((status, time.time() - started))
        time.sleep(0.1)


def flood(agent, cgroup):
    """Runs the flood with small requests beside it; returns a summary dict."""
    hold = threading.Event()
    stop_small = threading.Event()
    results = [None] * FLOOD_CLIENTS
    small = []
    small_thread = threading.Thread(target=small_requests, args=(agent, stop_small, small))
    small_thread.start()
    clients = [threading.Thread(target=flood_client, args=(agent.port, results, i, hold))
               for i in range(FLOOD_CLIENTS)]
    for c in clients:
        c.start()
    deadline = time.time() + 60
    while any(r is None for r in results) and time.time() < deadline and agent.proc.poll() is None:
        time.sleep(0.2)
    time.sleep(1.0)  # the held bodies sit in the agent now
    summary = {"usage_during": cgroup.usage(), "alive_during": agent.proc.poll() is None}
    hold.set()
    stop_small.set()
    for c in clients:
        c.join(timeout=30)
    small_thread.join(timeout=60)
    summary["clients"] = results
    summary["small"] = small
    return summary


def main():
    if len(sys.argv) != 2 or not AGENT:
        print("usage: TANDEM_AGENT=... test_memory_limit.py MODEL_DIR", file=sys.stderr)
        return 2
    model = sys.argv[1]
    try:
        cgroup = MemoryCgroup(f"tandem-memlimit-{os.getpid()}")
    except OSError as e:
        print(f"SKIP: {e}")
        return 77
    failures = []
    report = {}
    try:
        # 1. With the budget.
        agent = Agent(model, cgroup, BUDGET_BYTES)
        status, _, _ = agent.chat("warm up")
        assert status == 200, f"warm-up request answered {status}"
        idle = cgroup.usage()
        limit = idle + HEADROOM_BYTES
        cgroup.set_limit(limit)
        cgroup.reset_peak()
        summary = flood(agent, cgroup)
        peak = cgroup.peak()
        alive = agent.proc.poll() is None
        outcomes = [r for r in summary["clients"] if r is not None]
        held = sum(1 for o, _, _ in outcomes if o == "held")
        refused = sum(1 for _, s, _ in outcomes if s == 429)
        refused_retry = sum(1 for _, s, r in outcomes if s == 429 and r)
        small_status = [s for s, _ in summary["small"]]
        small_ok = sum(1 for s in small_status if s == 200)
        small_latency = sorted(t for _, t in summary["small"])
        after = agent.chat("after the flood")[0] if alive else None
        report["budgeted"] = {
            "idle_mib": round(idle / 2**20, 1), "limit_mib": round(limit / 2**20, 1),
            "peak_mib": round(peak / 2**20, 1), "usage_during_mib": round(summary["usage_during"] / 2**20, 1),
            "oom_kills": cgroup.oom_kills(), "alive": alive, "clients": len(outcomes), "held": held,
            "refused_429": refused, "refused_with_retry_after": refused_retry,
            "other": len(outcomes) - held - refused, "small_requests": len(small_status), "small_ok": small_ok,
            "small_p50_s": round(small_latency[len(small_latency) // 2], 3) if small_latency else None,
            "small_max_s": round(small_latency[-1], 3) if small_latency else None, "after_status": after}
        print(json.dumps(report["budgeted"]), flush=True)
        if not alive or cgroup.oom_kills() != 0:
            failures.append("the agent was killed under the budget")
        if peak >= limit:
            failures.append(f"peak {peak} reached the limit {limit}")
        if len(outcomes) != FLOOD_CLIENTS:
            failures.append(f"{FLOOD_CLIENTS - len(outcomes)} flood clients never finished")
        if held > BUDGET_BYTES // BODY_BYTES:
            failures.append(f"{held} bodies held at once, more than the budget's {BUDGET_BYTES // BODY_BYTES}")
        if refused < FLOOD_CLIENTS - BUDGET_BYTES // BODY_BYTES or refused_retry != refused:
            failures.append(f"{refused} refused 429 ({refused_retry} with Retry-After) of {FLOOD_CLIENTS}")
        if not small_status or small_ok != len(small_status):
            failures.append(f"small requests: {small_ok} of {len(small_status)} answered 200 ({small_status})")
        if after != 200:
            failures.append(f"the request after the flood was answered {after}")
        agent.stop()

        # 2. Negative control: the same flood with the budget out of the way must press the limit.
        cgroup.set_limit(-1 if not cgroup.v2 else "max")
        control = Agent(model, cgroup, 1 << 40)
        control.chat("warm up")
        oom_before = cgroup.oom_kills()
        cgroup.set_limit(cgroup.usage() + HEADROOM_BYTES)
        cgroup.reset_peak()
        flood(control, cgroup)
        killed = control.proc.poll() is not None
        report["control"] = {"killed": killed, "returncode": control.proc.returncode,
                             "oom_kills": cgroup.oom_kills() - oom_before,
                             "peak_mib": round(cgroup.peak() / 2**20, 1)}
        print(json.dumps(report["control"]), flush=True)
        if not killed or cgroup.oom_kills() == oom_before:
            failures.append("negative control: without the budget the flood did not get the agent OOM-killed, "
                            "so the test does not press memory")
        control.stop()
    finally:
        cgroup.remove()
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("OK: memory limit held under a flood of big bodies")
    return 0


if __name__ == "__main__":
    sys.exit(main())
