#!/usr/bin/env python3
"""The real kubectl against kube-sim through a generated kubeconfig: apply crds/ and
deploy/examples/, create/get/delete a ModelDeployment, printer columns, -o yaml, the ModelPool
scale subresource, cascading delete, and an invalid CR rejected with the validation message."""

import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_testlib import REPO, SimProcess, make_certs  # noqa: E402

KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl") or "/usr/bin/kubectl"
MDEP = "/apis/tandem.dev/v1alpha1/namespaces/default/modeldeployments"
POOLS = "/apis/tandem.dev/v1alpha1/namespaces/default/modelpools"
CMS = "/api/v1/namespaces/default/configmaps"

TINY = """apiVersion: tandem.dev/v1alpha1
kind: ModelDeployment
metadata:
  name: %s
spec:
  model: {name: tandem/tiny, dummy: {preset: tiny, seed: 1}}
  prefill: {replicas: 1, weights: %s}
  decode: {replicas: 2}
"""


class KubectlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kube-sim-kubectl-")
        cls.kubeconfig = os.path.join(cls.dir, "kubeconfig")
        if shutil.which("openssl") is None:
            # No CA can be made: plain HTTP without authentication (kubectl sends a bearer
            # token only over TLS).
            print("test_kubectl: no openssl CLI; kubectl talks plain HTTP", file=sys.stderr)
            cls.sim = SimProcess()
            cluster, user = "{server: '%s'}" % cls.sim.url, "{}"
        else:
            certs = make_certs(cls.dir)
            ctx = ssl.create_default_context(cafile=certs["ca.crt"])
            cls.sim = SimProcess("--token", "kubectl-token", "--tls-cert", certs["server.crt"],
                                 "--tls-key", certs["server.key"], token="kubectl-token",
                                 tls_context=ctx)
            cluster = "{server: '%s', certificate-authority: '%s'}" % (cls.sim.url,
                                                                      certs["ca.crt"])
            user = "{token: kubectl-token}"
        with open(cls.kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\n"
                    "clusters: [{name: sim, cluster: %s}]\n"
                    "users: [{name: me, user: %s}]\n"
                    "contexts: [{name: sim, context: {cluster: sim, user: me, "
                    "namespace: default}}]\n"
                    "current-context: sim\n" % (cluster, user))

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def kubectl(self, *args, stdin=None, check=True):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, HOME=self.dir)
        p = subprocess.run([KUBECTL, "--cache-dir", os.path.join(self.dir, "cache")] + list(args),
                           input=stdin, capture_output=True, text=True, env=env, timeout=60)
        if check and p.returncode != 0:
            raise AssertionError("kubectl %s failed (%d): %s%s" % (" ".join(args), p.returncode,
                                                                  p.stdout, p.stderr))
        return p

    def apply_crds(self):
        out = self.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "crds")).stdout
        self.assertIn("modeldeployments.tandem.dev", out)

    def test_1_crds_and_examples(self):
        self.apply_crds()
        out = self.kubectl("get", "crd").stdout
        self.assertIn("modelpools.tandem.dev", out)
        self.apply_crds()  # a second apply patches (unchanged)
        examples = os.path.join(REPO, "deploy", "examples")
        out = self.kubectl("apply", "--validate=false", "-f", examples).stdout
        names = [n for n in os.listdir(examples) if n.endswith(".yaml")]
        self.assertEqual(out.count("created"), len(names), out)
        got = json.loads(self.kubectl("get", "mdep", "-o", "json").stdout)
        self.assertEqual(len(got["items"]), len(names))
        # Re-applying a changed file is a three-way merge patch: the spec change bumps generation.
        self.kubectl("apply", "--validate=false", "-f", "-", stdin=TINY % ("kc-apply", "bf16"))
        out = self.kubectl("apply", "--validate=false", "-f", "-",
                           stdin=TINY % ("kc-apply", "fp8")).stdout
        self.assertIn("modeldeployment.tandem.dev/kc-apply configured", out)
        obj = self.sim.ok("GET", MDEP + "/kc-apply")
        self.assertEqual((obj["spec"]["prefill"]["weights"], obj["metadata"]["generation"]),
                         ("fp8", 2))
        out = self.kubectl("apply", "--validate=false", "-f", "-",
                           stdin=TINY % ("kc-apply", "fp8")).stdout
        self.assertIn("unchanged", out)

    def test_2_create_get_columns_yaml_delete(self):
        self.apply_crds()
        out = self.kubectl("create", "--validate=false", "-f", "-",
                           stdin=TINY % ("kc-one", "fp8")).stdout
        self.assertIn("modeldeployment.tandem.dev/kc-one created", out)
        self.sim.ok("PATCH", MDEP + "/kc-one/status", {"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "AllPodsReady",
                            "message": "ok", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "prefill": {"ready": "1/1"}, "decode": {"ready": "2/2"},
            "precision": "fp8/bf16 bf16/bf16"}}, "application/merge-patch+json")
        out = self.kubectl("get", "mdep", "kc-one").stdout.splitlines()
        self.assertEqual(out[0].split(), ["NAME", "READY", "PREFILL", "DECODE", "PRECISION", "AGE"])
        self.assertEqual(out[1].split()[:6], ["kc-one", "True", "1/1", "2/2", "fp8/bf16",
                                              "bf16/bf16"])
        y = self.kubectl("get", "mdep", "kc-one", "-o", "yaml").stdout
        self.assertIn("weights: fp8", y)
        self.assertIn("kvCache: bf16", y, "defaults applied by the CRD schema")
        self.assertIn("generation: 1", y)
        self.kubectl("delete", "mdep", "kc-one")
        p = self.kubectl("get", "mdep", "kc-one", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("NotFound", p.stderr)

    def test_3_scale_modelpool(self):
        self.apply_crds()
        pool = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelPool",
                "metadata": {"name": "x"},
                "spec": {"deploymentName": "d", "role": "decode", "replicas": 1,
                         "model": {"name": "m", "dummy": {"preset": "tiny", "seed": 1}}}}
        self.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(pool))
        out = self.kubectl("scale", "modelpool/x", "--replicas", "3").stdout
        self.assertIn("scaled", out)
        self.assertEqual(self.sim.ok("GET", POOLS + "/x")["spec"]["replicas"], 3)
        self.assertEqual(self.kubectl("get", "modelpool", "x", "-o",
                                      "jsonpath={.spec.replicas}").stdout, "3")

    def test_4_delete_cascades(self):
        self.apply_crds()
        self.kubectl("apply", "--validate=false", "-f", "-", stdin=TINY % ("kc-owner", "bf16"))
        owner = self.sim.ok("GET", MDEP + "/kc-owner")
        ref = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
               "name": "kc-owner", "uid": owner["metadata"]["uid"], "controller": True}
        pool = self.sim.ok("POST", POOLS, {
            "apiVersion": "tandem.dev/v1alpha1", "kind": "ModelPool",
            "metadata": {"name": "kc-owner-decode", "ownerReferences": [ref]},
            "spec": {"deploymentName": "kc-owner", "role": "decode", "replicas": 1,
                     "model": {"name": "m", "dummy": {"preset": "tiny", "seed": 1}}}})
        pool_ref = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelPool",
                    "name": "kc-owner-decode", "uid": pool["metadata"]["uid"]}
        self.sim.ok("POST", CMS, {"metadata": {"name": "kc-owner-config",
                                               "ownerReferences": [pool_ref]}, "data": {}})
        self.kubectl("delete", "mdep", "kc-owner")
        for path in (POOLS + "/kc-owner-decode", CMS + "/kc-owner-config"):
            self.assertEqual(self.sim.req("GET", path)[0], 404, path)

    def test_5_invalid_cr_rejected(self):
        self.apply_crds()
        p = self.kubectl("apply", "--validate=false", "-f", "-", stdin=TINY % ("kc-bad", "int8"),
                         check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn('spec.prefill.weights: Unsupported value: "int8"', p.stderr)
        self.assertEqual(self.sim.req("GET", MDEP + "/kc-bad")[0], 404)


if __name__ == "__main__":
    unittest.main(verbosity=2)
