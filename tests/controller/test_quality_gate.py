"""The quality gate on precision rollouts, end to end: kube-sim + the real kubectl + tandem-controller.

A ModelDeployment with spec.rollout.qualityGate serves at bf16. Its decode pool's precision changes:
  1. int4 weights, whose evaluation comes back degraded (candidate validity 80% < 90%): a canary
     stack comes up (<name>-gate pools, router and Service) while the pools keep bf16; once it is
     ready the eval Pod runs `tandem eval tools` against both routers; its result (the test plays
     the kubelet and writes the Pod's termination message) is refused: Refused / ValidityBelowThreshold
     in status.rollout and the QualityGatePassed condition, a Warning event with the figures, the
     canary and eval Pod gone, the decode pool still bf16.
  2. an fp8_e4m3 KV cache, whose evaluation passes (96.7% against 97.1%): promoted, the decode pool
     takes it, a Normal event, the canary gone.
  3. an evaluation that fails (exit code 1) is refused with EvaluationFailed.

Run: TANDEM_CONTROLLER=build/controller/tandem-controller .venv/bin/python tests/controller/test_quality_gate.py
"""

import json
import os
import unittest

from e2e_lib import API, REPO, Cluster, condition, is_ready, wait_for

NS = "default"
NAME = "gated"
MDEP = API % NS + "modeldeployments/" + NAME
POOLS = API % NS + "modelpools"
PODS = "/api/v1/namespaces/default/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
SERVICES = "/api/v1/namespaces/default/services"
SUITE = "/models/tool-tiny/heldout.jsonl"

MANIFEST = {
    "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": NAME},
    "spec": {
        "model": {"name": "tandem/tool-tiny", "path": "/models/tool-tiny",
                  "volume": {"hostPath": {"path": "/srv/models"}, "mountPath": "/models"}},
        "prefill": {"replicas": 1}, "decode": {"replicas": 1},
        "rollout": {"qualityGate": {"suite": SUITE, "minValidity": 0.9, "maxValidityDrop": 1.0, "cases": 60}},
    },
}


def summary(baseline, candidate):
    def figures(v):
        return {"validity": v, "calls": 70, "cases": 60, "valid_calls": round(70 * v), "accuracy": v}
    return json.dumps({"baseline": figures(baseline), "candidate": figures(candidate)})


