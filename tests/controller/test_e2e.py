"""tandem-controller end to end: kube-sim + the real kubectl + the real tandem-controller binary.

  HappyPathTest   kubectl applies crds/ and deploy/examples/tiny-cpu.yaml; the controller makes
                  the pools, StatefulSets, Services, PDBs, ConfigMap and router (and Events);
                  `kubectl get mdep`
                  shows the printer columns; Ready once kube-sim marks the pods ready; a spec
                  change bumps generation and observedGeneration follows; a converged cluster sees
                  zero writes; `kubectl scale modelpool` (autoscaling enabled) is followed and
                  not reverted; `kubectl delete mdep` cascades with no orphans.

Run: TANDEM_CONTROLLER=build-x/controller/tandem-controller .venv/bin/python tests/controller/test_e2e.py
"""

import json
import os
import unittest

from e2e_lib import API, REPO, Cluster, condition, is_ready, wait_for

NS = "default"
CHILD_PATHS = {
    "modelpools": "/apis/tandem.dev/v1alpha1/namespaces/default/modelpools",
    "statefulsets": "/apis/apps/v1/namespaces/default/statefulsets",
    "deployments": "/apis/apps/v1/namespaces/default/deployments",
    "services": "/api/v1/namespaces/default/services",
    "configmaps": "/api/v1/namespaces/default/configmaps",
    "pdbs": "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
    "pods": "/api/v1/namespaces/default/pods",
}


def children(cluster, deployment):
    """{resource: sorted names} of everything labelled as part of `deployment`."""
    out = {}
    for resource, path in CHILD_PATHS.items():
        names = sorted(o["metadata"]["name"]
                       for o in cluster.items(path + "?labelSelector=tandem.dev/deployment%3D" + deployment))
        if names:
            out[resource] = names
    return out


