#!/usr/bin/env python3
"""kube-sim over raw HTTP: discovery, CRUD semantics, subresources, GC, finalizers, pagination,
watch (resume, bookmarks, 410), the simulated controllers, faults, auth/TLS, and the same server
through the official Kubernetes Python client."""

import json
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_testlib import REPO, SimProcess, WatchStream, make_certs, wait_for  # noqa: E402

MDEP = "/apis/tandem.dev/v1alpha1/namespaces/default/modeldeployments"
POOLS = "/apis/tandem.dev/v1alpha1/namespaces/default/modelpools"
CMS = "/api/v1/namespaces/default/configmaps"
STS = "/apis/apps/v1/namespaces/default/statefulsets"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"
PODS = "/api/v1/namespaces/default/pods"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def load_crds():
    """The CRDs of crds/ (JSON-compatible YAML is parsed with PyYAML when present, else the
    minimal fixture's JSON twin is not needed: PyYAML is in the test venv)."""
    import yaml
    docs = []
    crd_dir = os.path.join(REPO, "crds")
    for name in sorted(os.listdir(crd_dir)):
        if name.endswith(".yaml"):
            with open(os.path.join(crd_dir, name)) as f:
                docs.extend(d for d in yaml.safe_load_all(f) if d)
    return docs


def mdep(name, **spec):
    body = {"model": {"name": "tandem/tiny", "dummy": {"preset": "tiny", "seed": 1}}}
    body.update(spec)
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
            "metadata": {"name": name}, "spec": body}


