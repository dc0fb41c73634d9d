"""kube-sim cases: helper functions, discovery, create/update/patch semantics, lists."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_testlib import CMS, CRDS, DEPLOYS, MDEP, STS, SimTestCase, cm, mdep, sts  # noqa: E402


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
        shadow = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                  "metadata": {"name": "deployments.apps"},
                  "spec": {"group": "apps", "scope": "Namespaced",
                           "names": {"plural": "deployments", "kind": "Deployment"},
                           "versions": [{"name": "v9", "served": True, "storage": True,
                                         "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
        code, st = self.sim.req("POST", CRDS, shadow)
        self.assertEqual(code, 422)
        self.assertIn("served by the API server itself", st["message"])

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

    def test_crd_with_two_versions(self):
        def version(name, storage, required):
            return {"name": name, "served": True, "storage": storage, "schema": {
                "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "required": required,
                    "properties": {"size": {"type": "integer"}, "color": {"type": "string"}}}}}}}
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "gadgets.example.com"},
               "spec": {"group": "example.com", "scope": "Namespaced",
                        "names": {"plural": "gadgets", "kind": "Gadget"},
                        "versions": [version("v1", False, []), version("v2", True, ["size"])]}}
        self.sim.ok("POST", CRDS, crd)
        groups = {g["name"]: g for g in self.sim.ok("GET", "/apis")["groups"]}
        self.assertEqual(groups["example.com"]["preferredVersion"]["version"], "v2",
                         "the storage version is preferred")
        v1 = "/apis/example.com/v1/namespaces/default/gadgets"
        v2 = "/apis/example.com/v2/namespaces/default/gadgets"
        self.sim.ok("POST", v1, {"apiVersion": "example.com/v1", "kind": "Gadget",
                                 "metadata": {"name": "g"}, "spec": {"color": "red"}})
        self.assertEqual(self.sim.ok("GET", v2 + "/g")["apiVersion"], "example.com/v2")
        self.assertEqual(self.sim.ok("GET", v1 + "/g")["apiVersion"], "example.com/v1")
        code, st = self.sim.req("POST", v2, {"apiVersion": "example.com/v2", "kind": "Gadget",
                                             "metadata": {"name": "h"}, "spec": {}})
        self.assertEqual(code, 422, "v2's schema requires spec.size")
        self.assertIn("spec.size: Required value", st["message"])
        code, st = self.sim.req("POST", v1, {"apiVersion": "example.com/v2", "kind": "Gadget",
                                             "metadata": {"name": "h"}, "spec": {"size": 1}})
        self.assertEqual(code, 400)
        self.assertIn("does not match the expected API version (example.com/v1)", st["message"])
        self.sim.ok("DELETE", CRDS + "/gadgets.example.com")

    def test_chunked_request_body_and_keep_alive(self):
        conn = self.sim.connect()
        body = json.dumps(cm("chunked", data={"k": "v"})).encode()
        conn.request("POST", CMS, body=iter([body[:10], body[10:]]),
                     headers={"Content-Type": "application/json"}, encode_chunked=True)
        resp = conn.getresponse()
        self.assertEqual((resp.status, json.loads(resp.read())["data"]), (201, {"k": "v"}))
        for _ in range(3):  # the same connection serves the next requests
            conn.request("GET", CMS + "/chunked")
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertEqual(int(resp.getheader("Content-Length")), len(resp.read()))
        conn.close()

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
