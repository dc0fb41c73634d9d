"""tandem-controller under faults: kube-sim answers 30% of updates with 409 Conflict, ends each
watch with 410 Gone every 500 events and cuts watch connections at random, and the controller is
SIGKILLed and restarted after every 100 writes until it has converged anyway. 100
ModelDeployments must converge (Ready, observedGeneration == generation on every deployment and
pool), a spec change to all of them must converge again (so the caches the controller rebuilt by
relisting track the server), a converged cluster must see no reconcile writes, the reconcile
clients must stay within their token buckets, and deleting half of them must leave no orphans.

Run: TANDEM_CONTROLLER=build-x/controller/tandem-controller .venv/bin/python tests/controller/test_faults.py
"""

import json
import os
import time
import unittest

from e2e_lib import API, REPO, Cluster, is_ready, wait_for

N = int(os.environ.get("TANDEM_E2E_DEPLOYMENTS", "100"))
FAULTS = {"conflict_percent": 30, "gone_every_events": 500, "drop_watch_percent": 1, "seed": 7}
QPS, BURST = 100, 100  # the reconcile client's limiter (--qps, --burst)
KILL_EVERY, MAX_KILLS = 100, 40
MDEPS = API % "default" + "modeldeployments"
POOLS = API % "default" + "modelpools"


def deployment(i):
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
            "metadata": {"name": "m%03d" % i},
            "spec": {"model": {"name": "tandem/tiny", "dummy": {"preset": "tiny", "seed": i}},
                     "router": {"replicas": 1}, "prefill": {"replicas": 1}, "decode": {"replicas": 1}}}


class FaultsTest(unittest.TestCase):
    def setUp(self):
        self.cluster = Cluster("--auto-ready", "--history", "5000", "--faults", json.dumps(FAULTS))
        self.addCleanup(self.cluster.stop)

    def converged(self, generation):
        mdeps = self.cluster.items(MDEPS)
        pools = self.cluster.items(POOLS)
        if len(mdeps) != N or len(pools) != 2 * N:
            return False
        return (all(is_ready(m) and m["metadata"]["generation"] == generation for m in mdeps)
                and all(p.get("status", {}).get("observedGeneration") == p["metadata"]["generation"]
                        for p in pools))

    def test_hundred_deployments_converge_through_faults_and_kills(self):
        c = self.cluster
        c.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "crds"))
        docs = {"apiVersion": "v1", "kind": "List", "items": [deployment(i) for i in range(N)]}
        c.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(docs))
        args = ("--leader-elect=false", "--workers", "4", "--qps", str(QPS), "--burst", str(BURST),
                "--resync-period", "2")
        ctl = c.start_controller(*args)
        start = time.monotonic()
        processes = 1

        # SIGKILL after every KILL_EVERY writes, mid-flight, and start a fresh process, until it
        # converges anyway (or MAX_KILLS).
        kills = 0
        while kills < MAX_KILLS and not self.converged(1):
            threshold = c.stats()["writes"] + KILL_EVERY
            wait_for(lambda: c.stats()["writes"] >= threshold or self.converged(1), 120, "writes")
            if self.converged(1):
                break
            ctl.kill()
            ctl.wait()
            kills += 1
            ctl = c.start_controller(*args)
            processes += 1
        wait_for(lambda: self.converged(1), 150, "100 deployments Ready")
        first = time.monotonic() - start

        # Every deployment changes: generation 2 everywhere, and the controller must see it all.
        for m in c.items(MDEPS):
            while True:  # the 30% conflicts hit our patches too
                code, _ = c.sim.req("PATCH", MDEPS + "/" + m["metadata"]["name"],
                                    {"spec": {"decode": {"weights": "int4"}}},
                                    ctype="application/merge-patch+json")
                if code != 409:
                    self.assertEqual(code, 200)
                    break
        wait_for(lambda: self.converged(2), 150, "every deployment Ready at generation 2")
        for p in c.items(POOLS):
            if p["spec"]["role"] == "decode":
                self.assertEqual(p["spec"]["weights"], "int4")

        stats = c.stats()
        # The reconcile clients stayed within their token buckets: each process may spend its burst
        # plus QPS per second it lived (the processes did not overlap).
        elapsed = time.monotonic() - start
        requests = c.reconcile_requests()
        self.assertLessEqual(requests, processes * BURST + QPS * elapsed)
        # Converged means quiet: every object reconciled again by forced resyncs, nothing written
        # (no hot loop, no flapping).
        self.assertEqual(c.quiet_writes(ctl, deployments=N, pools=2 * N), {}, c.stats()["by_verb_resource"])

        # Half of them deleted: their children all go, the others keep theirs.
        for i in range(0, N, 2):
            code, _ = c.sim.req("DELETE", MDEPS + "/m%03d" % i)
            self.assertIn(code, (200, 202))
        wait_for(lambda: len(c.items(MDEPS)) == N // 2, 60, "deleted deployments to go")
        for path in ("/apis/apps/v1/namespaces/default/statefulsets", "/api/v1/namespaces/default/configmaps",
                     "/apis/policy/v1/namespaces/default/poddisruptionbudgets", POOLS,
                     "/apis/apps/v1/namespaces/default/deployments", "/api/v1/namespaces/default/pods"):
            owners = {o["metadata"]["labels"].get("tandem.dev/deployment") for o in c.items(path)
                      if "tandem.dev/deployment" in o["metadata"].get("labels", {})}
            self.assertEqual(owners, {"m%03d" % i for i in range(1, N, 2)}, path)
        self.assertIsNone(ctl.poll(), c.controller_log(ctl))

        rps = max((n for _, n in stats["requests_per_second"]), default=0)
        print("\nfaults: %d deployments Ready in %.1f s with %d SIGKILLs; %d requests (%s), %d writes, "
              "peak %d requests/s, peak %d writes/s; 409s %d; reconcile clients %d requests in %.1f s "
              "(budget %d)" %
              (N, first, kills, stats["total"], json.dumps(stats["by_verb"]), stats["writes"], rps,
               stats["max_writes_per_second"], stats["by_code"].get("409", 0), requests, elapsed,
               processes * BURST + QPS * elapsed))


if __name__ == "__main__":
    unittest.main()
