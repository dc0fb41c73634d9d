#!/usr/bin/env python3
"""Chaos soak on loopback (#22 item 4): `tandem local --restart-agents` with 2 prefill + 2 decode
agents under mixed load for --minutes, while a chaos thread kills (SIGKILL) and freezes (SIGSTOP
for a few seconds, then SIGCONT) random agents, and the load itself carries hung transfers, late
writes, slow pushes, page-tag and digest faults (x-tandem-fault, honoured with
--enable-fault-injection), client disconnects mid-stream, and bad requests. Passkey probes, prompts
whose greedy output was recorded on the quiet stack before the chaos began, are mixed in.

At the end, with the load stopped, it checks:
  1. every probe that completed returned its known output (greedy: the same tokens);
  2. 0 requests stuck past their deadline (every request ended, answered or refused, within it);
  3. 0 failures unexplained: a request may fail only when it carried a fault meant to fail it, or a
     chaos event (a kill or a freeze) fell within its lifetime;
  4. 0 leaked pages: on every agent, once idle, the KV pages held are exactly the prefix cache's
     (tandem_kv_cache_used_tokens == tandem_prefix_cache_tokens), nothing running or waiting;
  5. integrity aborts == injected integrity faults: the decode agents' tag and digest refusals
     (tandem_kv_transfer_failures_total{reason=tag_mismatch|digest_mismatch}) plus page-verification
     aborts (tandem_kv_integrity_aborts_total), summed over every incarnation of every agent (an
     agent's counters are read just before it is killed), equal the tag and digest faults sent;
     no chaos event overlaps such a request, so the count is exact;
  6. no agent's resident memory grew past its bound: the largest RSS of each incarnation within
     --memory-growth (default 25%) + 64 MiB of that agent's RSS after the warm-up.

Prints a report and writes it as JSON (--report); exits 1 when any check fails.

Usage: chaos_soak.py --tandem BIN --model DIR [--minutes M] [--workers N] [--seed S] [--report FILE]
                     [--local-arg=FLAG ...]
"""
import argparse
import http.client
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tandem_local import NotReady, TandemLocal  # noqa: E402

FAULTS_THAT_FAIL = ("tag", "digest", "hang", "late_write")  # the victim gets an error
INTEGRITY_FAULTS = ("tag", "digest")  # counted by the decode agent's integrity checks
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu the weather in paris london tokyo "
         "call the function with city and unit please tell me a story about a robot who").split()
PROBES = [
    "What is the weather in Paris today?",
    "alpha bravo charlie delta echo foxtrot",
    "Tell me a story about a robot who learns to paint.",
    "one two three four five six seven eight nine ten",
    "The quick brown fox jumps over the lazy dog and then",
    "Please call the function with city Tokyo and unit celsius.",
    "red orange yellow green blue indigo violet",
    "In a hospital far away, the night shift began when",
]