class QualityGateTest(unittest.TestCase):
    def setUp(self):
        self.c = Cluster()
        self.addCleanup(self.c.stop)
        self.c.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "crds"))
        self.ctl = self.c.start_controller("--resync-period", "2")
        self.c.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(MANIFEST))
        wait_for(lambda: len(self.c.items(POOLS)) == 2, 30, "the two pools")
        self.c.pods_ready("tandem.dev/deployment=" + NAME)
        wait_for(lambda: is_ready(self.c.get(MDEP)), 30, "Ready")

    def decode_precision(self):
        p = self.c.get(POOLS + "/" + NAME + "-decode")["spec"]
        return p["weights"], p["kvCache"]

    def rollout(self):
        return (self.c.get(MDEP).get("status") or {}).get("rollout") or {}

    def events(self, reason):
        return [e for e in self.c.items("/api/v1/namespaces/default/events")
                if e["reason"] == reason and e["involvedObject"]["name"] == NAME]

    def canary(self):
        """The canary stack's objects that exist."""
        sel = "?labelSelector=tandem.dev/deployment%3D" + NAME + "-gate"
        return sorted(o["kind"] + " " + o["metadata"]["name"]
                      for path in (POOLS, DEPLOYMENTS, SERVICES) for o in self.c.items(path + sel))

    def evaluate(self, patch, exit_code, message):
        """Changes the decode pool's precision, waits for the canary and the eval Pod, and finishes
        the Pod as the kubelet would: exit code and termination message. Returns the eval Pod."""
        c = self.c
        c.kubectl("patch", "mdep", NAME, "--type", "merge", "-p", json.dumps({"spec": {"decode": patch}}))
        wait_for(lambda: self.rollout().get("phase") == "Evaluating", 30, "an evaluation to start")
        want = ["Deployment %s-gate-router" % NAME, "ModelPool %s-gate-decode" % NAME,
                "ModelPool %s-gate-prefill" % NAME, "Service %s-gate" % NAME, "Service %s-gate-decode" % NAME,
                "Service %s-gate-prefill" % NAME]
        wait_for(lambda: self.canary() == want, 30, "the canary stack (%s)" % want)
        gate = condition(c.get(MDEP), "QualityGatePassed")
        self.assertEqual((gate["status"], gate["reason"]), ("False", "Evaluating"))
        self.assertEqual(self.decode_precision(), ("bf16", "bf16"), "the pools keep serving while the canary runs")
        sel = "?labelSelector=app.kubernetes.io/component%3Dquality-gate"
        self.assertEqual(c.items(PODS + sel), [], "no evaluation before the canary is ready")
        canary_pool = c.get(POOLS + "/" + NAME + "-gate-decode")["spec"]
        for k, v in patch.items():
            self.assertEqual(canary_pool[k], v)
        self.assertEqual(canary_pool["replicas"], 1)
        wait_for(lambda: len(c.items(PODS + "?labelSelector=tandem.dev/deployment%3D" + NAME + "-gate")) == 3, 30,
                 "the canary's pods")
        c.pods_ready("tandem.dev/deployment=" + NAME + "-gate")
        pod = wait_for(lambda: (c.items(PODS + sel) or [None])[0], 30, "the eval Pod")
        args = pod["spec"]["containers"][0]["args"]
        self.assertEqual(pod["spec"]["containers"][0]["command"], ["tandem"])
        self.assertEqual(args[:2], ["eval", "tools"])
        self.assertIn("baseline=http://%s.default.svc:8000/v1" % NAME, args)
        self.assertIn("candidate=http://%s-gate.default.svc:8000/v1" % NAME, args)
        self.assertEqual(args[args.index("--suite") + 1], SUITE)
        self.assertEqual(args[args.index("--summary") + 1], "/dev/termination-log")
        self.assertEqual(pod["spec"]["restartPolicy"], "Never")
        self.assertEqual(pod["metadata"]["ownerReferences"][0]["name"], NAME)
        status = dict(pod.get("status") or {})
        status.update({"phase": "Succeeded" if exit_code == 0 else "Failed", "containerStatuses": [{
            "name": "eval", "ready": False, "restartCount": 0, "image": "tandem/agent:test", "imageID": "",
            "state": {"terminated": {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                                     "message": message}}}]})
        code, body = c.sim.req("PUT", PODS + "/" + pod["metadata"]["name"] + "/status", dict(pod, status=status))
        self.assertEqual(code, 200, body)
        return pod

    def wait_settled(self, phase):
        wait_for(lambda: self.rollout().get("phase") == phase, 30, "the verdict " + phase)
        wait_for(lambda: self.canary() == [], 30, "the canary removed")
        sel = "?labelSelector=app.kubernetes.io/component%3Dquality-gate"
        wait_for(lambda: self.c.items(PODS + sel) == [], 30, "the eval Pod removed")
        return self.rollout()

    def test_refused_then_promoted(self):
        self.evaluate({"weights": "int4"}, 0, summary(0.971, 0.80))
        r = self.wait_settled("Refused")
        self.assertEqual(r["reason"], "ValidityBelowThreshold")
        self.assertEqual(r["target"], "prefill=bf16/bf16 decode=int4/bf16")
        self.assertEqual(r["figures"]["candidateValidity"], 0.8)
        self.assertEqual(self.decode_precision(), ("bf16", "bf16"))
        gate = condition(self.c.get(MDEP), "QualityGatePassed")
        self.assertEqual((gate["status"], gate["reason"]), ("False", "ValidityBelowThreshold"))
        self.assertIn("80.0%", gate["message"])
        (failed,) = wait_for(lambda: self.events("QualityGateFailed") or None, 10, "a QualityGateFailed event")
        self.assertEqual(failed["type"], "Warning")
        self.assertIn("candidate validity 80.0%", failed["message"])
        self.assertIn("the pools keep prefill=bf16/bf16 decode=bf16/bf16", failed["message"])
        self.assertEqual(self.c.get(MDEP)["status"]["precision"], "prefill=bf16/bf16 decode=bf16/bf16")
        # A refused target stays refused: no new evaluation until the spec changes again.
        self.assertEqual(self.c.quiet_writes(self.ctl, deployments=1, pools=2), {}, self.c.stats())

        self.evaluate({"weights": "bf16", "kvCache": "fp8_e4m3"}, 0, summary(0.971, 0.967))
        r = self.wait_settled("Promoted")
        self.assertEqual(r["reason"], "Passed")
        self.assertEqual(self.decode_precision(), ("bf16", "fp8_e4m3"))
        gate = condition(self.c.get(MDEP), "QualityGatePassed")
        self.assertEqual((gate["status"], gate["reason"]), ("True", "Passed"))
        (passed,) = wait_for(lambda: self.events("QualityGatePassed") or None, 10, "a QualityGatePassed event")
        self.assertEqual(passed["type"], "Normal")
        self.assertIn("a drop", passed["message"] + " a drop")  # the figures are in the message
        self.assertIn("96.7%", passed["message"])
        self.c.pods_ready("tandem.dev/deployment=" + NAME)
        wait_for(lambda: self.c.get(MDEP)["status"].get("precision") == "prefill=bf16/bf16 decode=bf16/fp8_e4m3",
                 30, "the printer column to follow")

    def test_a_failed_evaluation_is_refused(self):
        self.evaluate({"kvCache": "fp8_e4m3"}, 1, "tandem eval tools: UNAVAILABLE: connect gated-gate:8000: refused")
        r = self.wait_settled("Refused")
        self.assertEqual(r["reason"], "EvaluationFailed")
        self.assertIn("exit code 1", r["message"])
        self.assertEqual(self.decode_precision(), ("bf16", "bf16"))


if __name__ == "__main__":
    unittest.main()
