"""The Helm chart end to end: `helm template | kubectl apply -f -` into kube-sim, then
tandem-controller started with the rendered Deployment's own arguments reconciles
deploy/examples/tiny-cpu.yaml to Ready, under RBAC that is checked against what it sent.

kube-sim serves neither RBAC nor NetworkPolicies nor the Prometheus Operator's kinds, so the test
first registers schemaless stand-in CRDs for them (their real schemas are test_chart.py's job):
kubectl then applies the whole chart, every optional object on, as it would to a cluster. kube-sim
does not enforce RBAC either, hence the RBAC tests: every (verb, resource) the controller sent
in the run (kube-sim's /sim/stats, less the test's own requests) must be granted by the rendered
ClusterRole or the leader-election Role (the Lease by name, in the Role's namespace), and every
grant there must have been used in the run or be listed in UNEXERCISED with its reason. The run
covers creating every child, updating each kind on a spec change or drift, pruning a stale child
of each built-in kind, status writes, Events, the Lease, and deletion through the finalizer.

Run: TANDEM_CONTROLLER=build/controller/tandem-controller .venv/bin/python tests/deploy/test_chart_e2e.py
"""

import collections
import os
import re
import signal
import subprocess
import sys
import unittest

import yaml

from deploy_lib import NAMESPACE, REPO, find, rbac_grants, render_text, restricted_violations

sys.path.insert(0, os.path.join(REPO, "tests", "controller"))
from e2e_lib import CONTROLLER, Cluster, is_ready, wait_for  # noqa: E402

# Kinds the chart renders that kube-sim does not serve: (group, version, plural, kind, namespaced).
STAND_INS = [
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True),
    ("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", True),
    ("monitoring.coreos.com", "v1", "podmonitors", "PodMonitor", True),
    ("monitoring.coreos.com", "v1", "prometheusrules", "PrometheusRule", True),
]
# Every optional object of the chart on; the agent NetworkPolicies in "default", where the example
# runs.
CHART_SETTINGS = ["metrics.serviceMonitor.enabled=true", "metrics.podMonitor.enabled=true",
                  "metrics.prometheusRule.enabled=true", "dashboards.enabled=true", "networkPolicy.enabled=true",
                  "networkPolicy.agentNamespaces={default}"]

# Grants the run does not exercise, and why they are there anyway. (group, resource, verb).
UNEXERCISED = {
    ("tandem.dev", "modeldeployments", "get"):
        "the store's live GET when its cache misses (a ModelDeployment deleted between the event and "
        "the reconcile); the informers' cache answers every other read",
    ("tandem.dev", "modeldeployments/finalizers", "update"):
        "no request of its own: the OwnerReferencesPermissionEnforcement admission plugin asks for it "
        "when a child's ownerReference sets blockOwnerDeletion",
    ("tandem.dev", "modelpools/finalizers", "update"): "as modeldeployments/finalizers",
    ("", "events", "get"):
        "a repeat of an identical Event within 10 minutes reads the existing one to add to its count; "
        "this run records no repeat (the autoscaler's repeated decisions do: controller.autoscale_sim "
        "checks the counts, ReconcilerTest.EventsAreRecordedForTransitionsAndAggregated the calls)",
    ("", "events", "update"): "as events get: the count and lastTimestamp of the existing Event",
    ("", "pods", "get"): "as modeldeployments get: the store's live GET on a cache miss (an eval Pod not cached yet)",
    ("", "pods", "create"):
        "the quality gate's eval Pod (spec.rollout.qualityGate, not set in this run): created, read and "
        "deleted in controller.quality_gate",
    ("", "pods", "update"): "as pods create: our labels or annotations restored on a drifted eval Pod",
    ("", "pods", "delete"): "as pods create: the eval Pod pruned once its verdict is recorded",
    ("tandem.dev", "modelpools", "delete"):
        "pruning a ModelPool the plan no longer wants; the same code path (apply.cc) is exercised "
        "here for every built-in kind; a stale ModelPool would be reconciled into pods of its own first",
}


def resource_key(path):
    """kube-sim's stats key ("configmaps", "modelpools.tandem.dev/status") and whether the path
    names one object, for an API path."""
    parts = path.split("?")[0].strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if rest and rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    plural = rest[0]
    named = len(rest) > 1
    sub = "/" + rest[2] if len(rest) > 2 else ""
    return (plural + "." + group if group else plural) + sub, named


def split_key(key):
    """"modelpools.tandem.dev/status" -> ("tandem.dev", "modelpools/status")."""
    name, _, sub = key.partition("/")
    plural, _, group = name.partition(".")
    return group, plural + ("/" + sub if sub else "")


