"""Fault injection and request statistics of the simulated API server.

Faults (`--faults JSON`, `POST /sim/faults`): conflict_percent (409 Conflict on that share of
PUT/PATCH writes, status and scale included), gone_every_events (a watch stream ends with an ERROR
410 Expired event after every K events it sent), drop_watch_percent (after each event a watch
stream is cut, without its closing chunk, with that probability), latency_ms ([lo, hi]: each API
request first sleeps a uniform time in that range), seed (of the fault RNG).
"""

import collections
import random
import threading
import time

_KNOWN = {"conflict_percent", "gone_every_events", "drop_watch_percent", "latency_ms", "seed"}


class FaultError(ValueError):
    pass


class Faults:
    def __init__(self, spec=None):
        self.lock = threading.Lock()
        self.set(spec or {})

    def set(self, spec):
        if not isinstance(spec, dict):
            raise FaultError("faults must be a JSON object")
        unknown = set(spec) - _KNOWN
        if unknown:
            raise FaultError("unknown fault keys: %s" % ", ".join(sorted(unknown)))
        lat = spec.get("latency_ms", [0, 0])
        if isinstance(lat, (int, float)):
            lat = [lat, lat]
        if (not isinstance(lat, list) or len(lat) != 2 or not all(
                isinstance(x, (int, float)) and x >= 0 for x in lat) or lat[0] > lat[1]):
            raise FaultError("latency_ms must be [lo, hi] with 0 <= lo <= hi")
        for k in ("conflict_percent", "drop_watch_percent"):
            v = spec.get(k, 0)
            if not isinstance(v, (int, float)) or not 0 <= v <= 100:
                raise FaultError("%s must be a number in [0, 100]" % k)
        gone = spec.get("gone_every_events", 0)
        if not isinstance(gone, int) or gone < 0:
            raise FaultError("gone_every_events must be a non-negative integer")
        with self.lock:
            self.spec = dict(spec)
            self.conflict = float(spec.get("conflict_percent", 0))
            self.drop = float(spec.get("drop_watch_percent", 0))
            self.gone_every = gone
            self.latency = (float(lat[0]), float(lat[1]))
            self.rng = random.Random(spec.get("seed"))

    def _chance(self, percent):
        if percent <= 0:
            return False
        with self.lock:
            return self.rng.random() * 100 < percent

    def inject_conflict(self):
        return self._chance(self.conflict)

    def drop_watch(self):
        return self._chance(self.drop)

    def delay(self):
        lo, hi = self.latency
        if hi <= 0:
            return
        with self.lock:
            ms = self.rng.uniform(lo, hi)
        time.sleep(ms / 1000.0)


WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


class Stats:
    """Request counts by verb, resource, status code and User-Agent (to tell two controller
    processes apart), and requests and writes per one-second window (the last `windows` seconds
    that had any)."""

    def __init__(self, clock=time.time, windows=600):
        self.lock = threading.Lock()
        self.clock = clock
        self.windows = windows
        self.reset()

    def reset(self):
        with getattr(self, "lock", threading.Lock()):
            self.by_verb = collections.Counter()
            self.by_resource = collections.Counter()
            self.by_verb_resource = collections.Counter()
            self.by_code = collections.Counter()
            self.by_user_agent = {}  # User-Agent -> Counter(verb)
            self.writes = collections.OrderedDict()  # second -> count
            self.requests = collections.OrderedDict()
            self.total = 0
            self.started = self.clock()

    def record(self, verb, resource, code, user_agent=""):
        with self.lock:
            self.total += 1
            self.by_user_agent.setdefault(user_agent, collections.Counter())[verb] += 1
            self.by_verb[verb] += 1
            if resource:
                self.by_resource[resource] += 1
                self.by_verb_resource["%s %s" % (verb, resource)] += 1
            self.by_code[str(code)] += 1
            sec = int(self.clock())
            self.requests[sec] = self.requests.get(sec, 0) + 1
            while len(self.requests) > self.windows:
                self.requests.popitem(last=False)
            if verb in WRITE_VERBS:
                self.writes[sec] = self.writes.get(sec, 0) + 1
                while len(self.writes) > self.windows:
                    self.writes.popitem(last=False)

    def snapshot(self):
        with self.lock:
            windows = [[s, n] for s, n in self.writes.items()]
            return {"total": self.total, "by_verb": dict(self.by_verb),
                    "by_resource": dict(self.by_resource),
                    "by_verb_resource": dict(self.by_verb_resource),
                    "by_code": dict(self.by_code),
                    "by_user_agent": {ua: dict(c) for ua, c in self.by_user_agent.items()},
                    "writes": sum(n for _, n in windows),
                    "writes_per_second": windows,
                    "max_writes_per_second": max([n for _, n in windows] or [0]),
                    "requests_per_second": [[s, n] for s, n in self.requests.items()],
                    "since": self.started}
