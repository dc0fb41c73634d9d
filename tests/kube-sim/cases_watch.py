"""kube-sim cases: watches, faults, stats and consistency under faults."""

import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_testlib import CMS, MDEP, SimProcess, SimTestCase, WatchStream, cm, mdep  # noqa: E402


class WatchTest(SimTestCase):
    ARGS = ("--history", "20", "--bookmark-interval", "0.05")

    def test_watch_from_resource_version(self):
        rv = self.sim.ok("GET", CMS)["metadata"]["resourceVersion"]
        self.sim.ok("POST", CMS, cm("w1", labels={"w": "yes"}))
        self.sim.ok("POST", CMS, cm("w2"))
        self.sim.ok("PATCH", CMS + "/w1", {"data": {"k": "v"}}, "application/merge-patch+json")
        self.sim.ok("DELETE", CMS + "/w1")
        w = WatchStream(self.sim, CMS + "?watch=true&timeoutSeconds=1&resourceVersion=" + rv)
        evs = w.events()
        self.assertFalse(w.cut)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                         [("ADDED", "w1"), ("ADDED", "w2"), ("MODIFIED", "w1"),
                          ("DELETED", "w1")])
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
        self.assertEqual(rvs, sorted(rvs))
        # Label-selected watch through the /watch/ path.
        w = WatchStream(self.sim, "/api/v1/watch/namespaces/default/configmaps?labelSelector="
                        "w%3Dyes&timeoutSeconds=1&resourceVersion=" + rv)
        self.assertEqual([e["type"] for e in w.events()], ["ADDED", "MODIFIED", "DELETED"])

    def test_selector_watch_sees_objects_enter_and_leave(self):
        rv = self.sim.ok("POST", CMS, cm("sel", labels={"pick": "no"}))["metadata"][
            "resourceVersion"]
        for v in ("yes", "yes", "no"):
            self.sim.ok("PATCH", CMS + "/sel", {"metadata": {"labels": {"pick": v}},
                                                "data": {"n": str(time.monotonic())}},
                        "application/merge-patch+json")
        w = WatchStream(self.sim, CMS + "?watch=1&labelSelector=pick%3Dyes&timeoutSeconds=1"
                        "&resourceVersion=" + rv)
        self.assertEqual([e["type"] for e in w.events()], ["ADDED", "MODIFIED", "DELETED"])

    def test_watch_without_resource_version_lists_first_then_streams(self):
        self.sim.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "wns"}})
        self.sim.ok("POST", "/api/v1/namespaces/wns/configmaps", cm("a"))
        w = WatchStream(self.sim, "/api/v1/namespaces/wns/configmaps?watch=1&timeoutSeconds=5")
        first = w.next()
        self.assertEqual((first["type"], first["object"]["metadata"]["name"]), ("ADDED", "a"))
        self.sim.ok("POST", "/api/v1/namespaces/wns/configmaps", cm("b"))
        self.sim.ok("POST", CMS, cm("other-namespace"))
        ev = w.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "b"))
        w.close()

    def test_bookmarks(self):
        rv = self.sim.ok("GET", CMS)["metadata"]["resourceVersion"]
        w = WatchStream(self.sim, CMS + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=5"
                        "&resourceVersion=" + rv)
        ev = w.next()
        self.assertEqual(ev["type"], "BOOKMARK")
        self.assertGreaterEqual(int(ev["object"]["metadata"]["resourceVersion"]), int(rv))
        self.assertEqual(ev["object"]["kind"], "ConfigMap")
        w.close()

    def test_too_old_resource_version_is_gone(self):
        rv = self.sim.ok("GET", CMS)["metadata"]["resourceVersion"]
        for i in range(25):  # history is 20 events
            self.sim.ok("POST", CMS, cm("old%d" % i))
        w = WatchStream(self.sim, CMS + "?watch=1&resourceVersion=" + rv)
        self.assertEqual(w.status, 200)
        ev = w.next()
        self.assertEqual(ev["type"], "ERROR")
        self.assertEqual((ev["object"]["code"], ev["object"]["reason"]), (410, "Expired"))
        self.assertIsNone(w.next())
        # Relisting gives a resourceVersion to resume from.
        rv = self.sim.ok("GET", CMS)["metadata"]["resourceVersion"]
        self.sim.ok("DELETE", CMS + "/old0")
        w = WatchStream(self.sim, CMS + "?watch=1&timeoutSeconds=1&resourceVersion=" + rv)
        self.assertEqual([e["type"] for e in w.events()], ["DELETED"])