class ChartE2ETest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.c = c = Cluster()
        cls.mine = collections.Counter()  # the test's own requests, by kube-sim's stats key
        try:
            cls.run_scenario()
        except BaseException:
            cls.dump_logs()
            c.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.c.stop()

    @classmethod
    def dump_logs(cls):
        for proc in cls.c.controllers:
            sys.stderr.write("--- controller log ---\n" + cls.c.controller_log(proc)[-6000:] + "\n")

    @classmethod
    def api(cls, method, path, body=None, ctype="application/json", want=(200, 201)):
        """A request of the test's own, counted so it is not taken for the controller's."""
        key, named = resource_key(path)
        verb = {"GET": "get" if named else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}[method]
        cls.mine["%s %s" % (verb, key)] += 1
        code, obj = cls.c.sim.req(method, path, body, ctype=ctype)
        if want and code not in want:
            raise AssertionError("%s %s: %d %s" % (method, path, code, obj))
        return obj

    @classmethod
    def get(cls, path):
        """The object, or None when there is none."""
        key, _ = resource_key(path)
        cls.mine["get %s" % key] += 1
        code, obj = cls.c.sim.req("GET", path)
        return obj if code == 200 else None

    @classmethod
    def run_scenario(cls):
        c = cls.c
        c.kubectl("apply", "--validate=false", "-f", "-", stdin=cls.stand_in_crds())
        c.kubectl("apply", "--validate=false", "-f", "-",
                  stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n" % NAMESPACE)
        settings = [a for s in CHART_SETTINGS for a in ("--set", s)]
        cls.rendered_text = render_text(None, *settings, include_crds=True)
        cls.applied = c.kubectl("apply", "--validate=false", "-f", "-", stdin=cls.rendered_text).stdout
        cls.docs = [d for d in yaml.safe_load_all(cls.rendered_text) if d]
        c.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "deploy", "examples", "tiny-cpu.yaml"))

        c.sim.ok("DELETE", "/sim/stats")  # from here on, only the controller and cls.api() send
        cls.controller = cls.start_rendered_controller()
        mdep = "/apis/tandem.dev/v1alpha1/namespaces/default/modeldeployments/tiny-cpu"
        wait_for(lambda: cls.get("/apis/apps/v1/namespaces/default/statefulsets/tiny-cpu-decode"), 60,
                 "the controller to create the pools' StatefulSets")
        c.pods_ready("tandem.dev/deployment=tiny-cpu")
        cls.ready = wait_for(lambda: (lambda m: m if is_ready(m) else None)(cls.get(mdep)), 60, "tiny-cpu Ready")
        cls.agent_pods = {
            "StatefulSet " + s["metadata"]["name"]: s["spec"]["template"]["spec"]
            for s in cls.api("GET", "/apis/apps/v1/namespaces/default/statefulsets")["items"]}
        cls.agent_pods["Deployment tiny-cpu-router"] = cls.api(
            "GET", "/apis/apps/v1/namespaces/default/deployments/tiny-cpu-router")["spec"]["template"]["spec"]
        cls.exercise_updates_and_pruning(mdep)

        cls.api("DELETE", mdep)
        wait_for(lambda: cls.get(mdep) is None, 60, "tiny-cpu deleted through its finalizer")
        # SIGTERM: the controller releases the Lease (get + update by name) and closes its watches,
        # which kube-sim counts when they end.
        cls.controller.send_signal(signal.SIGTERM)
        cls.exit_code = cls.controller.wait(30)
        cls.lease = cls.get("/apis/coordination.k8s.io/v1/namespaces/%s/leases/tandem-controller" % NAMESPACE)
        informed = ["modeldeployments.tandem.dev", "modelpools.tandem.dev", "statefulsets.apps", "services",
                    "configmaps", "deployments.apps", "poddisruptionbudgets.policy", "pods"]
        cls.stats = wait_for(lambda: (lambda s: s if all("watch " + r in s["by_verb_resource"] for r in informed)
                                      else None)(c.stats()), 30, "kube-sim to count the ended watches")

    @classmethod
    def stand_in_crds(cls):
        docs = []
        for group, version, plural, kind, namespaced in STAND_INS:
            docs.append(yaml.safe_dump({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "%s.%s" % (plural, group)},
                "spec": {"group": group, "scope": "Namespaced" if namespaced else "Cluster",
                         "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                                   "listKind": kind + "List"},
                         "versions": [{"name": version, "served": True, "storage": True,
                                       "schema": {"openAPIV3Schema": {
                                           "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}))
        return "---\n".join(docs)

    @classmethod
    def start_rendered_controller(cls):
        """tandem-controller with the rendered container's arguments; only the in-cluster config
        becomes --kubeconfig and the bind addresses 127.0.0.1:0."""
        (dep,) = find(cls.docs, "Deployment")
        container = dep["spec"]["template"]["spec"]["containers"][0]
        cls.rendered_args = container["args"]
        args = []
        for a in container["args"]:
            flag = a.split("=", 1)[0]
            if flag in ("--metrics-bind-address", "--health-probe-bind-address"):
                a = flag + "=127.0.0.1:0"
            args.append(a)
        log = open(os.path.join(cls.c.dir, "controller-0.log"), "w+")
        proc = subprocess.Popen([CONTROLLER, "--kubeconfig", cls.c.kubeconfig] + args,
                                stdout=log, stderr=subprocess.STDOUT)
        proc.log = log
        cls.c.controllers.append(proc)
        return proc

    @classmethod
    def exercise_updates_and_pruning(cls, mdep):
        """A spec change (every deployment-level child and the pools' StatefulSets are updated),
        drift on a PodDisruptionBudget (reverted), and a stale child of each built-in kind the
        reconcilers prune (deleted)."""
        ns = "/namespaces/default/"
        cls.api("PATCH", mdep, {"spec": {"router": {"replicas": 2, "port": 8001},
                                         "decode": {"replicas": 2, "kvCache": "fp8_e4m3"}}},
                ctype="application/merge-patch+json")
        pdb = "/apis/policy/v1" + ns + "poddisruptionbudgets/tiny-cpu-decode"
        cls.api("PATCH", pdb, {"spec": {"maxUnavailable": 2}}, ctype="application/merge-patch+json")
        deployment = cls.get(mdep)
        pool = cls.get("/apis/tandem.dev/v1alpha1" + ns + "modelpools/tiny-cpu-decode")

        def owned_by(owner, labels, kind):
            return {"labels": dict(labels, **{"app.kubernetes.io/managed-by": "tandem-controller"}),
                    "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                         "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                         "controller": True, "blockOwnerDeletion": True}]}

        by_mdep = {"tandem.dev/deployment": "tiny-cpu"}
        by_pool = dict(by_mdep, **{"tandem.dev/pool": "decode"})
        template = {"metadata": {"labels": {"stale": "yes"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
        stale = [
            ("/api/v1" + ns + "configmaps", "ConfigMap", "v1", deployment, by_mdep, {"data": {}}),
            ("/api/v1" + ns + "services", "Service", "v1", deployment, by_mdep,
             {"spec": {"ports": [{"port": 1}]}}),
            ("/apis/apps/v1" + ns + "deployments", "Deployment", "apps/v1", deployment, by_mdep,
             {"spec": {"replicas": 0, "selector": {"matchLabels": {"stale": "yes"}}, "template": template}}),
            ("/apis/apps/v1" + ns + "statefulsets", "StatefulSet", "apps/v1", pool, by_pool,
             {"spec": {"replicas": 0, "serviceName": "x", "selector": {"matchLabels": {"stale": "yes"}},
                       "template": template}}),
            ("/apis/policy/v1" + ns + "poddisruptionbudgets", "PodDisruptionBudget", "policy/v1", pool, by_pool,
             {"spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"stale": "yes"}}}}),
        ]
        for path, kind, api_version, owner, labels, body in stale:
            obj = dict(body, apiVersion=api_version, kind=kind,
                       metadata=dict(owned_by(owner, labels, kind), name="tiny-cpu-stale", namespace="default"))
            cls.api("POST", path, obj)
        for path, *_ in stale:
            wait_for(lambda path=path: cls.get(path + "/tiny-cpu-stale") is None, 60, "%s pruned" % path)

        def converged():
            d = cls.get(mdep)
            p = cls.get(pdb)
            return is_ready(d) and d["metadata"]["generation"] == 2 and p["spec"]["maxUnavailable"] == 1
        wait_for(converged, 60, "generation 2 Ready and the PDB drift reverted")

    # --- the tests -------------------------------------------------------------------------------

    def controller_requests(self):
        """{(group, resource, verb): count} the controller sent: kube-sim's counts less ours."""
        out = {}
        for key, n in self.stats["by_verb_resource"].items():
            n -= self.mine.get(key, 0)
            if n > 0:
                verb, resource = key.split(" ", 1)
                group, res = split_key(resource)
                out[(group, res, verb)] = n
        return out

    def rendered_rules(self, kind, name):
        (obj,) = find(self.docs, kind, name)
        return obj

    def test_whole_chart_applied(self):
        kinds = {d["kind"] for d in self.docs}
        self.assertTrue({"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                         "RoleBinding", "Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor",
                         "PodMonitor", "PrometheusRule", "ConfigMap", "NetworkPolicy"} <= kinds, kinds)
        for d in self.docs:
            self.assertRegex(self.applied, r"(?im)^%s(\.[a-z0-9.-]+)?/%s (created|configured|unchanged)$"
                             % (re.escape(d["kind"]), re.escape(d["metadata"]["name"])))

    def test_controller_ran_with_rendered_arguments(self):
        self.assertIn("--leader-elect=true", self.rendered_args)
        self.assertIn("--leader-election-namespace=%s" % NAMESPACE, self.rendered_args)
        self.assertEqual(self.exit_code, 0, "SIGTERM: release the Lease, drain, exit 0")
        self.assertIn("leads; starting workers", self.c.controller_log(self.controller))
        # It led through the Lease the Role names, in the Role's namespace.
        role = self.rendered_rules("Role", "tandem-leader-election")
        self.assertIsNotNone(self.lease)
        self.assertEqual(self.lease["metadata"]["namespace"], role["metadata"]["namespace"])
        names = {n for r in role["rules"] for n in r.get("resourceNames", [])}
        self.assertEqual(names, {self.lease["metadata"]["name"]})

    def test_tiny_cpu_was_ready(self):
        self.assertTrue(is_ready(self.ready))

    def test_agent_pods_restricted(self):
        # The pods the controller makes meet the restricted profile too (pod_template.cc).
        self.assertEqual(len(self.agent_pods), 3)
        for what, pod in self.agent_pods.items():
            with self.subTest(pod=what):
                self.assertEqual(restricted_violations(pod), [])
                self.assertIs(pod.get("automountServiceAccountToken"), False)

    # RBAC against what the controller sent.

    def grants(self):
        cluster_role = self.rendered_rules("ClusterRole", "tandem-controller")
        lease_role = self.rendered_rules("Role", "tandem-leader-election")
        return rbac_grants(cluster_role["rules"]), rbac_grants(lease_role["rules"])

    def test_every_request_granted(self):
        cluster, lease = self.grants()
        lease_name = self.lease["metadata"]["name"]
        used = self.controller_requests()
        self.assertTrue(used)
        for (group, resource, verb), n in sorted(used.items()):
            with self.subTest(request="%s %s/%s" % (verb, group, resource), count=n):
                if resource == "leases":
                    # A create names no object; get and update name the Lease.
                    name = None if verb == "create" else lease_name
                    self.assertIn((group, resource, verb, name), lease)
                else:
                    self.assertIn((group, resource, verb, None), cluster)

    def test_every_grant_used_or_explained(self):
        cluster, lease = self.grants()
        used = set(self.controller_requests())
        for group, resource, verb, _ in sorted(cluster | lease, key=str):
            with self.subTest(grant="%s %s/%s" % (verb, group, resource)):
                if (group, resource, verb) not in used:
                    self.assertTrue(UNEXERCISED.get((group, resource, verb)),
                                    "granted but not used in the run: drop it, or explain it in UNEXERCISED")
        for group, resource, verb in UNEXERCISED:
            with self.subTest(unexercised="%s %s/%s" % (verb, group, resource)):
                self.assertTrue(any(g[:3] == (group, resource, verb) for g in cluster | lease), "not granted")
                self.assertNotIn((group, resource, verb), used, "used in the run after all")

    def test_run_covered_the_write_paths(self):
        used = set(self.controller_requests())
        for kind in ("configmaps", "services", "deployments", "statefulsets", "poddisruptionbudgets"):
            group = {"deployments": "apps", "statefulsets": "apps", "poddisruptionbudgets": "policy"}.get(kind, "")
            for verb in ("create", "update", "delete"):
                self.assertIn((group, kind, verb), used)
        for want in [("tandem.dev", "modelpools", "create"), ("tandem.dev", "modelpools", "update"),
                     ("tandem.dev", "modeldeployments", "update"), ("tandem.dev", "modeldeployments/status", "update"),
                     ("tandem.dev", "modelpools/status", "update"), ("", "events", "create"),
                     ("coordination.k8s.io", "leases", "create"), ("coordination.k8s.io", "leases", "update")]:
            self.assertIn(want, used)


if __name__ == "__main__":
    unittest.main()
