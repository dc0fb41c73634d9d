#!/usr/bin/env python3
"""deploy/examples/autoscaling/: pools sized by an HPA (with prometheus-adapter) or by KEDA's
Prometheus scaler instead of tandem-controller's planner (issue #17, external mode).

  ObjectsTest    the HPA strictly valid (kubernetes-validate) for the Kubernetes versions the chart
                 declares and the newest known; the ModelDeployments admitted by kube-sim's CRD
                 schemas (ScaleTest applies them); each HPA or ScaledObject targets a ModelPool
                 of the file's ModelDeployment whose role is in external mode; KEDA's shape
                 (prometheus triggers, string metadata, a positive threshold, min <= max); the
                 thresholds equal the CRD's defaults for the built-in planner.
  QueriesTest    every KEDA query and prometheus-adapter rule evaluated by `promtool test rules`
                 over series of the example's pods and of another deployment, another pool and
                 another namespace: each reads exactly its target's series (means, sums, p95s of
                 the router's histograms, per-pod values for the adapter) and drops negative
                 samples, as the controller does.
  ScaleTest      kube-sim, the real kubectl and tandem-controller: the example's ModelDeployments
                 applied; for each scale target, what an HPA does: read the scale subresource,
                 list the pods its selector selects (exactly the pool's), write replicas. The
                 StatefulSet follows, a changed ModelDeployment does not take the size back, the
                 built-in autoscaler records nothing, and scale to zero is admitted.

Run: TANDEM_CONTROLLER=build/controller/tandem-controller .venv/bin/python tests/deploy/test_autoscaler_examples.py
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import kubernetes_validate
import yaml

from deploy_lib import REPO, kube_version

sys.path.insert(0, os.path.join(REPO, "tests", "controller"))
sys.path.insert(0, os.path.join(REPO, "tests", "observability"))
from e2e_lib import API, Cluster, wait_for  # noqa: E402
import obs_lib  # noqa: E402

EXAMPLES = os.path.join(REPO, "deploy", "examples", "autoscaling")
PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool")
NS = "default"
POOL_PATH = API % NS + "modelpools/"
STS_PATH = "/apis/apps/v1/namespaces/%s/statefulsets/" % NS


def load(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def scaler_files():
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(EXAMPLES, "*.yaml"))
                  if not p.endswith("-values.yaml"))


def scalers(docs):
    return [d for d in docs if d["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")]


def deployments(docs):
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "ModelDeployment"}


def target_pool(docs, scaler):
    """(ModelDeployment, role) of a scaler's target, or None when it names no pool of the file."""
    name = scaler["spec"]["scaleTargetRef"]["name"]
    for md_name, md in deployments(docs).items():
        for role in ("prefill", "decode"):
            if name == "%s-%s" % (md_name, role):
                return md, role
    return None


def keda_queries():
    """[(ScaledObject, its target's ModelDeployment name, role, trigger)] of keda.yaml."""
    docs = load("keda.yaml")
    out = []
    for so in (d for d in docs if d["kind"] == "ScaledObject"):
        md, role = target_pool(docs, so)
        for t in so["spec"]["triggers"]:
            out.append((so["metadata"]["name"], md["metadata"]["name"], role, t))
    return out


def adapter_rules():
    with open(os.path.join(EXAMPLES, "prometheus-adapter-values.yaml")) as f:
        return yaml.safe_load(f)["rules"]["custom"]


def crd_autoscaling_defaults():
    with open(os.path.join(REPO, "crds", "tandem.dev_modeldeployments.yaml")) as f:
        crd = yaml.safe_load(f)
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    props = spec["decode"]["properties"]["autoscaling"]["properties"]
    return {k: v["default"] for k, v in props.items() if "default" in v}


