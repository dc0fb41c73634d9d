"""The built-in autoscaler in a simulated cluster (issue #17): kube-sim, the real kubectl and
tandem-controller (--autoscale-interval 1), and a fake agent on each decode pod's own loopback IP
serving the metrics port (9400) with values from a load trace: the load L(t), in requests, is
split over the Ready replicas; a replica holds CAPACITY of them in its KV cache
(tandem_kv_cache_usage_ratio = held / CAPACITY) and queues the rest (tandem_requests_waiting).
A decode pod turns Ready STARTUP_S after it appears (loading weights).

  TraceTest   idle, ramp up, a plateau oscillating around the target (a square wave between two
              and three replicas' worth), a burst that the GPU budget caps at 3 replicas and, once
              the budget is raised, maxReplicas at 4, ramp down, idle. Asserts: spec.replicas of
              the ModelPool and the StatefulSet (every value, from watches) never exceed
              maxReplicas or the budget in force; the count expected at the end of each phase is
              reached within the phase (the window plus a few intervals); the decisions are the
              expected sequence, and two decisions in opposite directions are at least the second
              one's window apart; every decision has its ScaledUp/ScaledDown Event, the Events per
              direction equal tandem_autoscaler_decisions_total and status.autoscaler.lastScale
              is the last Event.

  RouterLatencyTest  the deployment's router pod scraped for the latency signals: a decode pool
              below its KV and queue targets scales up on the router's ITL p95 alone.

Prints a timeline (t, phase, load, ready, spec.replicas, decision), also written to
$AUTOSCALE_SIM_OUT when set; docs/autoscaling.md ("Simulation") quotes its figures.

Run: TANDEM_CONTROLLER=build/controller/tandem-controller python3 tests/controller/test_autoscale_sim.py
"""

import calendar
import collections
import http.server
import json
import os
import re
import socket
import threading
import time
import unittest

from e2e_lib import API, REPO, Cluster, wait_for
from sim_testlib import WatchStream

NS, NAME = "default", "sim"
POOL = NAME + "-decode"
UP_S, DOWN_S = 2, 6  # spec.decode.autoscaling's stabilization windows
MAX_REPLICAS = 4
BUDGET, RAISED_BUDGET = 4, 5  # GPUs; prefill holds 1, each decode replica 1
STARTUP_S = 1.0
CAPACITY = 10  # requests one replica's KV cache holds; at the 0.8 target, 8 per replica
METRICS_PORT = 9400  # the agent container's port named "metrics" (controller/reconcile/objects.h)
REVERSAL_SLACK_S = 1.0  # the decisions are seen through a watch: their lags may differ by this much

# name, start s, end s, load at the start and at the end (linear), decode replicas due by the end.
PHASES = [
    ("idle", 0, 3, 4, 4, 1),
    ("ramp up", 3, 9, 4, 20, None),
    ("hold", 9, 15, 20, 20, 3),
    ("plateau low", 15, 25, 12, 12, 2),
    ("plateau high", 25, 31, 20, 20, 3),
    ("plateau low", 31, 41, 12, 12, 2),
    ("burst", 41, 46, 48, 48, 3),  # the budget: 4 GPUs less prefill's 1
    ("burst, budget 5", 46, 52, 48, 48, MAX_REPLICAS),
    ("ramp down", 52, 58, 48, 4, None),
    ("idle", 58, 70, 4, 4, 1),
]
BUDGET_RAISED_AT = 46
TRACE_END = PHASES[-1][2]
# (from, to) of every decision the trace leads to, and the reasons of the burst's two.
EXPECTED = [(1, 2), (2, 3), (3, 2), (2, 3), (3, 2), (2, 3), (3, 4), (4, 3), (3, 2), (2, 1)]
BURST_STEPS, BURST_REASONS = [(2, 3), (3, 4)], ["GpuBudget", "AtMax"]

