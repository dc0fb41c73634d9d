"""kube-sim cases: deletion, finalizers, garbage collection, subresources, tables and the
simulated controllers."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_testlib import (  # noqa: E402
    CMS, CRDS, DEPLOYS, MDEP, PODS, POOLS, STS, SimTestCase, WatchStream, cm, mdep, sts)


class DeleteAndGcTest(SimTestCase):
    def test_finalizers(self):
        self.sim.ok("POST", CMS, cm("fin", finalizers=["example.com/hold"]))
        obj = self.sim.ok("DELETE", CMS + "/fin")
        self.assertIn("deletionTimestamp", obj["metadata"])
        still = self.sim.ok("GET", CMS + "/fin")
        self.assertIn("deletionTimestamp", still["metadata"])
        still["metadata"]["finalizers"].append("example.com/other")
        code, _ = self.sim.req("PUT", CMS + "/fin", still)
        self.assertEqual(code, 422, "no new finalizers while deleting")
        self.sim.ok("PATCH", CMS + "/fin", {"metadata": {"finalizers": None}},
                    "application/merge-patch+json")
        code, _ = self.sim.req("GET", CMS + "/fin")
        self.assertEqual(code, 404)

    def test_preconditions(self):
        obj = self.sim.ok("POST", CMS, cm("pre"))
        code, st = self.sim.req("DELETE", CMS + "/pre", {"preconditions": {"uid": "nope"}})
        self.assertEqual((code, st["reason"]), (409, "Conflict"))
        code, st = self.sim.req("DELETE", CMS + "/pre", {"preconditions": {
            "resourceVersion": obj["metadata"]["resourceVersion"], "uid": obj["metadata"]["uid"]}})
        self.assertEqual(code, 200)

    def test_background_cascade(self):
        a = self.sim.ok("POST", MDEP, mdep("owner-a"))
        b = self.sim.ok("POST", CMS, cm("dep-b", owners=[a]))
        self.sim.ok("POST", CMS, cm("dep-c", owners=[b]))
        other = self.sim.ok("POST", CMS, cm("dep-two-owners", owners=[a, b]))
        self.sim.ok("POST", CMS, cm("survivor", owners=[other, self.sim.ok("POST", CMS,
                                                                           cm("lives"))]))
        self.sim.ok("DELETE", MDEP + "/owner-a", {"propagationPolicy": "Background"})
        for name in ("dep-b", "dep-c", "dep-two-owners"):
            code, _ = self.sim.req("GET", CMS + "/" + name)
            self.assertEqual(code, 404, name)
        survivor = self.sim.ok("GET", CMS + "/survivor")
        self.assertNotIn("deletionTimestamp", survivor["metadata"], "one owner still exists")

    def test_dangling_owner_is_collected(self):
        ghost = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost",
                                                                     "uid": "no-such-uid"}}
        self.sim.ok("POST", CMS, cm("dangling", owners=[ghost]))
        self.assertEqual(self.sim.req("GET", CMS + "/dangling")[0], 404)

    def test_orphan(self):
        a = self.sim.ok("POST", MDEP, mdep("owner-o"))
        self.sim.ok("POST", CMS, cm("orphan-b", owners=[a]))
        self.sim.ok("DELETE", MDEP + "/owner-o?propagationPolicy=Orphan")
        b = self.sim.ok("GET", CMS + "/orphan-b")
        self.assertNotIn("ownerReferences", b["metadata"])

    def test_foreground_waits_for_dependents(self):
        a = self.sim.ok("POST", MDEP, mdep("owner-f"))
        self.sim.ok("POST", CMS, cm("fg-b", owners=[a], finalizers=["example.com/hold"]))
        self.sim.ok("DELETE", MDEP + "/owner-f", {"propagationPolicy": "Foreground"})
        owner = self.sim.ok("GET", MDEP + "/owner-f")
        self.assertIn("foregroundDeletion", owner["metadata"]["finalizers"])
        self.assertIn("deletionTimestamp", self.sim.ok("GET", CMS + "/fg-b")["metadata"])
        self.sim.ok("PATCH", CMS + "/fg-b", {"metadata": {"finalizers": []}},
                    "application/merge-patch+json")
        for path in (CMS + "/fg-b", MDEP + "/owner-f"):
            code, _ = self.sim.req("GET", path)
            self.assertEqual(code, 404, path)

    def test_namespace_deletion_removes_contents(self):
        self.sim.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "doomed"}})
        self.sim.ok("POST", "/api/v1/namespaces/doomed/configmaps", cm("x"))
        self.sim.ok("POST", "/api/v1/namespaces/doomed/configmaps", cm("held",
                                                                       finalizers=["x/y"]))
        self.sim.ok("DELETE", "/api/v1/namespaces/doomed")
        ns = self.sim.ok("GET", "/api/v1/namespaces/doomed")
        self.assertEqual(ns["status"]["phase"], "Terminating")
        self.sim.ok("DELETE", "/api/v1/namespaces/doomed")  # again: still waits
        code, st = self.sim.req("POST", "/api/v1/namespaces/doomed/configmaps", cm("late"))
        self.assertEqual((code, st["reason"]), (403, "Forbidden"))
        self.sim.ok("PATCH", "/api/v1/namespaces/doomed/configmaps/held",
                    {"metadata": {"finalizers": None}}, "application/merge-patch+json")
        code, _ = self.sim.req("GET", "/api/v1/namespaces/doomed")
        self.assertEqual(code, 404)
        code, _ = self.sim.req("GET", "/api/v1/namespaces/doomed/configmaps/x")
        self.assertEqual(code, 404)

    def test_crd_deletion_removes_resources(self):
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "widgets.example.com"},
               "spec": {"group": "example.com", "scope": "Cluster",
                        "names": {"plural": "widgets", "kind": "Widget", "singular": "widget"},
                        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                            "openAPIV3Schema": {"type": "object",
                                                "x-kubernetes-preserve-unknown-fields": True}}}]}}
        created = self.sim.ok("POST", CRDS, crd)
        self.assertEqual(created["metadata"]["name"], "widgets.example.com")
        got = self.sim.ok("GET", CRDS + "/widgets.example.com")
        conds = {c["type"]: c["status"] for c in got["status"]["conditions"]}
        self.assertEqual(conds["Established"], "True")
        self.sim.ok("POST", "/apis/example.com/v1/widgets", {"apiVersion": "example.com/v1",
                                                            "kind": "Widget",
                                                            "metadata": {"name": "w"}})
        code, _ = self.sim.req("GET", "/apis/example.com/v1/widgets/w/status")
        self.assertEqual(code, 404, "no status subresource on this CRD")
        w = WatchStream(self.sim, "/apis/example.com/v1/widgets?watch=1&resourceVersion=" +
                        self.sim.ok("GET", "/apis/example.com/v1/widgets")["metadata"][
                            "resourceVersion"])
        self.sim.ok("DELETE", CRDS + "/widgets.example.com")
        evs = w.events()  # the objects' deletions, then the stream ends with its resource
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in evs],
                         [("DELETED", "w")])
        self.assertFalse(w.cut)
        code, _ = self.sim.req("GET", "/apis/example.com/v1/widgets")
        self.assertEqual(code, 404)
        code, _ = self.sim.req("GET", CRDS + "/widgets.example.com")
        self.assertEqual(code, 404)
        self.sim.ok("POST", CRDS, crd)
        self.assertEqual(self.sim.ok("GET", "/apis/example.com/v1/widgets")["items"], [])


class ScaleAndTableTest(SimTestCase):
    def test_modelpool_scale_subresource(self):
        pool = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelPool",
                "metadata": {"name": "pool"},
                "spec": {"deploymentName": "d", "role": "decode", "replicas": 1,
                         "model": {"name": "m", "dummy": {"preset": "tiny", "seed": 1}}}}
        self.sim.ok("POST", POOLS, pool)
        self.sim.ok("PATCH", POOLS + "/pool/status", {"status": {"replicas": 1,
                                                                 "selector": "pool=x"}},
                    "application/merge-patch+json")
        scale = self.sim.ok("GET", POOLS + "/pool/scale")
        self.assertEqual((scale["kind"], scale["apiVersion"]), ("Scale", "autoscaling/v1"))
        self.assertEqual(scale["spec"]["replicas"], 1)
        self.assertEqual(scale["status"], {"replicas": 1, "selector": "pool=x"})
        scale["spec"]["replicas"] = 4
        self.sim.ok("PUT", POOLS + "/pool/scale", scale)
        obj = self.sim.ok("GET", POOLS + "/pool")
        self.assertEqual((obj["spec"]["replicas"], obj["metadata"]["generation"]), (4, 2))
        code, _ = self.sim.req("PUT", POOLS + "/pool/scale", scale)  # stale resourceVersion
        self.assertEqual(code, 409)
        self.sim.ok("PATCH", POOLS + "/pool/scale", {"spec": {"replicas": 2}},
                    "application/merge-patch+json")
        self.assertEqual(self.sim.ok("GET", POOLS + "/pool")["spec"]["replicas"], 2)
        code, _ = self.sim.req("GET", MDEP + "/x/scale")
        self.assertEqual(code, 404)

    def test_table(self):
        self.sim.ok("POST", MDEP, mdep("tbl"))
        cond = {"reason": "R", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        self.sim.ok("PATCH", MDEP + "/tbl/status", {"status": {
            "conditions": [dict(cond, type="Progressing", status="True"),
                           dict(cond, type="Ready", status="False")],
            "prefill": {"ready": "1/2"}, "precision": "fp8/bf16"}},
            "application/merge-patch+json")
        accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
        code, t = self.sim.req("GET", MDEP, headers=accept)
        self.assertEqual((code, t["kind"]), (200, "Table"))
        cols = [c["name"] for c in t["columnDefinitions"]]
        self.assertEqual(cols, ["Name", "Ready", "Prefill", "Decode", "Precision", "Age"])
        row = [r for r in t["rows"] if r["cells"][0] == "tbl"][0]
        self.assertEqual(row["cells"][1:5], ["False", "1/2", None, "fp8/bf16"])
        self.assertRegex(row["cells"][5], r"^\d+s$")
        self.assertEqual(row["object"]["kind"], "PartialObjectMetadata")
        code, t = self.sim.req("GET", "/api/v1/namespaces", headers=accept)
        self.assertEqual([c["name"] for c in t["columnDefinitions"]], ["Name", "Age"])
        # kubectl get -w: each watch event carries a one-row Table.
        conn = self.sim.connect()
        conn.request("GET", MDEP + "?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dtbl",
                     headers=accept)
        lines = [json.loads(x) for x in conn.getresponse().read().splitlines()]
        conn.close()
        self.assertEqual([(e["type"], e["object"]["kind"], e["object"]["rows"][0]["cells"][0])
                          for e in lines], [("ADDED", "Table", "tbl")])


class ControllersTest(SimTestCase):
    def names(self, selector):
        pods = self.sim.ok("GET", PODS + "?labelSelector=" + selector)["items"]
        return sorted(p["metadata"]["name"] for p in pods)

    def test_parallel_statefulset_pods_scale_and_readiness(self):
        s = self.sim.ok("POST", STS, sts("web", 3, policy="Parallel"))
        pods = self.sim.ok("GET", PODS + "?labelSelector=app%3Dweb")["items"]
        self.assertEqual(sorted(p["metadata"]["name"] for p in pods), ["web-0", "web-1", "web-2"])
        ref = pods[0]["metadata"]["ownerReferences"][0]
        self.assertEqual((ref["kind"], ref["uid"], ref["controller"]),
                         ("StatefulSet", s["metadata"]["uid"], True))
        self.assertEqual(pods[0]["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
                         pods[0]["metadata"]["name"])
        st = self.sim.ok("GET", STS + "/web")["status"]
        self.assertEqual((st["replicas"], st["readyReplicas"], st["updatedReplicas"],
                          st["observedGeneration"]), (3, 0, 3, 1))
        r = self.sim.ok("POST", "/sim/pods-ready", {"namespace": "default",
                                                    "selector": "app=web", "ready": True})
        self.assertEqual(r["changed"], 3)
        st = self.sim.ok("GET", STS + "/web")["status"]
        self.assertEqual((st["readyReplicas"], st["availableReplicas"]), (3, 3))
        self.sim.ok("POST", "/sim/pods-ready", {"namespace": "default", "names": ["web-2"],
                                                "ready": False})
        self.assertEqual(self.sim.ok("GET", STS + "/web")["status"]["readyReplicas"], 2)
        self.sim.ok("PATCH", STS + "/web/scale", {"spec": {"replicas": 1}},
                    "application/merge-patch+json")
        self.assertEqual(self.names("app%3Dweb"), ["web-0"])
        st = self.sim.ok("GET", STS + "/web")["status"]
        self.assertEqual((st["replicas"], st["observedGeneration"]), (1, 2))
        scale = self.sim.ok("GET", STS + "/web/scale")
        self.assertEqual(scale["status"]["selector"], "app=web")
        # A deleted pod comes back; deleting the StatefulSet takes its pods.
        self.sim.ok("DELETE", PODS + "/web-0")
        self.sim.ok("GET", PODS + "/web-0")
        self.sim.ok("DELETE", STS + "/web")
        self.assertEqual(self.names("app%3Dweb"), [])

    def test_ordered_ready_statefulset(self):
        self.sim.ok("POST", STS, sts("ord", 3))
        self.assertEqual(self.names("app%3Dord"), ["ord-0"], "ord-1 waits for ord-0 to be Ready")
        self.assertEqual(self.sim.ok("GET", STS + "/ord")["status"]["replicas"], 1)
        # A (sticky) ready mark also covers the pods created after it: the rollout completes.
        self.sim.ok("POST", "/sim/pods-ready", {"namespace": "default", "selector": "app=ord"})
        self.assertEqual(self.names("app%3Dord"), ["ord-0", "ord-1", "ord-2"])
        st = self.sim.ok("GET", STS + "/ord")["status"]
        self.assertEqual((st["replicas"], st["readyReplicas"]), (3, 3))
        # A template change replaces the pods one by one, highest ordinal first.
        rv = self.sim.ok("GET", PODS)["metadata"]["resourceVersion"]
        self.sim.ok("PATCH", STS + "/ord", {"spec": {"template": {"metadata": {"annotations": {
            "v": "2"}}}}}, "application/merge-patch+json")
        st = self.sim.ok("GET", STS + "/ord")["status"]
        self.assertEqual((st["updatedReplicas"], st["readyReplicas"], st["observedGeneration"]),
                         (3, 3, 2))
        self.assertEqual(st["currentRevision"], st["updateRevision"])
        w = WatchStream(self.sim, PODS + "?watch=1&timeoutSeconds=1&labelSelector=app%3Dord"
                        "&resourceVersion=" + rv)
        deleted = [e["object"]["metadata"]["name"] for e in w.events() if e["type"] == "DELETED"]
        self.assertEqual(deleted, ["ord-2", "ord-1", "ord-0"])
        # A remaining pod that is not Ready holds a scale-down; once Ready, the condemned pods
        # go, highest ordinal first.
        self.sim.ok("POST", "/sim/pods-ready", {"namespace": "default", "names": ["ord-0"],
                                                "ready": False})
        self.sim.ok("PATCH", STS + "/ord/scale", {"spec": {"replicas": 1}},
                    "application/merge-patch+json")
        self.assertEqual(self.names("app%3Dord"), ["ord-0", "ord-1", "ord-2"])
        self.sim.ok("POST", "/sim/pods-ready", {"namespace": "default", "names": ["ord-0"]})
        self.assertEqual(self.names("app%3Dord"), ["ord-0"])
        self.assertEqual(self.sim.ok("GET", STS + "/ord")["status"]["replicas"], 1)

    def test_deployment_status(self):
        dep = sts("api", 2)
        dep["kind"] = "Deployment"
        del dep["spec"]["serviceName"]
        self.sim.ok("POST", DEPLOYS, dep)
        st = self.sim.ok("GET", DEPLOYS + "/api")["status"]
        self.assertEqual((st["replicas"], st["readyReplicas"], st["observedGeneration"]), (2, 0, 1))
        self.sim.ok("POST", "/sim/pods-ready", {"namespace": "default", "selector": "app=api"})
        st = self.sim.ok("GET", DEPLOYS + "/api")["status"]
        self.assertEqual(st["readyReplicas"], 2)
        conds = {c["type"]: c["status"] for c in st["conditions"]}
        self.assertEqual(conds["Available"], "True")


class AutoReadyTest(SimTestCase):
    ARGS = ("--auto-ready",)

    def test_pods_ready_on_creation(self):
        self.sim.ok("POST", STS, sts("auto", 2))  # OrderedReady, each pod Ready at once
        st = self.sim.ok("GET", STS + "/auto")["status"]
        self.assertEqual(st["readyReplicas"], 2)
        pod = self.sim.ok("GET", PODS + "/auto-0")
        self.assertEqual(pod["status"]["phase"], "Running")