class ObjectsTest(unittest.TestCase):
    def test_files(self):
        self.assertEqual(scaler_files(), ["hpa.yaml", "keda.yaml"])

    def test_hpa_strictly_valid(self):
        versions = sorted({kube_version(), kubernetes_validate.latest_version()})
        hpas = [d for d in load("hpa.yaml") if d["kind"] == "HorizontalPodAutoscaler"]
        self.assertEqual(len(hpas), 1)
        for v in versions:
            with self.subTest(kubernetes=v):
                try:
                    kubernetes_validate.validate(hpas[0], v, strict=True)
                except kubernetes_validate.ValidationError as e:
                    self.fail("%s at %s" % (e.message, "/".join(str(p) for p in e.path)))

    def test_targets_are_external_pools_of_the_file(self):
        for name in scaler_files():
            docs = load(name)
            self.assertTrue(scalers(docs), name)
            for s in scalers(docs):
                with self.subTest(file=name, scaler=s["metadata"]["name"]):
                    ref = s["spec"]["scaleTargetRef"]
                    self.assertEqual((ref["apiVersion"], ref["kind"]), ("tandem.dev/v1alpha1", "ModelPool"))
                    found = target_pool(docs, s)
                    self.assertIsNotNone(found, "%s is no pool of the file's ModelDeployment" % ref["name"])
                    md, role = found
                    scaling = md["spec"][role].get("autoscaling", {})
                    self.assertEqual((scaling.get("enabled"), scaling.get("mode")), (True, "external"),
                                     "the built-in planner and the scaler would both write replicas")
                    if s["kind"] == "HorizontalPodAutoscaler":
                        low, high = s["spec"].get("minReplicas", 1), s["spec"]["maxReplicas"]
                    else:
                        low, high = s["spec"]["minReplicaCount"], s["spec"]["maxReplicaCount"]
                    self.assertLessEqual(1, low)  # a pool of 0 leaves the router nothing to send to
                    self.assertLessEqual(low, high)
                    self.assertLessEqual(low, md["spec"][role]["replicas"])

    def test_keda_shape(self):
        for so_name, _, _, t in keda_queries():
            with self.subTest(scaled_object=so_name, query=t["metadata"]["query"]):
                self.assertEqual(t["type"], "prometheus")
                self.assertIn(t.get("metricType", "AverageValue"), ("AverageValue", "Value"))
                for key, value in t["metadata"].items():
                    self.assertIsInstance(value, str, "KEDA's trigger metadata is a map of strings: " + key)
                self.assertRegex(t["metadata"]["serverAddress"], r"^https?://")
                self.assertGreater(float(t["metadata"]["threshold"]), 0)

    def test_targets_equal_the_planner_defaults(self):
        defaults = crd_autoscaling_defaults()
        want = {"tandem_kv_cache_usage_ratio": ("Value", defaults["targetKvCacheUsage"]),
                "tandem_requests_waiting": ("AverageValue", defaults["targetWaitingRequestsPerReplica"]),
                "tandem_prefill_tokens_waiting": ("AverageValue", defaults["targetWaitingPrefillTokensPerReplica"])}
        seen = set()
        for _, _, _, t in keda_queries():
            for name in obs_lib.metric_names(t["metadata"]["query"]) & set(want):
                seen.add(name)
                self.assertEqual((t["metricType"], float(t["metadata"]["threshold"])), want[name], name)
        hpa = [d for d in load("hpa.yaml") if d["kind"] == "HorizontalPodAutoscaler"][0]
        targets = {m["pods"]["metric"]["name"]: m["pods"]["target"]["averageValue"] for m in hpa["spec"]["metrics"]}
        self.assertEqual(targets, {"tandem_kv_cache_usage_ratio": "800m", "tandem_requests_waiting": "4"})
        self.assertEqual((defaults["targetKvCacheUsage"], defaults["targetWaitingRequestsPerReplica"]), (0.8, 4))
        self.assertEqual(seen, set(want))
        self.assertEqual({r["name"]["as"] for r in adapter_rules()}, set(targets))


# Series an agent exports, with the labels the PodMonitor adds (namespace, pod): the example's
# pods, a stale sample (-1), and the same metrics of another deployment, pool and namespace that
# no query may read.
def gauge(metric, ns, deployment, pool, pod, value):
    return {"series": '%s{namespace="%s",deployment="%s",pool="%s",pod="%s"}' % (metric, ns, deployment, pool, pod),
            "values": "%sx10" % value}


def histogram(metric, ns, deployment, pod, per_minute):
    """A router's histogram: per_minute {le: cumulative observations added each minute}."""
    return [{"series": '%s_bucket{namespace="%s",deployment="%s",pool="router",pod="%s",le="%s"}'
                       % (metric, ns, deployment, pod, le),
             "values": "0+%gx10" % n} for le, n in per_minute.items()]