class HappyPathTest(unittest.TestCase):
    def setUp(self):
        self.cluster = Cluster()
        self.addCleanup(self.cluster.stop)

    def test_tiny_cpu_lifecycle(self):
        c = self.cluster
        c.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "crds"))
        ctl = c.start_controller("--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "1",
                                 "--resync-period", "1")
        c.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "deploy", "examples", "tiny-cpu.yaml"))
        mdep_path = API % NS + "modeldeployments/tiny-cpu"

        want = {
            "modelpools": ["tiny-cpu-decode", "tiny-cpu-prefill"],
            "statefulsets": ["tiny-cpu-decode", "tiny-cpu-prefill"],
            "deployments": ["tiny-cpu-router"],
            "services": ["tiny-cpu", "tiny-cpu-decode", "tiny-cpu-prefill"],
            "configmaps": ["tiny-cpu-config"],
            "pdbs": ["tiny-cpu-decode", "tiny-cpu-prefill"],
            "pods": ["tiny-cpu-decode-0", "tiny-cpu-prefill-0"],
        }

        def made_everything():
            got = children(c, "tiny-cpu")
            got["pods"] = [p for p in got.get("pods", []) if not p.startswith("tiny-cpu-router")]
            return got == want

        wait_for(made_everything, 30, "the controller to create every child")
        sts = c.get(CHILD_PATHS["statefulsets"] + "/tiny-cpu-decode")
        container = sts["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(container["args"], ["--config", "/etc/tandem/decode.yaml", "--role", "decode"])
        self.assertEqual(container["image"], "tandem/agent:test")
        self.assertEqual(sts["metadata"]["ownerReferences"][0]["kind"], "ModelPool")

        # Not ready until kube-sim marks the pods ready.
        mdep = wait_for(lambda: (lambda m: m if condition(m, "Ready") else None)(c.get(mdep_path)), 30,
                        "a status")
        self.assertEqual(condition(mdep, "Ready")["status"], "False")
        c.pods_ready("tandem.dev/deployment=tiny-cpu")
        mdep = wait_for(lambda: (lambda m: m if is_ready(m) else None)(c.get(mdep_path)), 30, "Ready")
        self.assertEqual(mdep["status"]["prefill"]["ready"], "1/1")
        self.assertEqual(mdep["status"]["precision"], "prefill=bf16/bf16 decode=bf16/bf16")

        # Events for the transitions, about the deployment itself.
        reasons = wait_for(lambda: (lambda r: r if {"Created", "Ready"} <= r else None)(
            {e["reason"] for e in c.items("/api/v1/namespaces/default/events")
             if e["involvedObject"]["kind"] == "ModelDeployment" and e["involvedObject"]["name"] == "tiny-cpu"}),
            10, "Created and Ready events")
        self.assertNotIn("InvalidSpec", reasons)

        table = c.kubectl("get", "mdep").stdout.split("\n")
        self.assertEqual(table[0].split(), ["NAME", "READY", "PREFILL", "DECODE", "PRECISION", "AGE"])
        self.assertEqual(table[1].split()[:5], ["tiny-cpu", "True", "1/1", "1/1", "prefill=bf16/bf16"])

        # Converged: reconciles forced by the resync (counted on /metrics) write nothing at all.
        self.assertEqual(c.quiet_writes(ctl, deployments=1, pools=2), {}, c.stats())

        # A spec change: generation 2, observedGeneration follows, the new replica comes up.
        c.kubectl("patch", "mdep", "tiny-cpu", "--type", "merge", "-p",
                  json.dumps({"spec": {"decode": {"replicas": 2, "weights": "int4"}}}))
        self.assertEqual(c.get(mdep_path)["metadata"]["generation"], 2)
        wait_for(lambda: len(c.items(CHILD_PATHS["pods"] + "?labelSelector=tandem.dev/pool%3Ddecode")) == 2, 30,
                 "a second decode pod")
        c.pods_ready("tandem.dev/deployment=tiny-cpu")
        mdep = wait_for(lambda: (lambda m: m if is_ready(m) else None)(c.get(mdep_path)), 30, "Ready at gen 2")
        self.assertEqual(mdep["status"]["observedGeneration"], 2)
        self.assertEqual(mdep["status"]["decode"]["ready"], "2/2")
        self.assertEqual(mdep["status"]["precision"], "prefill=bf16/bf16 decode=int4/bf16")
        cm = c.get(CHILD_PATHS["configmaps"] + "/tiny-cpu-config")
        self.assertEqual(json.loads(cm["data"]["decode.yaml"])["model"]["weights"], "int4")

        # The autoscaler's path: with autoscaling enabled the pool's size belongs to the ModelPool's
        # scale subresource (here `kubectl scale`); the StatefulSet follows and the deployment does
        # not put it back.
        c.kubectl("patch", "mdep", "tiny-cpu", "--type", "merge", "-p", json.dumps(
            {"spec": {"decode": {"autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 4}}}}))
        c.kubectl("scale", "modelpool", "tiny-cpu-decode", "--replicas=3")
        wait_for(lambda: len(c.items(CHILD_PATHS["pods"] + "?labelSelector=tandem.dev/pool%3Ddecode")) == 3, 30,
                 "a third decode pod")
        c.pods_ready("tandem.dev/deployment=tiny-cpu")
        mdep = wait_for(lambda: (lambda m: m if is_ready(m) and m["status"]["decode"]["ready"] == "3/3" else None)(
            c.get(mdep_path)), 30, "Ready with 3 decode replicas")
        # Forced reconciles of the deployment and both pools do not scale it back, nor write.
        self.assertEqual(c.quiet_writes(ctl, deployments=1, pools=2), {}, c.stats())
        self.assertEqual(c.get(CHILD_PATHS["modelpools"] + "/tiny-cpu-decode")["spec"]["replicas"], 3)
        self.assertEqual(c.get(CHILD_PATHS["statefulsets"] + "/tiny-cpu-decode")["spec"]["replicas"], 3)
        pools = c.kubectl("get", "modelpools").stdout.split("\n")
        self.assertEqual(pools[0].split(), ["NAME", "ROLE", "REPLICAS", "READY", "WEIGHTS", "KV", "AGE"])

        # Delete cascades: kubectl waits for the finalizer, then nothing labelled is left.
        c.kubectl("delete", "mdep", "tiny-cpu", "--timeout=60s")
        wait_for(lambda: children(c, "tiny-cpu") == {}, 30, "no orphans")
        self.assertIsNone(ctl.poll(), "the controller died:\n" + c.controller_log(ctl))


if __name__ == "__main__":
    unittest.main()