MODEL_DEPLOYMENT = {
    "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": NAME},
    "spec": {
        "model": {"name": "tandem/tiny", "dummy": {"preset": "tiny", "seed": 1}},
        "gpuBudget": BUDGET,
        "router": {"replicas": 1},
        "prefill": {"replicas": 1, "resources": {"limits": {"nvidia.com/gpu": 1}}},
        "decode": {"replicas": 1, "resources": {"limits": {"nvidia.com/gpu": 1}},
                   "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": MAX_REPLICAS,
                                   "scaleUpDelaySeconds": UP_S, "scaleDownDelaySeconds": DOWN_S}},
    },
}
POOLS = API % NS + "modelpools"
PODS = "/api/v1/namespaces/%s/pods?labelSelector=tandem.dev/deployment%%3D%s,tandem.dev/pool%%3Ddecode" % (NS, NAME)


def phase_at(t):
    for p in PHASES:
        if t < p[2]:
            return p
    return PHASES[-1]


def load_at(t):
    _, start, end, l0, l1, _ = phase_at(t)
    return l0 + (l1 - l0) * min(max((t - start) / (end - start), 0.0), 1.0)


class FakeAgents:
    """One HTTP server per decode pod on <podIP>:9400, answering GET /metrics with the agents'
    series (labels deployment, pool, role) for this instant's share of the load."""

    def __init__(self, clock):
        self.clock = clock  # seconds since the trace started
        self.servers = {}  # pod uid -> server
        self.ready = 0
        self.scrapes = 0
        self.lock = threading.Lock()

    def exposition(self):
        with self.lock:
            self.scrapes += 1
            share = load_at(self.clock()) / max(self.ready, 1)
        held = min(share, CAPACITY)
        labels = '{deployment="%s",pool="decode",role="decode"}' % NAME
        lines = ["# TYPE tandem_kv_cache_usage_ratio gauge",
                 "tandem_kv_cache_usage_ratio%s %.4f" % (labels, held / CAPACITY),
                 "# TYPE tandem_requests_running gauge",
                 "tandem_requests_running%s %.4f" % (labels, held),
                 "# TYPE tandem_requests_waiting gauge",
                 "tandem_requests_waiting%s %.4f" % (labels, share - held),
                 # The router observes the latencies: a decode agent's histogram stays empty.
                 "# TYPE tandem_inter_token_latency_seconds histogram"]
        for le in ("0.01", "0.05", "0.1", "+Inf"):
            lines.append('tandem_inter_token_latency_seconds_bucket{deployment="%s",pool="decode",role="decode",'
                         'le="%s"} 0' % (NAME, le))
        lines += ["tandem_inter_token_latency_seconds_sum%s 0" % labels,
                  "tandem_inter_token_latency_seconds_count%s 0" % labels]
        return ("\n".join(lines) + "\n").encode()

    def start(self, uid, ip, exposition=None):
        """A server on ip:9400 whose /metrics is exposition() (the decode share by default)."""
        exposition = exposition or self.exposition

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = exposition() if self.path == "/metrics" else b"not found\n"
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer((ip, METRICS_PORT), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.servers[uid] = server

    def stop(self, uid):
        server = self.servers.pop(uid)
        server.shutdown()
        server.server_close()

    def stop_all(self):
        for uid in list(self.servers):
            self.stop(uid)


class ReplicaWatch:
    """Every spec.replicas an object takes, with the monotonic time the watch delivered it."""

    def __init__(self, sim, path, name):
        self.changes = []  # [(monotonic s, replicas)]
        self.stream = WatchStream(sim, path + "?watch=true&fieldSelector=metadata.name%3D" + name, timeout=600)
        self.sock = self.stream.conn.sock
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        try:
            while (ev := self.stream.next()) is not None:
                replicas = ev["object"].get("spec", {}).get("replicas")
                if not self.changes or self.changes[-1][1] != replicas:
                    self.changes.append((time.monotonic(), replicas))
        except (OSError, ValueError, AttributeError):
            pass  # closed by stop() (http.client drops its file object: AttributeError)

    def stop(self):
        # Shut the socket down first: close() alone waits for the reader blocked on it.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.stream.close()


def scale_events(cluster):
    """The pool's ScaledUp/ScaledDown Events, in the order of their first occurrence:
    [(from, to, reason, event)]. A decision repeated within ten minutes is one event with a count
    (controller/reconcile/events.h), as client-go aggregates."""
    out = []
    for e in cluster.items("/api/v1/namespaces/%s/events" % NS):
        if e["involvedObject"].get("name") != POOL or e.get("reason") not in ("ScaledUp", "ScaledDown"):
            continue
        m = re.match(r"decode (\d+) -> (\d+): (\w+): ", e["message"])
        if not m:
            raise AssertionError("unexpected %s message: %s" % (e["reason"], e["message"]))
        out.append((int(m.group(1)), int(m.group(2)), m.group(3), e))
    return sorted(out, key=lambda x: x[3]["firstTimestamp"])


def decision_metrics(metrics):
    """{direction: count} of tandem_autoscaler_decisions_total for the decode pool."""
    out = {}
    for series, value in metrics.items():
        if series.startswith("tandem_autoscaler_decisions_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', series))
            if labels.get("deployment") == NAME and labels.get("pool") == "decode":
                out[labels["direction"]] = out.get(labels["direction"], 0) + int(value)
    return out


class TraceTest(unittest.TestCase):
    def setUp(self):
        self.cluster = Cluster()
        self.addCleanup(self.cluster.stop)
        self.agents = FakeAgents(lambda: time.monotonic() - self.t0)
        self.addCleanup(self.agents.stop_all)
        self.t0 = time.monotonic()

    def sync_pods(self, first_seen):
        """Decode pods: Ready STARTUP_S after they appear, a fake agent on each pod's IP while it
        exists. Returns (pods, ready)."""
        c = self.cluster
        pods = [p for p in c.items(PODS) if not p["metadata"].get("deletionTimestamp")]
        now = time.monotonic()
        uids = set()
        due = []
        ready = 0
        for p in pods:
            uid, ip = p["metadata"]["uid"], p.get("status", {}).get("podIP")
            if not ip:
                continue
            uids.add(uid)
            first_seen.setdefault(uid, now)
            if uid not in self.agents.servers:
                self.agents.start(uid, ip)
            if any(x["type"] == "Ready" and x["status"] == "True" for x in p["status"].get("conditions", [])):
                ready += 1
            elif now - first_seen[uid] >= STARTUP_S:
                due.append(p["metadata"]["name"])
        for uid in set(self.agents.servers) - uids:
            self.agents.stop(uid)
        if due:
            c.sim.ok("POST", "/sim/pods-ready", {"namespace": NS, "names": due, "ready": True, "sticky": False})
            ready += len(due)
        with self.agents.lock:
            self.agents.ready = ready
        return pods, ready

    def test_replicas_follow_the_trace(self):
        c = self.cluster
        c.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "crds"))
        c.pods_ready("tandem.dev/deployment=%s,tandem.dev/pool!=decode" % NAME)  # prefill, router
        pool_watch = ReplicaWatch(c.sim, POOLS, POOL)
        sts_watch = ReplicaWatch(c.sim, "/apis/apps/v1/namespaces/%s/statefulsets" % NS, POOL)
        self.addCleanup(pool_watch.stop)
        self.addCleanup(sts_watch.stop)
        ctl = c.start_controller("--leader-elect=false", "--autoscale-interval", "1", "--scrape-timeout-ms", "500")
        c.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(MODEL_DEPLOYMENT))

        # One Ready decode replica, scraped: the planner has a recommendation from its signals.
        first_seen = {}

        def measured():
            self.t0 = time.monotonic()  # the fake agents serve the idle load meanwhile
            self.sync_pods(first_seen)
            st = (c.get(POOLS + "/" + POOL) or {}).get("status", {}).get("autoscaler", {})
            return st.get("reason") not in (None, "NoSignals", "NoReadyReplicas")

        wait_for(measured, 60, "the decode pool scraped and planned")

        # The trace: sample every 0.2 s, raise the budget on time.
        self.t0 = start = time.monotonic()
        self.start_wall = time.time()
        samples = []  # (t, load, ready, pool spec.replicas, statefulset spec.replicas)
        raised_at = None
        while (t := time.monotonic() - start) < TRACE_END:
            if raised_at is None and t >= BUDGET_RAISED_AT:
                c.sim.ok("PATCH", API % NS + "modeldeployments/" + NAME, {"spec": {"gpuBudget": RAISED_BUDGET}},
                         ctype="application/merge-patch+json")
                raised_at = time.monotonic()
            _, ready = self.sync_pods(first_seen)
            pool = c.get(POOLS + "/" + POOL)
            sts = c.get("/apis/apps/v1/namespaces/%s/statefulsets/%s" % (NS, POOL))
            samples.append((t, load_at(t), ready, pool["spec"]["replicas"], sts["spec"]["replicas"]))
            time.sleep(0.2)
        wall_s = time.monotonic() - start
        time.sleep(1.5)  # the last decision's Event and status land

        decisions = [(ts - start, a, b) for (_, a), (ts, b) in zip(pool_watch.changes, pool_watch.changes[1:])]
        events = scale_events(c)
        metrics = decision_metrics(c.metrics(ctl))
        last_scale = c.get(POOLS + "/" + POOL)["status"]["autoscaler"].get("lastScale")
        report = self.report(samples, decisions, events, wall_s)
        print(report)
        if os.environ.get("AUTOSCALE_SIM_OUT"):
            with open(os.environ["AUTOSCALE_SIM_OUT"], "w") as f:
                f.write(report)
        why = "\n" + report + "\ncontroller log tail:\n" + c.controller_log(ctl)[-3000:]

        # Never past maxReplicas or the budget in force (prefill's pool holds one GPU).
        for name, watch in (("ModelPool", pool_watch), ("StatefulSet", sts_watch)):
            for ts, replicas in watch.changes:
                budget = BUDGET if raised_at is None or ts < raised_at else RAISED_BUDGET
                self.assertLessEqual(replicas, MAX_REPLICAS, "%s at %.1f s%s" % (name, ts - start, why))
                self.assertLessEqual(replicas + 1, budget, "%s at %.1f s over the budget%s" % (name, ts - start, why))
        # The StatefulSet takes every value the pool does, in order.
        self.assertEqual([r for _, r in sts_watch.changes], [r for _, r in pool_watch.changes], why)
        self.assertEqual(c.get(POOLS + "/" + NAME + "-prefill")["spec"]["replicas"], 1)

        # Each phase's count is reached within the phase and held at its end.
        for name, _, p_end, _, _, want in PHASES:
            if want is None:
                continue
            at_end = [s for s in samples if s[0] < p_end][-1]
            self.assertEqual((name, at_end[3], at_end[4]), (name, want, want), "at %.1f s%s" % (at_end[0], why))

        # The decisions the trace leads to, opposite ones at least the second's window apart.
        self.assertEqual([(a, b) for _, a, b in decisions], EXPECTED, why)
        for (t1, a1, b1), (t2, a2, b2) in zip(decisions, decisions[1:]):
            if (b1 > a1) != (b2 > a2):
                window = DOWN_S if b2 < a2 else UP_S
                self.assertGreaterEqual(t2 - t1, window - REVERSAL_SLACK_S, "reversal at %.1f s%s" % (t2, why))

        # Every decision has its Event (a repeat adds to an event's count); the counter agrees;
        # lastScale is the latest one.
        counted = collections.Counter()
        for a, b, _, e in events:
            self.assertEqual(e["reason"], "ScaledUp" if b > a else "ScaledDown")
            counted[(a, b)] += e.get("count", 1)
        self.assertEqual(counted, collections.Counter(EXPECTED), why)
        for step, reason in zip(BURST_STEPS, BURST_REASONS):
            self.assertIn(reason, [r for a, b, r, _ in events if (a, b) == step], why)
        by_direction = {"up": sum(1 for a, b in EXPECTED if b > a), "down": sum(1 for a, b in EXPECTED if b < a)}
        self.assertEqual(metrics, by_direction, why)
        self.assertEqual({k: last_scale[k] for k in ("direction", "from", "to")},
                         {"direction": "down", "from": EXPECTED[-1][0], "to": EXPECTED[-1][1]})
        latest = [e for a, b, r, e in events if (a, b, r) == (last_scale["from"], last_scale["to"],
                                                               last_scale["reason"])]
        self.assertEqual(len(latest), 1, why)
        self.assertLessEqual(abs(parse_rfc3339(last_scale["time"]) - parse_rfc3339(latest[0]["lastTimestamp"])), 1)
        self.assertGreater(self.agents.scrapes, TRACE_END)  # about one per ready pod per second
        self.assertIsNone(ctl.poll(), "the controller died" + why)

    def reason_of(self, events, t, a, b):
        """The reason of the decision a -> b taken t s into the trace: its event's, the latest one
        for that step first seen by then (events carry whole seconds)."""
        wall = self.start_wall + t
        seen = [r for x, y, r, e in events if (x, y) == (a, b) and parse_rfc3339(e["firstTimestamp"]) <= wall + 1]
        return seen[-1] if seen else "?"

    def report(self, samples, decisions, events, wall_s):
        """The timeline (a row every 2 s and one per decision) and the figures docs/autoscaling.md
        quotes."""
        rows = ["%6s  %-16s %5s %5s %5s %4s  %s" % ("t (s)", "phase", "load", "ready", "spec", "sts", "decision")]
        reasons = [self.reason_of(events, t, a, b) for t, a, b in decisions]
        pending = list(zip(decisions, reasons))
        next_row = 0.0
        for t, load, ready, spec, sts in samples:
            notes = []
            while pending and pending[0][0][0] <= t:
                (_, a, b), reason = pending.pop(0)
                notes.append("%s %d->%d %s" % ("up" if b > a else "down", a, b, reason))
            if notes or t >= next_row:
                rows.append("%6.1f  %-16s %5.1f %5d %5d %4d  %s" % (t, phase_at(t)[0], load, ready, spec, sts,
                                                                    "; ".join(notes)))
            while next_row <= t:
                next_row += 2.0
        lines = ["", "Simulation timeline (windows: up %d s, down %d s; interval 1 s; startup %.0f s)" %
                 (UP_S, DOWN_S, STARTUP_S)] + rows
        lines.append("\nEach phase's count: the decision that reached it, from the load change that called for it:")
        for i, (name, p_start, p_end, _, _, want) in enumerate(PHASES):
            if want is None:
                continue
            cause = PHASES[i - 1][1] if i > 0 and PHASES[i - 1][5] is None else p_start
            hit = [t for t, _, b in decisions if cause <= t < p_end and b == want]
            lines.append("  %-16s %d replicas: %s" % (name, want, "%.1f s after the change at %d s" % (
                hit[-1] - cause, cause) if hit else "held from before"))
        ups = sum(1 for _, a, b in decisions if b > a)
        lines.append("decisions: %d (%d up, %d down); replicas visited: 1 %s; trace %.0f s" % (
            len(decisions), ups, len(decisions) - ups, " ".join(str(b) for _, _, b in decisions), wall_s))
        return "\n".join(lines) + "\n"