def metric_sum(text, name, labels=()):
    """Sum of the samples of `name` whose label text contains every string of `labels`."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line[len(name):len(name) + 1] not in ("{", " "):
            continue
        if all(label in line for label in labels):
            total += float(line.rsplit(" ", 1)[1])
    return total


def rss_bytes(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Outcome:
    __slots__ = ("kind", "start", "end", "status", "error", "fault", "probe", "text", "stuck", "expect", "tokens")

    def __init__(self, kind, fault="", probe=None, expect="ok"):
        self.kind, self.fault, self.probe, self.expect = kind, fault, probe, expect
        self.start = time.monotonic()
        self.end = None
        self.status = 0
        self.error = ""
        self.text = ""
        self.stuck = False
        self.tokens = None  # usage.completion_tokens, when the answer had it


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.dir = tempfile.mkdtemp(prefix="tandem-soak-")
        self.stack = None
        self.lock = threading.Lock()
        self.outcomes = []
        self.chaos = []  # (start, end, action, label)
        self.cond = threading.Condition()
        self.integrity_in_flight = 0
        self.chaos_active = False
        self.stop = threading.Event()
        self.counters = {}  # label -> [summed integrity counts of ended incarnations]
        self.rss = {}  # label -> list of (incarnation pid, max rss)
        self.rss_baseline = {}
        self.known = {}

    # -- the stack ----------------------------------------------------------------------------
    def start_stack(self):
        try:
            self.stack = TandemLocal(self.args.tandem, self.args.model, "--prefill", "2", "--decode", "2",
                                     "--enable-fault-injection", "--restart-agents", "--transfer-timeout-ms", "3000",
                                     "--threads", "1", *self.args.local_arg, timeout=600, work_dir=self.dir,
                                     start_new_session=True)
        except NotReady as e:
            raise SystemExit(str(e))
        self.proc = self.stack.proc
        info = self.ready()
        self.base = info["base_url"]
        self.key = info["api_key"]
        self.model = info["model"]
        hostport = self.base.split("//", 1)[1].split("/", 1)[0]
        self.host, self.port = hostport.rsplit(":", 1)[0], int(hostport.rsplit(":", 1)[1])
        self.agents = sorted(label for label in info["pids"] if label != "router")

    def ready(self):
        return self.stack.read_info()

    def local_log(self):
        return self.stack.output()

    def scrape(self, label, timeout=5):
        url = self.ready()["metrics"][label]
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read().decode()

    def agent_ready(self, label):
        url = self.ready()["metrics"][label].replace("/metrics", "/readyz")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    @staticmethod
    def integrity_count(text):
        return (metric_sum(text, "tandem_kv_transfer_failures_total", ['reason="tag_mismatch"']) +
                metric_sum(text, "tandem_kv_transfer_failures_total", ['reason="digest_mismatch"']) +
                metric_sum(text, "tandem_kv_integrity_aborts_total"))

    # -- requests -----------------------------------------------------------------------------
    def call(self, o, path, body, stream, fault="", disconnect_after=0):
        headers = {"Content-Type": "application/json", "Authorization": "Bearer " + self.key}
        if fault:
            headers["x-tandem-fault"] = fault
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.args.deadline)
        try:
            conn.request("POST", path, body=body if isinstance(body, str) else json.dumps(body), headers=headers)
            resp = conn.getresponse()
            o.status = resp.status
            if resp.status != 200 or not stream:
                data = resp.read()
                try:
                    j = json.loads(data)
                except ValueError:
                    j = {}
                if resp.status != 200:
                    o.error = str(j.get("error", {}).get("message", data[:200]))
                else:
                    o.tokens = (j.get("usage") or {}).get("completion_tokens")
                    choice = j["choices"][0]
                    o.text = choice.get("text") if "text" in choice else choice["message"].get("content") or ""
                return
            events = 0
            while True:
                if time.monotonic() - o.start > self.args.deadline:
                    raise TimeoutError("past the deadline")
                line = resp.readline()
                if not line:
                    o.error = o.error or "stream ended without [DONE]"
                    return
                line = line.strip()
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    return
                ev = json.loads(data)
                if "error" in ev:
                    o.error = str(ev["error"].get("message"))
                    continue
                if ev.get("usage"):
                    o.tokens = ev["usage"].get("completion_tokens")
                if ev.get("choices"):
                    choice = ev["choices"][0]
                    o.text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
                events += 1
                if disconnect_after and events >= disconnect_after:
                    o.error = "disconnected by the client"
                    return
        except (TimeoutError, OSError) as e:  # socket.timeout is an OSError/TimeoutError
            if isinstance(e, TimeoutError) or "timed out" in str(e):
                o.stuck = True
            o.error = o.error or "%s: %s" % (type(e).__name__, e)
        except (ValueError, KeyError, http.client.HTTPException) as e:
            o.error = o.error or "%s: %s" % (type(e).__name__, e)
        finally:
            conn.close()
            o.end = time.monotonic()

    def completion(self, prompt, max_tokens, stream):
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def probe(self, i, stream):
        o = Outcome("probe", probe=i)
        self.call(o, "/v1/completions", self.completion(PROBES[i], self.args.probe_tokens, stream), stream)
        return o

    def one(self, rng):
        r = rng.random()
        stream = rng.random() < 0.5
        if r < 0.25:
            return self.probe(rng.randrange(len(PROBES)), stream)
        if r < 0.35:  # a client that leaves mid-stream
            o = Outcome("disconnect", expect="any")
            prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 60)))
            self.call(o, "/v1/completions", self.completion(prompt, 200, True), True,
                      disconnect_after=rng.randint(1, 4))
            return o
        if r < 0.45:
            fault = rng.choice(FAULTS_THAT_FAIL + ("slow_push",))
            if fault in INTEGRITY_FAULTS:
                with self.cond:
                    if self.chaos_active:
                        fault = "slow_push"
                    else:
                        self.integrity_in_flight += 1
            o = Outcome("fault", fault=fault, expect="error" if fault in FAULTS_THAT_FAIL else "ok")
            prompt = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 40)))
            try:
                self.call(o, "/v1/completions", self.completion(prompt, rng.randint(4, 24), stream), stream,
                          fault=fault)
            finally:
                if fault in INTEGRITY_FAULTS:
                    with self.cond:
                        self.integrity_in_flight -= 1
                        self.cond.notify_all()
            return o
        if r < 0.48:  # bad input: a clear 400, nothing else disturbed
            o = Outcome("bad", expect="400")
            bad = rng.choice(["{not json", json.dumps({"model": self.model, "prompt": "x", "max_tokens": 1 << 22}),
                              json.dumps({"model": self.model, "messages": "not a list"})])
            self.call(o, "/v1/chat/completions" if "messages" in bad else "/v1/completions", bad, False)
            return o
        o = Outcome("load")
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 150)))
        if rng.random() < 0.5:
            body = {"model": self.model, "messages": [{"role": "user", "content": words}],
                    "max_tokens": rng.randint(4, 64), "temperature": rng.choice([0, 0.7]), "stream": stream}
            self.call(o, "/v1/chat/completions", body, stream)
        else:
            self.call(o, "/v1/completions", self.completion(words, rng.randint(4, 64), stream), stream)
        return o

    def worker(self, index):
        rng = random.Random(self.args.seed * 1000 + index)
        while not self.stop.is_set():
            o = self.one(rng)
            with self.lock:
                self.outcomes.append(o)

    # -- chaos --------------------------------------------------------------------------------
    def chaos_loop(self):
        rng = random.Random(self.args.seed + 7)
        while not self.stop.wait(rng.uniform(self.args.chaos_min_s, self.args.chaos_max_s)):
            label = rng.choice(self.agents)
            action = "kill" if rng.random() < 0.7 else "freeze"
            with self.cond:
                self.chaos_active = True
                self.cond.wait_for(lambda: self.integrity_in_flight == 0)
            start = time.monotonic()
            info = self.ready()
            pid = info["pids"][label]
            if action == "kill":
                # The incarnation's integrity counts, read last: nothing that counts is in flight.
                try:
                    text = self.scrape(label)
                    self.counters.setdefault(label, []).append(self.integrity_count(text))
                except OSError as e:
                    print("soak: could not scrape %s before the kill: %s" % (label, e), flush=True)
                    self.counters.setdefault(label, []).append(float("nan"))
                restarts = info["restarts"][label]
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 120
                while self.ready()["restarts"][label] == restarts or not self.agent_ready(label):
                    if time.monotonic() > deadline:
                        print("soak: %s did not come back within 120 s" % label, flush=True)
                        break
                    time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGSTOP)
                time.sleep(rng.uniform(1.0, 5.0))
                os.kill(pid, signal.SIGCONT)
            # The router notices a member back (its status poll) before integrity faults resume.
            time.sleep(2.0)
            end = time.monotonic()
            with self.lock:
                self.chaos.append((start, end, action, label))
            print("soak: t=%.0fs %s %s (%.1f s)" % (start - self.t0, action, label, end - start), flush=True)
            with self.cond:
                self.chaos_active = False
                self.cond.notify_all()

    def memory_loop(self):
        while not self.stop.wait(2.0):
            pids = self.ready()["pids"]
            for label in self.agents:
                rss = rss_bytes(pids[label])
                if rss is None:
                    continue
                with self.lock:
                    series = self.rss.setdefault(label, [])
                    if series and series[-1][0] == pids[label]:
                        series[-1] = (pids[label], max(series[-1][1], rss))
                    else:
                        series.append((pids[label], rss))

    # -- the run ------------------------------------------------------------------------------
    def run(self):
        self.start_stack()
        self.t0 = time.monotonic()
        # The known outputs, on the quiet stack, one probe at a time; asked twice, they must agree.
        for i in range(len(PROBES)):
            first, second = self.probe(i, False), self.probe(i, True)
            if first.status != 200 or second.status != 200 or first.text != second.text or first.error:
                raise SystemExit("probe %d is not repeatable on the quiet stack: %r / %r %s %s" % (
                    i, first.text, second.text, first.error, second.error))
            self.known[i] = first.text
        workers = [threading.Thread(target=self.worker, args=(i,), daemon=True) for i in range(self.args.workers)]
        for w in workers:
            w.start()
        memory = threading.Thread(target=self.memory_loop, daemon=True)
        memory.start()
        # Warm-up: load without chaos; each agent's RSS afterwards is its baseline.
        time.sleep(min(60.0, self.args.minutes * 60 / 4))
        pids = self.ready()["pids"]
        for label in self.agents:
            self.rss_baseline[label] = rss_bytes(pids[label])
        chaos = threading.Thread(target=self.chaos_loop, daemon=True)
        chaos.start()
        end = self.t0 + self.args.minutes * 60
        last = time.monotonic()
        while time.monotonic() < end:
            time.sleep(min(5.0, max(0.0, end - time.monotonic())))
            if time.monotonic() - last >= 60:
                last = time.monotonic()
                with self.lock:
                    done = len(self.outcomes)
                print("soak: t=%.0fs %d requests done, %d chaos events" % (last - self.t0, done, len(self.chaos)),
                      flush=True)
            if self.proc.poll() is not None:
                print("soak: tandem local exited (%s)" % self.proc.returncode, flush=True)
                break
        self.stop.set()
        chaos.join(timeout=180)
        for w in workers:
            w.join(timeout=self.args.deadline + 30)
        memory.join(timeout=10)
        self.wall = time.monotonic() - self.t0
        return self.check()

    def idle_state(self):
        """Per agent: (running, waiting, used tokens, prefix-cache tokens, integrity count)."""
        state = {}
        for label in self.agents:
            text = self.scrape(label)
            state[label] = {
                "running": metric_sum(text, "tandem_requests_running"),
                "waiting": metric_sum(text, "tandem_requests_waiting"),
                "used_tokens": metric_sum(text, "tandem_kv_cache_used_tokens"),
                "prefix_cache_tokens": metric_sum(text, "tandem_prefix_cache_tokens"),
                "integrity": self.integrity_count(text),
            }
        return state

    def check(self):
        report = {"minutes": self.wall / 60, "seed": self.args.seed, "workers": self.args.workers}
        stack_alive = self.proc.poll() is None
        # 4. leaks: idle within 30 s of the load's end.
        state, deadline = {}, time.monotonic() + 30
        while stack_alive:
            try:
                state = self.idle_state()
            except OSError:
                state = {}
            quiet = state and all(s["running"] == 0 and s["waiting"] == 0 and
                                  s["used_tokens"] == s["prefix_cache_tokens"] for s in state.values())
            if quiet or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        leaked = {label: s["used_tokens"] - s["prefix_cache_tokens"] for label, s in state.items()}
        busy = {label: s["running"] + s["waiting"] for label, s in state.items()}
        # 1-3: the outcomes.
        outcomes = self.outcomes
        by_kind = {}
        for o in outcomes:
            by_kind[o.kind] = by_kind.get(o.kind, 0) + 1
        chaos = self.chaos

        def chaos_during(o):
            return any(s - 1.0 <= o.end and o.start <= e for s, e, _, _ in chaos)

        def first_token_only(o):
            # The first token ended the request (an end-of-sequence token): the prefill agent
            # answered it alone, no KV was transferred, so a transfer fault had nothing to hit.
            return o.status == 200 and not o.error and o.tokens == 1

        wrong_probes, unexplained, stuck = [], [], []
        completed_probes = 0
        ok = failed = 0
        for o in outcomes:
            if o.stuck or (o.end - o.start) > self.args.deadline:
                stuck.append(o)
            good = o.status == 200 and not o.error
            ok += good
            failed += not good
            if o.kind == "probe" and good:
                completed_probes += 1
                if o.text != self.known[o.probe]:
                    wrong_probes.append({"probe": o.probe, "got": o.text, "known": self.known[o.probe]})
            expected = {"any": True, "ok": good, "error": not good or first_token_only(o),
                        "400": o.status == 400}[o.expect]
            if not expected and not chaos_during(o):
                unexplained.append({"kind": o.kind, "fault": o.fault, "status": o.status, "error": o.error[:200],
                                    "t": round(o.start - self.t0, 1)})
        # 5. integrity: ended incarnations plus the live ones.
        injected = sum(1 for o in outcomes if o.fault in INTEGRITY_FAULTS and not first_token_only(o))
        counted = sum(sum(v) for v in self.counters.values()) + sum(s["integrity"] for s in state.values())
        # 6. memory.
        memory = {}
        over = {}
        for label, series in self.rss.items():
            base = self.rss_baseline.get(label) or (series[0][1] if series else 0)
            bound = base * (1 + self.args.memory_growth) + 64 * 2**20
            peak = max(r for _, r in series)
            memory[label] = {"baseline_mib": round(base / 2**20, 1), "peak_mib": round(peak / 2**20, 1),
                             "bound_mib": round(bound / 2**20, 1), "incarnations": len(series)}
            if peak > bound:
                over[label] = memory[label]
        kills = sum(1 for c in chaos if c[2] == "kill")
        freezes = sum(1 for c in chaos if c[2] == "freeze")
        faults = {}
        for o in outcomes:
            if o.fault:
                faults[o.fault] = faults.get(o.fault, 0) + 1
        report.update({
            "requests": len(outcomes), "ok": ok, "failed": failed, "by_kind": by_kind, "faults": faults,
            "kills": kills, "freezes": freezes, "restarts": self.ready()["restarts"] if stack_alive else None,
            "probes_completed": completed_probes, "probes_wrong": len(wrong_probes),
            "stuck": len(stuck), "unexplained_failures": len(unexplained),
            "leaked_tokens": leaked, "busy_at_end": busy,
            "integrity_injected": injected, "integrity_counted": counted, "memory": memory,
            "faults_ended_at_first_token": sum(1 for o in outcomes if o.fault and first_token_only(o)),
        })
        checks = {
            "stack alive": stack_alive,
            "every completed probe right": completed_probes > 0 and not wrong_probes,
            "0 stuck past the deadline": not stuck,
            "0 unexplained failures": not unexplained,
            "0 leaked pages, nothing running": bool(state) and not any(leaked.values()) and not any(busy.values()),
            "integrity aborts == injected": counted == injected,
            "memory within bound": not over,
        }
        report["checks"] = checks
        print("\nsoak: %.1f min, %d requests (%d ok, %d failed) %s" % (report["minutes"], len(outcomes), ok, failed,
                                                                      json.dumps(by_kind)))
        print("soak: chaos: %d kills, %d freezes; restarts %s" % (kills, freezes, json.dumps(report["restarts"])))
        print("soak: faults sent %s (%d of them ended at their first token: nothing to transfer)" % (
            json.dumps(faults), report["faults_ended_at_first_token"]))
        print("soak: probes %d completed, %d wrong; %d stuck; %d unexplained failures" % (
            completed_probes, len(wrong_probes), len(stuck), len(unexplained)))
        print("soak: integrity: %d injected, %s counted; leaked tokens %s; busy %s" % (
            injected, counted, json.dumps(leaked), json.dumps(busy)))
        print("soak: memory %s" % json.dumps(memory))
        for w in wrong_probes[:5]:
            print("soak: WRONG PROBE %s" % json.dumps(w))
        for u in unexplained[:10]:
            print("soak: UNEXPLAINED %s" % json.dumps(u))
        for name, passed in checks.items():
            print("soak: %-34s %s" % (name, "ok" if passed else "FAILED"))
        report["wrong_probes"] = wrong_probes[:20]
        report["unexplained"] = unexplained[:50]
        if self.args.report:
            with open(self.args.report, "w") as f:
                json.dump(report, f, indent=1)
        return all(checks.values())

    def close(self):
        if self.stack:
            self.stack.stop(signal.SIGTERM, 60)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tandem", default=os.environ.get("TANDEM_BIN", ""))
    p.add_argument("--model", required=True)
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--deadline", type=float, default=90.0, help="seconds a request may take, answered or not")
    p.add_argument("--probe-tokens", type=int, default=16)
    p.add_argument("--chaos-min-s", type=float, default=15.0)
    p.add_argument("--chaos-max-s", type=float, default=40.0)
    p.add_argument("--memory-growth", type=float, default=0.25)
    p.add_argument("--report", default="")
    p.add_argument("--local-arg", action="append", default=[],
                   help="one more `tandem local` flag (repeatable), e.g. --local-arg=--no-transfer-checksum "
                        "to see the soak catch what the checksum catches")
    args = p.parse_args()
    if not args.tandem:
        raise SystemExit("--tandem or TANDEM_BIN: the tandem binary")
    soak = Soak(args)
    passed = False
    try:
        passed = soak.run()
    finally:
        soak.close()
        if not passed and soak.stack:
            print("soak: tandem local's log (tail):\n" + soak.stack.final_output[-6000:], flush=True)
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