def cm(name, data=None, labels=None, owners=None, finalizers=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = labels
    if owners:
        meta["ownerReferences"] = [{"apiVersion": o["apiVersion"], "kind": o["kind"],
                                    "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]}
                                   for o in owners]
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}


def sts(name, replicas, labels=None):
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "serviceName": name,
                     "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "agent"}]}}}}


class SimTestCase(unittest.TestCase):
    ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.sim = SimProcess(*cls.ARGS)
        for crd in load_crds():
            cls.sim.ok("POST", CRDS, crd)

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()


class PureFunctionsTest(unittest.TestCase):
    """The patch, selector and JSONPath helpers on their own."""

    def test_merge_and_json_patch(self):
        import sim_patch
        self.assertEqual(sim_patch.merge_patch({"a": {"b": 1, "c": 2}, "l": [1]},
                                               {"a": {"b": None, "d": 3}, "l": [2]}),
                         {"a": {"c": 2, "d": 3}, "l": [2]})
        doc = {"a": [1, 2], "b": {"c": 1}}
        out = sim_patch.json_patch(doc, [{"op": "add", "path": "/a/-", "value": 3},
                                         {"op": "add", "path": "/a/0", "value": 0},
                                         {"op": "move", "from": "/b/c", "path": "/d"},
                                         {"op": "copy", "from": "/d", "path": "/e~1f"}])
        self.assertEqual(out, {"a": [0, 1, 2, 3], "b": {}, "d": 1, "e/f": 1})
        self.assertEqual(doc, {"a": [1, 2], "b": {"c": 1}}, "the input is not mutated")
        for ops in ([{"op": "remove", "path": "/nope"}], [{"op": "add", "path": "/a/9",
                                                         "value": 1}],
                    [{"op": "frob", "path": "/a"}], {"op": "add"}, [{"path": "/a"}]):
            with self.assertRaises(sim_patch.PatchError):
                sim_patch.json_patch(doc, ops)

    def test_strategic_merge_patch(self):
        import sim_patch
        orig = {"containers": [{"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]},
                               {"name": "b", "image": "1"}], "args": ["p", "q"],
                "ports": [{"containerPort": 80, "name": "http"}]}
        out = sim_patch.strategic_merge_patch(orig, {
            "containers": [{"name": "b", "$patch": "delete"},
                           {"name": "a", "env": [{"name": "Y", "value": "2"}]},
                           {"name": "c", "image": "3"}],
            "$deleteFromPrimitiveList/args": ["p"],
            "ports": [{"containerPort": 81}], "$retainKeys": ["containers"]})
        self.assertEqual([c["name"] for c in out["containers"]], ["a", "c"])
        self.assertEqual(out["containers"][0]["env"], [{"name": "X", "value": "1"},
                                                       {"name": "Y", "value": "2"}])
        self.assertEqual(out["args"], ["q"])
        self.assertEqual(out["ports"], [{"containerPort": 80, "name": "http"},
                                        {"containerPort": 81}])
        self.assertEqual(sim_patch.strategic_merge_patch({"m": {"a": 1}},
                                                         {"m": {"$patch": "replace", "b": 2}}),
                         {"m": {"b": 2}})

    def test_selectors(self):
        import sim_selectors as s
        m = s.parse_label_selector("env in (prod, staging),!canary,tier")
        self.assertTrue(m({"env": "prod", "tier": "web"}))
        self.assertFalse(m({"env": "prod", "tier": "web", "canary": "1"}))
        self.assertFalse(m({"env": "dev", "tier": "web"}))
        self.assertTrue(s.parse_label_selector("")({}))
        for bad in ("a in (b", "a b", "!a in (b)", "=x"):
            with self.assertRaises(s.SelectorError):
                s.parse_label_selector(bad)
        sel = {"matchLabels": {"a": "1"}, "matchExpressions": [
            {"key": "b", "operator": "NotIn", "values": ["x"]},
            {"key": "c", "operator": "Exists"}]}
        self.assertEqual(s.selector_string(sel), "a=1,b notin (x),c")
        self.assertTrue(s.match_labels_selector(sel)({"a": "1", "c": ""}))
        self.assertFalse(s.match_labels_selector(sel)({"a": "1", "b": "x", "c": ""}))
        f = s.parse_field_selector("status.phase=Running,metadata.name!=x")
        self.assertTrue(f({"metadata": {"name": "y"}, "status": {"phase": "Running"}}))
        self.assertFalse(f({"metadata": {"name": "x"}, "status": {"phase": "Running"}}))

    def test_jsonpath_and_ages(self):
        import sim_table
        obj = {"status": {"conditions": [{"type": "A", "status": "x"},
                                         {"type": "Ready", "status": "True"}]},
               "spec": {"pools": [{"n": 1}, {"n": 2}]}}
        self.assertEqual(sim_table.jsonpath(obj, '.status.conditions[?(@.type=="Ready")].status'),
                         ["True"])
        self.assertEqual(sim_table.jsonpath(obj, ".spec.pools[*].n"), [1, 2])
        self.assertEqual(sim_table.jsonpath(obj, "{.spec.pools[1].n}"), [2])
        self.assertEqual(sim_table.jsonpath(obj, ".spec.missing.x"), [])
        with self.assertRaises(ValueError):
            sim_table.jsonpath(obj, ".spec[?bad")
        # kubectl's (apimachinery's HumanDuration) buckets.
        self.assertEqual([sim_table.human_duration(x) for x in (
            5, 130, 700, 7300, 14460, 90000, 86400 * 3 + 3600, 86400 * 40, 86400 * 800,
            86400 * 365 * 9)],
            ["5s", "2m10s", "11m", "121m", "4h1m", "25h", "3d1h", "40d", "2y70d", "9y"])


class DiscoveryTest(SimTestCase):
    def test_version_and_core(self):
        v = self.sim.ok("GET", "/version")
        self.assertEqual(v["major"], "1")
        api = self.sim.ok("GET", "/api")
        self.assertEqual(api["versions"], ["v1"])
        core = self.sim.ok("GET", "/api/v1")
        names = {r["name"]: r for r in core["resources"]}
        for n in ("namespaces", "configmaps", "secrets", "services", "pods", "pods/status",
                  "events", "serviceaccounts"):
            self.assertIn(n, names)
        self.assertFalse(names["namespaces"]["namespaced"])
        self.assertIn("watch", names["pods"]["verbs"])

    def test_groups_and_crd_resources(self):
        groups = {g["name"] for g in self.sim.ok("GET", "/apis")["groups"]}
        self.assertTrue({"apps", "policy", "coordination.k8s.io", "events.k8s.io",
                         "apiextensions.k8s.io", "tandem.dev"} <= groups)
        apps = {r["name"]: r for r in self.sim.ok("GET", "/apis/apps/v1")["resources"]}
        self.assertEqual(apps["statefulsets/scale"]["kind"], "Scale")
        self.assertEqual(apps["statefulsets/scale"]["group"], "autoscaling")
        td = {r["name"]: r for r in self.sim.ok("GET", "/apis/tandem.dev/v1alpha1")["resources"]}
        self.assertEqual(td["modeldeployments"]["shortNames"], ["mdep"])
        self.assertEqual(td["modeldeployments"]["kind"], "ModelDeployment")
        self.assertIn("modeldeployments/status", td)
        self.assertIn("modelpools/scale", td)
        self.assertNotIn("modeldeployments/scale", td)
        code, body = self.sim.req("GET", "/apis/nope/v1")
        self.assertEqual(code, 404)
        self.assertEqual(body["kind"], "Status")


class CrudTest(SimTestCase):
    def test_create_fields_and_global_resource_version(self):
        a = self.sim.ok("POST", CMS, cm("crud-a"))
        b = self.sim.ok("POST", CMS, {"metadata": {"generateName": "gen-"}, "data": {}})
        self.assertTrue(b["metadata"]["name"].startswith("gen-"))
        self.assertEqual(len(b["metadata"]["name"]), len("gen-") + 5)
        self.assertGreater(int(b["metadata"]["resourceVersion"]),
                           int(a["metadata"]["resourceVersion"]))
        self.assertEqual(a["metadata"]["generation"], 1)
        self.assertNotEqual(a["metadata"]["uid"], b["metadata"]["uid"])
        self.assertRegex(a["metadata"]["creationTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        code, st = self.sim.req("POST", CMS, cm("crud-a"))
        self.assertEqual((code, st["kind"], st["reason"]), (409, "Status", "AlreadyExists"))
        code, st = self.sim.req("POST", CMS, dict(a, metadata=dict(a["metadata"], name="copy")))
        self.assertEqual(code, 500)
        self.assertIn("resourceVersion should not be set on objects to be created", st["message"])
        code, st = self.sim.req("PUT", CMS + "/crud-a", dict(a, metadata=dict(a["metadata"],
                                                                            uid="other")))
        self.assertEqual((code, st["reason"]), (409, "Conflict"))
        code, st = self.sim.req("POST", "/api/v1/namespaces/nope/configmaps", cm("x"))
        self.assertEqual((code, st["reason"]), (404, "NotFound"))
        code, st = self.sim.req("GET", CMS + "/missing")
        self.assertEqual((code, st["reason"], st["code"]), (404, "NotFound", 404))

    def test_update_conflict_and_generation(self):
        obj = self.sim.ok("POST", MDEP, mdep("gen", decode={"replicas": 1}))
        self.assertEqual(obj["metadata"]["generation"], 1)
        stale = json.loads(json.dumps(obj))
        obj["metadata"]["labels"] = {"a": "b"}
        obj = self.sim.ok("PUT", MDEP + "/gen", obj)
        self.assertEqual(obj["metadata"]["generation"], 1, "a label change is not a spec change")
        obj["spec"]["decode"]["replicas"] = 2
        obj = self.sim.ok("PUT", MDEP + "/gen", obj)
        self.assertEqual(obj["metadata"]["generation"], 2)
        stale["spec"]["decode"]["replicas"] = 5
        code, st = self.sim.req("PUT", MDEP + "/gen", stale)
        self.assertEqual((code, st["reason"]), (409, "Conflict"))
        self.assertIn("the object has been modified", st["message"])
        # The main resource ignores status; /status changes only status.
        obj["status"] = {"observedGeneration": 2}
        obj = self.sim.ok("PUT", MDEP + "/gen", obj)
        self.assertNotIn("status", obj)
        obj["status"] = {"observedGeneration": 2}
        obj["spec"]["decode"]["replicas"] = 9
        after = self.sim.ok("PUT", MDEP + "/gen/status", obj)
        self.assertEqual(after["status"], {"observedGeneration": 2})
        self.assertEqual(after["spec"]["decode"]["replicas"], 2)
        self.assertEqual(after["metadata"]["generation"], 2)
        # Custom resources allow no unconditional update (PUT without resourceVersion).
        blind = json.loads(json.dumps(after))
        del blind["metadata"]["resourceVersion"]
        code, st = self.sim.req("PUT", MDEP + "/gen", blind)
        self.assertEqual(code, 422)
        self.assertIn("metadata.resourceVersion: Invalid value: 0x0: must be specified",
                      st["message"])
        # A no-op write keeps the resourceVersion.
        again = self.sim.ok("PUT", MDEP + "/gen", after)
        self.assertEqual(again["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"])

    def test_validation_and_defaults(self):
        obj = self.sim.ok("POST", MDEP, mdep("dflt", decode={"replicas": 1}))
        self.assertEqual(obj["spec"]["decode"]["weights"], "bf16")
        code, st = self.sim.req("POST", MDEP, mdep("bad", decode={"weights": "int8"}))
        self.assertEqual((code, st["reason"]), (422, "Invalid"))
        self.assertIn('spec.decode.weights: Unsupported value: "int8"', st["message"])
        code, st = self.sim.req("PATCH", MDEP + "/dflt", {"spec": {"prefill": {"weights": "q"}}},
                                "application/merge-patch+json")
        self.assertEqual(code, 422)
        bad_crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "things.example.com"},
                   "spec": {"group": "example.com", "scope": "Namespaced",
                            "names": {"plural": "things", "kind": "Thing"},
                            "versions": [{"name": "v1", "served": True, "storage": True}]}}
        code, st = self.sim.req("POST", CRDS, bad_crd)
        self.assertEqual(code, 422, st)

    def test_patches(self):
        self.sim.ok("POST", MDEP, mdep("pat", decode={"replicas": 1}))
        obj = self.sim.ok("PATCH", MDEP + "/pat", {"metadata": {"labels": {"x": "1"}},
                                                   "spec": {"decode": {"replicas": 3}}},
                          "application/merge-patch+json")
        self.assertEqual((obj["spec"]["decode"]["replicas"], obj["metadata"]["labels"]),
                         (3, {"x": "1"}))
        self.assertEqual(obj["metadata"]["generation"], 2)
        obj = self.sim.ok("PATCH", MDEP + "/pat", [
            {"op": "test", "path": "/spec/decode/replicas", "value": 3},
            {"op": "replace", "path": "/spec/decode/replicas", "value": 4},
            {"op": "remove", "path": "/metadata/labels/x"}], "application/json-patch+json")
        self.assertEqual(obj["spec"]["decode"]["replicas"], 4)
        self.assertEqual(obj["metadata"].get("labels"), {})
        code, _ = self.sim.req("PATCH", MDEP + "/pat", [{"op": "test", "path": "/spec/decode/"
                                                         "replicas", "value": 99}],
                               "application/json-patch+json")
        self.assertEqual(code, 422)
        code, _ = self.sim.req("PATCH", MDEP + "/pat", {"spec": {}},
                               "application/strategic-merge-patch+json")
        self.assertEqual(code, 415, "no strategic merge patch for custom resources")
        # A stale resourceVersion in a patch is a conflict.
        code, st = self.sim.req("PATCH", MDEP + "/pat", {"metadata": {"resourceVersion": "1"}},
                                "application/merge-patch+json")
        self.assertEqual(code, 409)
        # Status patch through the subresource.
        obj = self.sim.ok("PATCH", MDEP + "/pat/status", {"status": {"observedGeneration": 3}},
                          "application/merge-patch+json")
        self.assertEqual(obj["status"]["observedGeneration"], 3)
        # Strategic merge on a built-in: containers merge by name.
        dep = {"metadata": {"name": "smp"}, "spec": {
            "replicas": 0, "selector": {"matchLabels": {"app": "smp"}},
            "template": {"metadata": {"labels": {"app": "smp"}}, "spec": {"containers": [
                {"name": "a", "image": "a:1", "args": ["x"]}, {"name": "b", "image": "b:1"}]}}}}
        self.sim.ok("POST", DEPLOYS, dep)
        obj = self.sim.ok("PATCH", DEPLOYS + "/smp", {"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "b", "image": "b:2"}]}}}},
            "application/strategic-merge-patch+json")
        cs = obj["spec"]["template"]["spec"]["containers"]
        self.assertEqual([(c["name"], c["image"]) for c in cs], [("a", "a:1"), ("b", "b:2")])
        self.assertEqual(cs[0]["args"], ["x"])

    def test_builtin_server_defaults(self):
        svc = self.sim.ok("POST", "/api/v1/namespaces/default/services", {
            "metadata": {"name": "svc"}, "spec": {"selector": {"app": "x"},
                                                  "ports": [{"name": "http", "port": 80}]}})
        spec = svc["spec"]
        self.assertEqual((spec["type"], spec["ports"][0]["protocol"],
                          spec["ports"][0]["targetPort"]), ("ClusterIP", "TCP", 80))
        self.assertTrue(spec["clusterIP"])
        # An update that leaves the allocated address out keeps it and changes nothing.
        again = self.sim.ok("PUT", "/api/v1/namespaces/default/services/svc", {
            "metadata": {"name": "svc"}, "spec": {"selector": {"app": "x"},
                                                  "ports": [{"name": "http", "port": 80}]}})
        self.assertEqual(again["spec"], spec)
        self.assertEqual(again["metadata"]["resourceVersion"], svc["metadata"]["resourceVersion"])
        headless = self.sim.ok("POST", "/api/v1/namespaces/default/services", {
            "metadata": {"name": "hl"}, "spec": {"clusterIP": "None"}})
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        s = self.sim.ok("POST", STS, sts("dflt", 0))
        tspec = s["spec"]["template"]["spec"]
        self.assertEqual(tspec["containers"][0]["imagePullPolicy"], "Always")
        self.assertEqual(tspec["restartPolicy"], "Always")
        self.assertEqual(s["spec"]["podManagementPolicy"], "OrderedReady")
        sec = self.sim.ok("POST", "/api/v1/namespaces/default/secrets", {
            "metadata": {"name": "sec"}, "stringData": {"k": "v"}})
        self.assertEqual((sec["data"], sec["type"]), ({"k": "dg=="}, "Opaque"))
        self.assertNotIn("stringData", sec)

    def test_bad_input_is_a_clear_error(self):
        cases = [
            (CMS, {"metadata": {"name": "Bad_Name"}}, "metadata.name: Invalid value"),
            (CMS, {"metadata": {"name": 7}}, "metadata.name: Invalid value"),
            (CMS, {"metadata": {"name": "l", "labels": {"a": 1}}}, "metadata.labels"),
            (CMS, {"metadata": {"name": "l", "labels": {"a": "b c"}}}, "a valid label"),
            (CMS, {"metadata": {"name": "f", "finalizers": "x"}}, "metadata.finalizers"),
            (CMS, {"metadata": {"name": "o", "ownerReferences": [{"kind": "X"}]}},
             "metadata.ownerReferences[0].uid: Required value"),
            (CMS, {"metadata": {}}, "name or generateName is required"),
            (STS, dict(sts("r", -1)), "spec.replicas"),
            (STS, {"metadata": {"name": "nosel"}, "spec": {"template": {"spec": {}}}},
             "spec.selector: Required value"),
        ]
        mismatch = sts("m", 1)
        mismatch["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
        cases.append((STS, mismatch, "`selector` does not match template `labels`"))
        for path, body, want in cases:
            code, st = self.sim.req("POST", path, body)
            self.assertEqual((code, st.get("reason")), (422, "Invalid"), body)
            self.assertIn(want, st["message"])
        for raw in (b"{", b"[1]", b"null"):
            code, st = self.sim.req("POST", CMS, raw)
            self.assertEqual((code, st["kind"]), (400, "Status"), raw)
        code, st = self.sim.req("PATCH", CMS + "/x", b"{}", "text/plain")
        self.assertIn(code, (404, 415))
        code, st = self.sim.req("POST", CMS, b"\x00k8s", "application/vnd.kubernetes.protobuf")
        self.assertEqual((code, st["reason"]), (415, "UnsupportedMediaType"))
        code, st = self.sim.req("POST", "/sim/pods-ready", {"selector": "a in ("})
        self.assertEqual(code, 400)

    def test_dry_run_writes_nothing(self):
        rv = self.sim.ok("GET", CMS)["metadata"]["resourceVersion"]
        self.sim.ok("POST", CMS + "?dryRun=All", cm("dry"))
        code, _ = self.sim.req("GET", CMS + "/dry")
        self.assertEqual(code, 404)
        self.assertEqual(self.sim.ok("GET", CMS)["metadata"]["resourceVersion"], rv)


class ListTest(SimTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.sim.ok("POST", "/api/v1/namespaces", {"metadata": {"name": "lists"}})
        for i in range(10):
            labels = {"idx": str(i), "tier": "even" if i % 2 == 0 else "odd"}
            if i < 3:
                labels["low"] = "yes"
            cls.sim.ok("POST", "/api/v1/namespaces/lists/configmaps", cm("c%d" % i, labels=labels))

    def names(self, query):
        lst = self.sim.ok("GET", "/api/v1/namespaces/lists/configmaps?" + query)
        return sorted(o["metadata"]["name"] for o in lst["items"])

    def test_label_selectors(self):
        self.assertEqual(self.names("labelSelector=tier%3Deven,low"), ["c0", "c2"])
        self.assertEqual(self.names("labelSelector=tier!%3Deven,idx+in+(1,3,4)"), ["c1", "c3"])
        self.assertEqual(self.names("labelSelector=idx+notin+(0,1,2,3,4,5,6,7),!low"), ["c8", "c9"])
        self.assertEqual(self.names("labelSelector=tier%3D%3Dodd,idx%3D9"), ["c9"])
        code, st = self.sim.req("GET", "/api/v1/namespaces/lists/configmaps?labelSelector=a+in+(")
        self.assertEqual((code, st["reason"]), (400, "BadRequest"))

    def test_field_selectors(self):
        self.assertEqual(self.names("fieldSelector=metadata.name%3Dc4"), ["c4"])
        self.assertEqual(len(self.names("fieldSelector=metadata.namespace%3Dlists,"
                                        "metadata.name!%3Dc4")), 9)
        all_ns = self.sim.ok("GET", "/api/v1/configmaps?fieldSelector=metadata.namespace%3Dlists")
        self.assertEqual(len(all_ns["items"]), 10)

    def test_pagination_is_a_consistent_snapshot(self):
        base = "/api/v1/namespaces/lists/configmaps"
        first = self.sim.ok("GET", base + "?limit=4")
        self.assertEqual(len(first["items"]), 4)
        self.assertEqual(first["metadata"]["remainingItemCount"], 6)
        rv = first["metadata"]["resourceVersion"]
        # Writes between pages are not seen by the rest of the list.
        self.sim.ok("POST", base, cm("c99"))
        self.sim.ok("DELETE", base + "/c9")
        seen = [o["metadata"]["name"] for o in first["items"]]
        cont = first["metadata"]["continue"]
        while cont:
            page = self.sim.ok("GET", base + "?limit=4&continue=" + cont)
            self.assertEqual(page["metadata"]["resourceVersion"], rv)
            seen += [o["metadata"]["name"] for o in page["items"]]
            cont = page["metadata"].get("continue")
        self.assertEqual(seen, ["c%d" % i for i in range(10)])
        self.assertEqual(len(self.sim.ok("GET", base)["items"]), 10)  # c99 in, c9 out
        self.sim.ok("DELETE", base + "/c99")
        self.sim.ok("POST", base, cm("c9", labels={"idx": "9", "tier": "odd"}))
        code, _ = self.sim.req("GET", base + "?limit=4&continue=bm90LWpzb24")
        self.assertEqual(code, 400)


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
    def test_statefulset_pods_scale_and_readiness(self):
        s = self.sim.ok("POST", STS, sts("web", 3))
        pods = self.sim.ok("GET", PODS + "?labelSelector=app%3Dweb")["items"]
        self.assertEqual(sorted(p["metadata"]["name"] for p in pods), ["web-0", "web-1", "web-2"])
        ref = pods[0]["metadata"]["ownerReferences"][0]
        self.assertEqual((ref["kind"], ref["uid"], ref["controller"]),
                         ("StatefulSet", s["metadata"]["uid"], True))
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
        pods = self.sim.ok("GET", PODS + "?labelSelector=app%3Dweb")["items"]
        self.assertEqual([p["metadata"]["name"] for p in pods], ["web-0"])
        st = self.sim.ok("GET", STS + "/web")["status"]
        self.assertEqual((st["replicas"], st["observedGeneration"]), (1, 2))
        scale = self.sim.ok("GET", STS + "/web/scale")
        self.assertEqual(scale["status"]["selector"], "app=web")
        # A deleted pod comes back; deleting the StatefulSet takes its pods.
        self.sim.ok("DELETE", PODS + "/web-0")
        self.sim.ok("GET", PODS + "/web-0")
        self.sim.ok("DELETE", STS + "/web")
        self.assertEqual(self.sim.ok("GET", PODS + "?labelSelector=app%3Dweb")["items"], [])

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
        self.sim.ok("POST", STS, sts("auto", 2))
        st = self.sim.ok("GET", STS + "/auto")["status"]
        self.assertEqual(st["readyReplicas"], 2)
        pod = self.sim.ok("GET", PODS + "/auto-0")
        self.assertEqual(pod["status"]["phase"], "Running")


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


@unittest.skipIf(shutil.which("openssl") is None, "no openssl CLI to make test certificates")
class AuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kube-sim-certs-")
        cls.certs = make_certs(cls.dir)

    def ctx(self, client_cert):
        import ssl
        ctx = ssl.create_default_context(cafile=self.certs["ca.crt"])
        if client_cert:
            ctx.load_cert_chain(self.certs["client.crt"], self.certs["client.key"])
        return ctx

    def test_token(self):
        sim = SimProcess("--token", "s3cret", token="s3cret")
        try:
            self.assertEqual(sim.req("GET", CMS)[0], 200)
            sim.token = None
            code, st = sim.req("GET", CMS)
            self.assertEqual((code, st["reason"]), (401, "Unauthorized"))
            self.assertEqual(sim.req("GET", CMS, headers={"Authorization": "Bearer no"})[0], 401)
            self.assertEqual(sim.req("GET", "/version")[0], 200)
        finally:
            self.assertEqual(sim.stop(), 0)

    def test_tls_client_certificates(self):
        c = self.certs
        sim = SimProcess("--tls-cert", c["server.crt"], "--tls-key", c["server.key"],
                         "--client-ca", c["ca.crt"], tls_context=self.ctx(True))
        try:
            self.assertEqual(sim.req("GET", CMS)[0], 200)
            sim.tls_context = self.ctx(False)
            sim._conn = None
            with self.assertRaises(OSError):
                sim.req("GET", CMS)
        finally:
            sim._conn = None
            sim.stop()

    def test_tls_with_token(self):
        c = self.certs
        sim = SimProcess("--tls-cert", c["server.crt"], "--tls-key", c["server.key"],
                         "--client-ca", c["ca.crt"], "--token", "t",
                         tls_context=self.ctx(False), token="t")
        try:
            self.assertEqual(sim.req("GET", CMS)[0], 200)
            sim.token = None
            self.assertEqual(sim.req("GET", CMS)[0], 401)
        finally:
            sim.stop()


class ShutdownTest(unittest.TestCase):
    @unittest.skipUnless(os.path.exists("/proc/self/status"), "needs /proc")
    def test_abandoned_watches_free_their_threads(self):
        sim = SimProcess()

        def threads():
            with open("/proc/%d/status" % sim.proc.pid) as f:
                return int([x for x in f if x.startswith("Threads:")][0].split()[1])
        try:
            base = threads()
            streams = [WatchStream(sim, CMS + "?watch=1") for _ in range(20)]
            self.assertGreaterEqual(threads(), base + 20)
            for w in streams:
                w.close()
            wait_for(lambda: threads() <= base, 15, "watch threads to end")
        finally:
            sim.stop()

    def test_sigterm_with_open_watch(self):
        sim = SimProcess()
        w = WatchStream(sim, CMS + "?watch=1")
        self.assertEqual(w.status, 200)
        self.assertEqual(sim.stop(), 0)
        w.close()


class OfficialClientTest(SimTestCase):
    """The same server through the official `kubernetes` Python client."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        import kubernetes
        cfg = kubernetes.client.Configuration()
        cfg.host = cls.sim.url
        cls.api = kubernetes.client.ApiClient(cfg)
        cls.k8s = kubernetes

    @classmethod
    def tearDownClass(cls):
        cls.api.close()
        super().tearDownClass()

    def test_core_and_apps(self):
        core = self.k8s.client.CoreV1Api(self.api)
        apps = self.k8s.client.AppsV1Api(self.api)
        core.create_namespace({"metadata": {"name": "pyclient"}})
        cmap = core.create_namespaced_config_map("pyclient", {"metadata": {"name": "c"},
                                                              "data": {"a": "1"}})
        self.assertEqual(cmap.metadata.generation, 1)
        cmap.data["a"] = "2"
        cmap = core.replace_namespaced_config_map("c", "pyclient", cmap)
        stale = core.read_namespaced_config_map("c", "pyclient")
        core.patch_namespaced_config_map("c", "pyclient", {"data": {"b": "3"}})
        stale.data["a"] = "9"
        with self.assertRaises(self.k8s.client.ApiException) as ctx:
            core.replace_namespaced_config_map("c", "pyclient", stale)
        self.assertEqual(ctx.exception.status, 409)
        page = core.list_namespaced_config_map("pyclient", limit=1)
        self.assertEqual(len(page.items), 1)
        apps.create_namespaced_stateful_set("pyclient", sts("py", 2))
        got = apps.read_namespaced_stateful_set("py", "pyclient")
        self.assertEqual(got.status.replicas, 2)
        pods = core.list_namespaced_pod("pyclient", label_selector="app=py")
        self.assertEqual(len(pods.items), 2)
        apps.patch_namespaced_stateful_set_scale("py", "pyclient", {"spec": {"replicas": 3}})
        self.assertEqual(len(core.list_namespaced_pod("pyclient").items), 3)
        core.delete_namespace("pyclient")
        with self.assertRaises(self.k8s.client.ApiException) as ctx:
            core.read_namespace("pyclient")
        self.assertEqual(ctx.exception.status, 404)

    def test_custom_objects_and_watch(self):
        co = self.k8s.client.CustomObjectsApi(self.api)
        args = ("tandem.dev", "v1alpha1", "default", "modeldeployments")
        created = co.create_namespaced_custom_object(*args, mdep("py-mdep"))
        rv = created["metadata"]["resourceVersion"]
        co.patch_namespaced_custom_object_status(*args, "py-mdep", {"status": {
            "observedGeneration": 1}})
        co.patch_namespaced_custom_object(*args, "py-mdep", {"spec": {"decode": {"replicas": 2}}})
        with self.assertRaises(self.k8s.client.ApiException) as ctx:
            co.create_namespaced_custom_object(*args, mdep("py-bad", prefill={"weights": "x"}))
        self.assertEqual(ctx.exception.status, 422)
        seen = []
        w = self.k8s.watch.Watch()
        for ev in w.stream(co.list_namespaced_custom_object, *args, resource_version=rv,
                           timeout_seconds=1):
            seen.append((ev["type"], ev["object"]["metadata"].get("generation")))
        self.assertEqual(seen, [("MODIFIED", 1), ("MODIFIED", 2)])
        co.delete_namespaced_custom_object(*args, "py-mdep")
        lst = co.list_namespaced_custom_object(*args)
        self.assertNotIn("py-mdep", [o["metadata"]["name"] for o in lst["items"]])


if __name__ == "__main__":
    unittest.main(verbosity=2)