class RouterLatencyTest(unittest.TestCase):
    """The deployment's router is scraped for the latency signals (only it observes TTFT and ITL):
    a decode pool whose KV cache and queue are below target, with targetITLSeconds 0.05, scales up
    on the router's ITL p95 alone (reason ItlAboveTarget), and not before the router reports."""

    def test_router_itl_scales_the_decode_pool(self):
        c = Cluster()
        self.addCleanup(c.stop)
        agents = FakeAgents(lambda: 0.0)  # the idle load: KV cache usage 0.4, nothing waiting
        self.addCleanup(agents.stop_all)
        agents.ready = 1
        md = json.loads(json.dumps(MODEL_DEPLOYMENT))
        md["spec"]["decode"]["autoscaling"].update({"targetITLSeconds": 0.05, "scaleUpDelaySeconds": 0})
        c.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "crds"))
        ctl = c.start_controller("--leader-elect=false", "--autoscale-interval", "1", "--scrape-timeout-ms", "500")
        c.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(md))
        pods = "/api/v1/namespaces/%s/pods" % NS

        def pod_ip(selector):
            for p in c.items(pods + "?labelSelector=" + selector):
                if p.get("status", {}).get("podIP"):
                    return p["metadata"]["uid"], p["status"]["podIP"]
            return None

        decode = wait_for(lambda: pod_ip("tandem.dev/pool%3Ddecode"), 30, "the decode pod")
        router = wait_for(lambda: pod_ip("app.kubernetes.io/component%3Drouter"), 30, "the router pod")
        agents.start(*decode)
        # Ready: the pods there now only (a new decode pod stays Pending, so the pool stops at 2).
        names = [p["metadata"]["name"] for p in c.items(pods)]
        c.sim.ok("POST", "/sim/pods-ready", {"namespace": NS, "names": names, "ready": True, "sticky": False})

        def planned():
            st = (c.get(POOLS + "/" + POOL) or {}).get("status", {}).get("autoscaler", {})
            return st.get("reason") in ("AtTarget", "BelowTargets", "AtMin")

        # The members alone (usage 0.4 of the 0.8 target): one replica is enough.
        wait_for(planned, 30, "the decode pool planned on its members' gauges")
        self.assertEqual(c.get(POOLS + "/" + POOL)["spec"]["replicas"], 1)

        # The router: 100 more inter-token latencies in (0.05, 0.1] per scrape, p95 0.0975 s.
        scrapes = [0]

        def router_exposition():
            scrapes[0] += 1
            n = 100 * scrapes[0]
            labels = 'deployment="%s",pool="router",role="router"' % NAME
            lines = ["# TYPE tandem_inter_token_latency_seconds histogram"]
            for le, count in (("0.01", 0), ("0.05", 0), ("0.1", n), ("+Inf", n)):
                lines.append('tandem_inter_token_latency_seconds_bucket{%s,le="%s"} %d' % (labels, le, count))
            lines += ["tandem_inter_token_latency_seconds_sum{%s} %g" % (labels, 0.08 * n),
                      "tandem_inter_token_latency_seconds_count{%s} %d" % (labels, n),
                      # A router's own gauges, if it had any, have no say in a pool's.
                      "# TYPE tandem_kv_cache_usage_ratio gauge",
                      "tandem_kv_cache_usage_ratio{%s} 1" % labels]
            return ("\n".join(lines) + "\n").encode()

        agents.start(router[0], router[1], router_exposition)
        try:
            wait_for(lambda: c.get(POOLS + "/" + POOL)["spec"]["replicas"] == 2, 30, "the decode pool scaled up")
        except AssertionError as e:
            raise AssertionError("%s on the router's ITL (router scraped %d times; %s)\n%s" % (
                e, scrapes[0], c.get(POOLS + "/" + POOL).get("status", {}).get("autoscaler"),
                c.controller_log(ctl)[-3000:]))
        self.assertGreaterEqual(scrapes[0], 2)  # a p95 needs an increase: two scrapes at least
        # The controller writes the pool's spec first and its ScaledUp Event after: a reader can
        # see replicas 2 a moment before the Event exists.
        events = wait_for(lambda: scale_events(c) or None, 10, "the ScaledUp event")
        self.assertEqual([(a, b, r) for a, b, r, _ in events], [(1, 2, "ItlAboveTarget")])
        self.assertIn("ITL p95", events[0][3]["message"])
        self.assertIsNone(ctl.poll(), "the controller died")


def parse_rfc3339(text):
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


if __name__ == "__main__":
    unittest.main()