class FaultsTest(SimTestCase):
    ARGS = ("--faults", json.dumps({"conflict_percent": 100, "seed": 1}))

    def test_faults(self):
        obj = self.sim.ok("POST", CMS, cm("f1"))  # creates are not conflicted
        code, st = self.sim.req("PUT", CMS + "/f1", obj)
        self.assertEqual((code, st["reason"]), (409, "Conflict"))
        code, _ = self.sim.req("PATCH", CMS + "/f1", {"data": {"a": "b"}},
                               "application/merge-patch+json")
        self.assertEqual(code, 409)
        self.sim.ok("POST", "/sim/faults", {"conflict_percent": 30, "seed": 7})
        codes = [self.sim.req("PATCH", CMS + "/f1", {"data": {"i": str(i)}},
                              "application/merge-patch+json")[0] for i in range(200)]
        conflicts = codes.count(409)
        self.assertEqual(codes.count(200) + conflicts, 200)
        self.assertTrue(30 <= conflicts <= 90, conflicts)  # 30% of 200, seeded
        self.sim.ok("POST", "/sim/faults", {"gone_every_events": 3})
        rv = self.sim.ok("GET", CMS)["metadata"]["resourceVersion"]
        for i in range(5):
            self.sim.ok("POST", CMS, cm("g%d" % i))
        w = WatchStream(self.sim, CMS + "?watch=1&timeoutSeconds=5&resourceVersion=" + rv)
        evs = w.events()
        self.assertEqual([e["type"] for e in evs], ["ADDED"] * 3 + ["ERROR"])
        self.assertEqual(evs[-1]["object"]["code"], 410)
        self.assertFalse(w.cut)
        self.sim.ok("POST", "/sim/faults", {"drop_watch_percent": 100})
        w = WatchStream(self.sim, CMS + "?watch=1&timeoutSeconds=5&resourceVersion=" + rv)
        self.assertEqual(len(w.events()), 1)
        self.assertTrue(w.cut, "the stream is cut without its closing chunk")
        code, _ = self.sim.req("POST", "/sim/faults", {"bogus": 1})
        self.assertEqual(code, 400)
        self.sim.ok("POST", "/sim/faults", {"latency_ms": [30, 40]})
        start = time.monotonic()
        self.sim.ok("GET", CMS + "/f1")
        self.assertGreaterEqual(time.monotonic() - start, 0.03)
        self.sim.ok("POST", "/sim/faults", {})

    def test_stats(self):
        self.sim.ok("DELETE", "/sim/stats")
        self.sim.ok("POST", "/sim/faults", {})
        self.sim.ok("POST", CMS, cm("s1"))
        self.sim.ok("GET", CMS + "/s1")
        self.sim.ok("GET", CMS)
        self.sim.ok("DELETE", CMS + "/s1")
        st = self.sim.ok("GET", "/sim/stats")
        self.assertEqual(st["by_verb"], {"create": 1, "get": 1, "list": 1, "delete": 1})
        self.assertEqual(st["by_resource"], {"configmaps": 4})
        self.assertEqual(st["writes"], 2)
        self.assertEqual(sum(n for _, n in st["writes_per_second"]), 2)
        self.assertEqual(sum(n for _, n in st["requests_per_second"]), 4)
        self.sim.req("PUT", CMS + "/nope", cm("nope"), headers={"User-Agent": "leader-b"})
        st = self.sim.ok("GET", "/sim/stats")
        self.assertEqual(st["by_user_agent"]["leader-b"], {"update": 1})
        self.assertEqual(st["by_code"]["404"], 1)


class ConsistencyUnderFaultsTest(SimTestCase):
    """Six writers (create/patch/delete/status, 30% injected conflicts) and an informer-style
    reader (list, then watch from the list's resourceVersion; relist on 410, resume after cut
    streams): once the writers stop and the reader has caught up, its cache equals the server."""
    ARGS = ("--faults", json.dumps({"conflict_percent": 30, "gone_every_events": 40,
                                    "drop_watch_percent": 3, "seed": 5}),
            "--history", "150", "--bookmark-interval", "0.1")

    def writer(self, seed, errors):
        rng = random.Random(seed)
        c = SimProcess.__new__(SimProcess)
        c.__dict__.update(self.sim.__dict__)
        c._conn = None
        for _ in range(150):
            name = "cons%d" % rng.randrange(20)
            op = rng.random()
            if op < 0.3:
                code, _ = c.req("POST", MDEP, mdep(name))
            elif op < 0.6:
                code, _ = c.req("PATCH", MDEP + "/" + name, {"spec": {"decode": {
                    "replicas": rng.randrange(5)}}}, "application/merge-patch+json")
            elif op < 0.75:
                code, _ = c.req("DELETE", MDEP + "/" + name)
            else:
                code, obj = c.req("GET", MDEP + "/" + name)
                if code == 200:
                    obj["status"] = {"observedGeneration": obj["metadata"]["generation"]}
                    code, _ = c.req("PUT", MDEP + "/" + name + "/status", obj)
            if code >= 500 or code in (400, 422):
                errors.append(code)
        if c._conn is not None:
            c._conn.close()

    def test_informer_cache_matches_server(self):
        errors = []
        writers = [threading.Thread(target=self.writer, args=(k, errors)) for k in range(6)]
        for w in writers:
            w.start()
        cache, rv, relists, target = {}, None, 0, None
        while target is None or rv is None or int(rv) < target:
            if rv is None:
                lst = self.sim.ok("GET", MDEP)
                relists += 1
                rv = lst["metadata"]["resourceVersion"]
                cache = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                         for o in lst["items"]}
            w = WatchStream(self.sim, MDEP + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=5"
                            "&resourceVersion=" + rv)
            while target is None or int(rv) < target:
                ev = w.next()
                if ev is None:
                    break  # cut or timed out: resume from rv
                if ev["type"] == "ERROR":
                    self.assertEqual(ev["object"]["code"], 410)
                    rv = None  # relist
                    break
                rv = ev["object"]["metadata"]["resourceVersion"]
                name = ev["object"]["metadata"].get("name")
                if ev["type"] == "DELETED":
                    cache.pop(name, None)
                elif ev["type"] != "BOOKMARK":
                    cache[name] = rv
                if target is None and not any(t.is_alive() for t in writers):
                    target = int(self.sim.ok("GET", MDEP)["metadata"]["resourceVersion"])
            w.close()
            if target is None and not any(t.is_alive() for t in writers):
                target = int(self.sim.ok("GET", MDEP)["metadata"]["resourceVersion"])
        server = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                  for o in self.sim.ok("GET", MDEP)["items"]}
        self.assertEqual(errors, [])
        self.assertEqual(cache, server)
        self.assertGreater(relists, 1, "the injected 410s forced relists")
        self.assertGreater(self.sim.ok("GET", "/sim/stats")["by_code"].get("409", 0), 0)