def input_series(md, other="other"):
    s = []
    for metric, decode, prefill, elsewhere in [
            ("tandem_kv_cache_usage_ratio", [0.5, 0.9, -1], [0.99], 0.1),
            ("tandem_requests_waiting", [3, 5, -1], [50], 100),
            ("tandem_prefill_tokens_waiting", [0, 0, 0], [10000, 6000, -1], 99999)]:
        for i, v in enumerate(decode):
            s.append(gauge(metric, NS, md, "decode", "%s-decode-%d" % (md, i), v))
        for i, v in enumerate(prefill):
            s.append(gauge(metric, NS, md, "prefill", "%s-prefill-%d" % (md, i), v))
        s.append(gauge(metric, NS, other, "decode", other + "-decode-0", elsewhere))
        s.append(gauge(metric, NS, other, "prefill", other + "-prefill-0", elsewhere))
        s.append(gauge(metric, "elsewhere", md, "decode", md + "-decode-0", elsewhere))
        s.append(gauge(metric, "elsewhere", md, "prefill", md + "-prefill-0", elsewhere))
    # p95 of 100 observations a minute: ITL rank 95 lies in (0.05, 0.1] between 90 and 100 ->
    # 0.075; TTFT's in (1, 2] between 80 and 100 -> 1.75. The other deployment's are all slow.
    itl = {"0.025": 50, "0.05": 90, "0.1": 100, "+Inf": 100}
    ttft = {"0.5": 50, "1": 80, "2": 100, "+Inf": 100}
    slow = {"0.025": 0, "0.05": 0, "0.1": 0, "0.5": 0, "1": 0, "2": 0, "+Inf": 100}
    s += histogram("tandem_inter_token_latency_seconds", NS, md, md + "-router-a", itl)
    s += histogram("tandem_time_to_first_token_seconds", NS, md, md + "-router-a", ttft)
    s += histogram("tandem_inter_token_latency_seconds", NS, other, other + "-router-a", slow)
    s += histogram("tandem_time_to_first_token_seconds", NS, other, other + "-router-a", slow)
    return s


# What each query of keda.yaml must give over input_series, by the series it reads.
KEDA_WANT = {"tandem_kv_cache_usage_ratio": 0.7, "tandem_requests_waiting": 8,
             "tandem_prefill_tokens_waiting": 16000, "tandem_inter_token_latency_seconds_bucket": 0.075,
             "tandem_time_to_first_token_seconds_bucket": 1.75}


