"""Two tandem-controller processes share a Lease (duration 4 s, renew deadline 3 s, retry 1 s).

  - Only the leader reconciles.
  - The leader is frozen (SIGSTOP): the other takes over (bound below) and
    reconciles new work; the old leader, thawed (SIGCONT), finds its lease lost, exits, and its
    reconcile client (kube-sim counts requests per User-Agent) writes nothing after the takeover.
  - The new leader is SIGKILLed (no release): a third process takes over (bound below).
  - SIGTERM: the leader exits 0 and releases the Lease.
Takeover bound: a candidate judges expiry from when *it* saw the Lease record last change, and it
looks every retry period, so it may see the last renewal up to one retry period late: the worst
case after the leader stops is lease duration + 2 x retry period (client-go has the same rule).
That is what is asserted, plus 0.5 s for process scheduling and this test's 20 ms polling; the
measured times are printed against the tighter lease + retry target (typically 3.8-4.8 s vs 5 s).

Run: TANDEM_CONTROLLER=build-x/controller/tandem-controller .venv/bin/python tests/controller/test_leader_election.py
"""

import os
import signal
import time
import unittest

from e2e_lib import API, REPO, Cluster, is_ready, wait_for

LEASE_S, RENEW_S, RETRY_S = 4, 3, 1
LEASE = "/apis/coordination.k8s.io/v1/namespaces/default/leases/tandem-controller"
MDEPS = API % "default" + "modeldeployments"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def mdep(name):
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": name},
            "spec": {"model": {"name": "tandem/tiny", "dummy": {"preset": "tiny", "seed": 1}}}}


class LeaderElectionTest(unittest.TestCase):
    def setUp(self):
        self.cluster = Cluster("--auto-ready")
        self.addCleanup(self.cluster.stop)

    def holder(self):
        lease = self.cluster.get(LEASE)
        return (lease or {}).get("spec", {}).get("holderIdentity") or None

    def writes_by(self, identity):
        counts = self.cluster.stats().get("by_user_agent", {}).get("tandem-controller/" + identity, {})
        return sum(counts.get(v, 0) for v in WRITE_VERBS)

    def ready(self, name):
        return is_ready(self.cluster.get(MDEPS + "/" + name))

    def start(self, identity):
        return self.cluster.start_controller("--lease-duration", str(LEASE_S), "--renew-deadline", str(RENEW_S),
                                             "--retry-period", str(RETRY_S), identity=identity)

    def test_failover_and_fencing(self):
        c = self.cluster
        c.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "crds"))
        procs = {"a": self.start("a"), "b": self.start("b")}
        leader = wait_for(self.holder, 20, "a leader")
        follower = "b" if leader == "a" else "a"
        c.sim.ok("POST", MDEPS, mdep("one"))
        wait_for(lambda: self.ready("one"), 30, "the leader to reconcile")
        self.assertGreater(self.writes_by(leader), 0)
        self.assertEqual(self.writes_by(follower), 0, "the follower wrote")

        # Freeze the leader: it can neither renew nor release.
        frozen_at = time.monotonic()
        os.kill(procs[leader].pid, signal.SIGSTOP)
        wait_for(lambda: self.holder() == follower, LEASE_S + RETRY_S + 5, "a takeover")
        takeover_s = time.monotonic() - frozen_at
        self.assertLessEqual(takeover_s, LEASE_S + 2 * RETRY_S + 0.5)
        writes_before = self.writes_by(leader)
        c.sim.ok("POST", MDEPS, mdep("two"))
        wait_for(lambda: self.ready("two"), 30, "the new leader to reconcile")

        # Thaw the old leader while it believes it leads: its fence must refuse every write.
        os.kill(procs[leader].pid, signal.SIGCONT)
        c.sim.ok("POST", MDEPS, mdep("three"))  # fresh work it would love to do
        procs[leader].wait(RENEW_S + LEASE_S + 10)
        self.assertEqual(procs[leader].returncode, 1, c.controller_log(procs[leader]))
        self.assertEqual(self.writes_by(leader), writes_before, "writes after losing the lease")
        wait_for(lambda: self.ready("three"), 30, "the new leader to reconcile more")

        # Kill the new leader outright (no release): a third candidate takes over.
        procs["c"] = self.start("c")
        time.sleep(RETRY_S * 2)  # let c observe the current Lease record
        killed_at = time.monotonic()
        procs[follower].kill()
        wait_for(lambda: self.holder() == "c", LEASE_S + RETRY_S + 5, "a takeover after SIGKILL")
        kill_takeover_s = time.monotonic() - killed_at
        self.assertLessEqual(kill_takeover_s, LEASE_S + 2 * RETRY_S + 0.5)
        c.sim.ok("POST", MDEPS, mdep("four"))
        wait_for(lambda: self.ready("four"), 30, "the third leader to reconcile")
        # SIGTERM: a clean exit that releases the Lease (holderIdentity cleared) for the next one.
        procs["c"].terminate()
        self.assertEqual(procs["c"].wait(20), 0, c.controller_log(procs["c"]))
        self.assertIsNone(self.holder())
        print("\nleader election: takeover %.2f s after SIGSTOP, %.2f s after SIGKILL (target %d s); "
              "old leader's writes after losing the lease: %d" %
              (takeover_s, kill_takeover_s, LEASE_S + RETRY_S, self.writes_by(leader) - writes_before))


if __name__ == "__main__":
    unittest.main()