class QueriesTest(unittest.TestCase):
    def setUp(self):
        self.assertIsNotNone(PROMTOOL, "promtool is required (Debian package prometheus)")

    def promtool_test(self, series, exprs):
        """Runs `promtool test rules` with one test evaluating each (expr, [(labels, value)])."""
        d = tempfile.mkdtemp(prefix="tandem-scaler-queries-")
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, "empty_rules.yaml"), "w") as f:
            f.write("groups: []\n")
        doc = {"rule_files": ["empty_rules.yaml"], "evaluation_interval": "1m",
               "tests": [{"interval": "1m", "input_series": series,
                          "promql_expr_test": [{"expr": e, "eval_time": "5m",
                                                "exp_samples": [{"labels": l, "value": v} for l, v in want]}
                                               for e, want in exprs]}]}
        path = os.path.join(d, "queries_test.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(doc, f)
        out = subprocess.run([PROMTOOL, "test", "rules", path], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("SUCCESS", out.stdout)

    def test_keda_queries(self):
        exprs, seen = [], set()
        for so_name, md, role, t in keda_queries():
            query = t["metadata"]["query"]
            names = obs_lib.metric_names(query)
            self.assertEqual(len(names), 1, query)
            name = names.pop()
            seen.add(name)
            latency = name.endswith("_bucket")
            matchers = dict(re.findall(r'(\w+)="([^"]*)"', query))
            # Latency is the router's (the only observer of TTFT and ITL); gauges the pool's own.
            self.assertEqual(matchers, {"namespace": NS, "deployment": md,
                                        "pool": "router" if latency else role}, query)
            # Within 1e-9 (promtool compares samples exactly; the p95s interpolate).
            exprs.append(("abs((%s) - %r) < bool 1e-9" % (query, KEDA_WANT[name]), [("{}", 1)]))
        self.assertEqual(seen, set(KEDA_WANT))
        self.promtool_test(input_series("tiny-keda"), exprs)

    def test_adapter_rules(self):
        # What prometheus-adapter sends for `pods/*/<metric>` in namespace default: its rule's
        # metricsQuery with the series, the matchers of the pods listed and a group by pod.
        pods = ["tiny-hpa-decode-0", "tiny-hpa-decode-1"]
        want = {"tandem_kv_cache_usage_ratio": [0.5, 0.9], "tandem_requests_waiting": [3, 5]}
        exprs = []
        for rule in adapter_rules():
            name = rule["name"]["as"]
            metric = re.match(r"(\w+)\{", rule["seriesQuery"]).group(1)
            self.assertEqual(metric, name)
            self.assertEqual(rule["resources"]["overrides"],
                             {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}})
            query = (rule["metricsQuery"].replace("<<.Series>>", metric)
                     .replace("<<.LabelMatchers>>", 'namespace="%s",pod=~"%s"' % (NS, "|".join(pods + [pods[0][:-1] + "2"])))
                     .replace("<<.GroupBy>>", "pod"))
            # decode-2's sample is -1: dropped, so the pod has no value (the HPA waits for it).
            exprs.append((query, [('{pod="%s"}' % p, v) for p, v in zip(pods, want[name])]))
            # The discovery query finds the decode pools' series only, each with its pod.
            exprs.append(("count(%s)" % rule["seriesQuery"], [("{}", 3 + 1 + 1)]))
        self.assertEqual(len(exprs), 4)
        self.promtool_test(input_series("tiny-hpa"), exprs)


class ScaleTest(unittest.TestCase):
    """tandem-controller with an external autoscaler's writes, as an HPA or KEDA makes them."""

    def setUp(self):
        self.c = Cluster()
        self.addCleanup(self.c.stop)
        self.c.kubectl("apply", "--validate=false", "-f", os.path.join(REPO, "crds"))
        self.ctl = self.c.start_controller("--resync-period", "1", "--autoscale-interval", "1")

    def apply_deployments(self, name):
        docs = [d for d in load(name) if d["kind"] == "ModelDeployment"]
        self.c.kubectl("apply", "--validate=false", "-f", "-", stdin=yaml.safe_dump_all(docs))

    def sts_replicas(self, pool):
        sts = self.c.get(STS_PATH + pool)
        return sts["spec"]["replicas"] if sts else None

    def selected(self, selector):
        out = self.c.kubectl("get", "pods", "-l", selector, "-o", "jsonpath={.items[*].metadata.name}").stdout
        return sorted(out.split())

    def scale(self, pool, replicas):
        out = self.c.kubectl("scale", "modelpools.tandem.dev/" + pool, "--replicas", str(replicas)).stdout
        self.assertIn("scaled", out)

    def settled(self, md_name):
        md = self.c.get(API % NS + "modeldeployments/" + md_name)
        return md and md.get("status", {}).get("observedGeneration") == md["metadata"]["generation"]

    def test_external_writes_stand(self):
        for name in scaler_files():
            self.apply_deployments(name)
        targets = []
        for name in scaler_files():
            docs = load(name)
            for s in scalers(docs):
                md, role = target_pool(docs, s)
                targets.append((md["metadata"]["name"], role, s["spec"]["scaleTargetRef"]["name"]))
        self.assertEqual(len(targets), 3)
        for md_name, role, pool in targets:
            with self.subTest(pool=pool):
                wait_for(lambda: self.sts_replicas(pool) == 1, 30, pool + "'s StatefulSet")
                # The HPA's read: the scale subresource, whose selector finds the pool's pods.
                def read_scale():
                    return json.loads(self.c.kubectl("get", "--raw", POOL_PATH + pool + "/scale").stdout)

                scale = wait_for(lambda: (s := read_scale())["status"].get("selector") and s, 30,
                                 pool + "'s status.selector (without it the HPA cannot count the pool's pods)")
                self.assertEqual((scale["kind"], scale["spec"]["replicas"]), ("Scale", 1))
                selector = scale["status"]["selector"]
                wait_for(lambda: self.selected(selector) == [pool + "-0"], 30, pool + "-0 selected")
                # The HPA's write.
                self.scale(pool, 3)
                wait_for(lambda: self.sts_replicas(pool) == 3, 30, pool + "'s StatefulSet to follow to 3")
                wait_for(lambda: self.selected(selector) == [pool + "-%d" % i for i in range(3)], 30,
                         "the selector to find the three pods")
                # A changed ModelDeployment (its replicas for this pool too) does not take it back.
                self.c.kubectl("patch", "modeldeployment", md_name, "--type", "merge", "-p",
                               json.dumps({"spec": {role: {"replicas": 2}}}))
                wait_for(lambda: self.settled(md_name), 30, md_name + " reconciled")
                resyncs = self.resyncs()
                wait_for(lambda: self.resyncs() >= resyncs + 2, 30, "two more resyncs")
                pool_obj = self.c.get(POOL_PATH + pool)
                self.assertEqual((pool_obj["spec"]["replicas"], self.sts_replicas(pool)), (3, 3))
                self.assertFalse(pool_obj.get("status", {}).get("autoscaler", {}).get("lastScale"))
        # Scale to zero is the external autoscaler's to choose (the CRD's bounds do not apply).
        pool = targets[0][2]
        self.scale(pool, 0)
        wait_for(lambda: self.sts_replicas(pool) == 0, 30, pool + " to zero")
        events = self.c.items("/api/v1/namespaces/%s/events" % NS)
        self.assertFalse([e for e in events if e["reason"] in ("ScaledUp", "ScaledDown")])
        self.assertIsNone(self.ctl.poll(), "the controller died:\n" + self.c.controller_log(self.ctl)[-3000:])

    def resyncs(self):
        m = self.c.metrics(self.ctl)
        return min(m.get('tandem_controller_resyncs_total{controller="%s"}' % c, 0) for c in ("modeldeployment", "modelpool"))


if __name__ == "__main__":
    unittest.main()
