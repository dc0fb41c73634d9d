"""The Helm chart (deploy/helm/tandem/) with the real helm and Kubernetes' own schemas.

  HelmTest        helm is the pinned version; `helm lint --strict` passes for the default values
                  and every ci/*.yaml; the schema (values.schema.json) refuses unknown fields and
                  wrong types; bad leader-election settings fail the render.
  CopiesTest      the chart's crds/, files/grafana/ and files/prometheus/ are byte-identical to
                  crds/, deploy/grafana/ and deploy/prometheus/ (sync_chart_files.py --check and a
                  comparison of our own), and the rendered ConfigMaps and PrometheusRules carry
                  exactly those files.
  SchemaTest      every rendered object (CRDs included) validates strictly (unknown fields are
                  errors) against the schemas of the Kubernetes version the chart declares and of
                  the newest one kubernetes-validate ships; Prometheus Operator kinds, which it has
                  no schema for, are the only ones skipped, by name.
  PodSecurityTest every pod meets the restricted Pod Security Standard, with a read-only root
                  filesystem and CPU/memory requests and limits.
  RbacTest        no wildcards; cluster-wide or namespaced as configured; the Lease rules are a
                  Role limited to the Lease's name; the Deployment's flags match the RBAC.
  CertManagerTest agentTLS.certManager: per agent namespace, the Certificate whose Secret a
                  ModelDeployment's spec.tls names (the CRD's default serverName as its SAN,
                  server + client auth), signed by a private CA chain or by the issuer given.

Run: .venv/bin/python tests/deploy/test_chart.py
"""

import json
import os
import subprocess
import sys
import unittest

import kubernetes_validate
import kubernetes_validate.utils
import yaml

from deploy_lib import (CHART, HELM_VERSION, NAMESPACE, REPO, VALUE_SETS, find, hardening_violations, helm,
                        kube_version, pod_templates, rbac_grants, render, restricted_violations)

# Kinds that are CRDs of other projects: kubernetes-validate has no schema for them.
NO_SCHEMA_KINDS = {"monitoring.coreos.com/v1": {"ServiceMonitor", "PodMonitor", "PrometheusRule"},
                   "cert-manager.io/v1": {"Certificate", "Issuer"}}


def schema_versions():
    """The declared oldest version and the newest kubernetes-validate knows, as "X.Y.0"."""
    known = kubernetes_validate.utils.all_versions()
    oldest = kube_version()
    if oldest not in known:
        raise AssertionError("kubernetes-validate has no schemas for %s (it has %s)" % (oldest, known))
    return sorted({oldest, kubernetes_validate.latest_version()})


class HelmTest(unittest.TestCase):
    def test_version(self):
        self.assertIn(HELM_VERSION, helm("version", "--short").stdout)

    def test_lint_strict(self):
        for name, values in VALUE_SETS.items():
            with self.subTest(values=name):
                args = ["lint", "--strict", CHART, "--kube-version", kube_version()]
                args += ["-f", values] if values else []
                out = helm(*args, check=False)
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
                self.assertIn("0 chart(s) failed", out.stdout)

    def test_schema_refuses_bad_values(self):
        for setting, message in [("controller.replicas=two", "controller.replicas: Invalid type"),
                                 ("controller.bogus=1", "Additional property bogus is not allowed"),
                                 ("controller.image.pullPolicy=Sometimes", "controller.image.pullPolicy"),
                                 ("controller.image.digest=latest", "controller.image.digest"),
                                 ("networkPolicy.enabld=true", "Additional property enabld")]:
            with self.subTest(setting=setting):
                out = helm("template", "t", CHART, "--set", setting, check=False)
                self.assertNotEqual(out.returncode, 0)
                self.assertIn(message, out.stderr)

    def test_render_refuses_unsafe_leader_election(self):
        for settings, message in [
                (["controller.leaderElection.enabled=false"], "two leaders would both write"),
                (["controller.leaderElection.renewDeadlineSeconds=20"], "retryPeriodSeconds < renewDeadlineSeconds"),
                (["serviceAccount.create=false"], "serviceAccount.name")]:
            with self.subTest(settings=settings):
                args = ["template", "t", CHART]
                for s in settings:
                    args += ["--set", s]
                out = helm(*args, check=False)
                self.assertNotEqual(out.returncode, 0)
                self.assertIn(message, out.stderr)


class CopiesTest(unittest.TestCase):
    # (source directory, source name prefix and suffix, copy directory, copy suffix), as in
    # deploy/helm/sync_chart_files.py but written out again, so that a bug there cannot hide here.
    MAPPINGS = [("crds", "tandem.dev_", ".yaml", "crds", ".yaml"),
                ("deploy/grafana", "", ".json", "files/grafana", ".json"),
                ("deploy/prometheus", "", "rules.yaml", "files/prometheus", ".yaml")]

    def test_sync_script_check(self):
        out = subprocess.run([sys.executable, os.path.join(REPO, "deploy", "helm", "sync_chart_files.py"), "--check"],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_byte_identical(self):
        for source_dir, prefix, suffix, dest_dir, dest_suffix in self.MAPPINGS:
            src = os.path.join(REPO, source_dir)
            dst = os.path.join(CHART, dest_dir)
            sources = sorted(f for f in os.listdir(src) if f.startswith(prefix) and f.endswith(suffix)) \
                if os.path.isdir(src) else []
            copies = sorted(f for f in os.listdir(dst) if f.endswith(dest_suffix)) \
                if os.path.isdir(dst) else []
            with self.subTest(source=source_dir):
                self.assertEqual(copies, sources, "python3 deploy/helm/sync_chart_files.py")
                for f in sources:
                    with open(os.path.join(src, f), "rb") as a, open(os.path.join(dst, f), "rb") as b:
                        self.assertEqual(a.read(), b.read(), "%s/%s differs from %s/%s" % (dest_dir, f, source_dir, f))
        self.assertTrue(os.listdir(os.path.join(CHART, "crds")), "the chart ships no CRDs")

    def test_rendered_objects_carry_the_files(self):
        docs = render(None, "--set", "dashboards.enabled=true,metrics.prometheusRule.enabled=true")
        dashboards = {}
        for cm in find(docs, "ConfigMap"):
            self.assertEqual(cm["metadata"]["labels"].get("grafana_dashboard"), "1")
            dashboards.update(cm["data"])
        grafana = os.path.join(REPO, "deploy", "grafana")
        want = {}
        for f in sorted(os.listdir(grafana)) if os.path.isdir(grafana) else []:
            if f.endswith(".json"):
                with open(os.path.join(grafana, f)) as src:
                    want[f] = src.read()
        self.assertEqual(sorted(dashboards), sorted(want))
        for f, text in want.items():
            self.assertEqual(dashboards[f], text, f)
            json.loads(dashboards[f])
        prometheus = os.path.join(REPO, "deploy", "prometheus")
        rule_files = sorted(f for f in os.listdir(prometheus) if f.endswith("rules.yaml")) \
            if os.path.isdir(prometheus) else []
        rules = find(docs, "PrometheusRule")
        self.assertEqual(len(rules), len(rule_files))
        for f in rule_files:
            with open(os.path.join(prometheus, f)) as src:
                source = yaml.safe_load(src)
            self.assertIn(source, [r["spec"] for r in rules], f)


class SchemaTest(unittest.TestCase):
    def test_strict_kubernetes_schemas(self):
        versions = schema_versions()
        skipped = set()
        for name, values in VALUE_SETS.items():
            for doc in render(values, include_crds=True):
                what = "%s %s %s" % (name, doc["kind"], doc["metadata"]["name"])
                if doc["kind"] in NO_SCHEMA_KINDS.get(doc["apiVersion"], ()):
                    skipped.add(doc["kind"])
                    continue
                for v in versions:
                    with self.subTest(object=what, kubernetes=v):
                        try:
                            kubernetes_validate.validate(doc, v, strict=True)
                        except kubernetes_validate.ValidationError as e:
                            self.fail("%s: %s at %s" % (what, e.message, "/".join(str(p) for p in e.path)))
        self.assertEqual(skipped, {"ServiceMonitor", "PodMonitor", "PrometheusRule", "Certificate", "Issuer"})


class PodSecurityTest(unittest.TestCase):
    def test_restricted(self):
        for name, values in VALUE_SETS.items():
            pods = pod_templates(render(values))
            self.assertTrue(pods)
            for what, pod in pods:
                with self.subTest(values=name, pod=what):
                    self.assertEqual(restricted_violations(pod) + hardening_violations(pod), [])

    def test_checker_catches_violations(self):
        # The checker itself, on a pod that breaks each rule once.
        bad = {"hostNetwork": True, "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
               "containers": [{"name": "c", "securityContext": {"privileged": True, "runAsUser": 0,
                                                                "capabilities": {"add": ["SYS_ADMIN"]}},
                               "ports": [{"containerPort": 80, "hostPort": 80}]}]}
        found = restricted_violations(bad)
        for words in ("hostNetwork", "hostPath", "privileged", "allowPrivilegeEscalation", "runAsNonRoot",
                      "runAsUser 0", "seccompProfile", "drop ALL", "SYS_ADMIN", "hostPort"):
            self.assertTrue(any(words in f for f in found), words)
        self.assertEqual(len(hardening_violations(bad)), 5)


class RbacTest(unittest.TestCase):
    def rules_of(self, docs):
        return [r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]

    def test_no_wildcards(self):
        for name, values in VALUE_SETS.items():
            for rule in self.rules_of(render(values)):
                with self.subTest(values=name, rule=rule):
                    for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                        self.assertNotIn("*", rule.get(field, []))
                    self.assertNotIn("nonResourceURLs", rule)
                    for verb in ("escalate", "bind", "impersonate", "approve"):
                        self.assertNotIn(verb, rule["verbs"])
                    self.assertFalse({"secrets", "roles", "rolebindings", "clusterroles",
                                      "clusterrolebindings"} & set(rule["resources"]))

    def test_cluster_wide_or_namespaced(self):
        docs = render(None)
        controller = find(docs, "ClusterRole", "tandem-controller")
        self.assertEqual(len(controller), 1)
        self.assertEqual(find(docs, "ClusterRoleBinding", "tandem-controller")[0]["subjects"],
                         [{"kind": "ServiceAccount", "name": "tandem", "namespace": NAMESPACE}])
        lease_role = find(docs, "Role", "tandem-leader-election")[0]
        self.assertEqual(lease_role["metadata"]["namespace"], NAMESPACE)
        self.assertEqual(rbac_grants(lease_role["rules"]),
                         {("coordination.k8s.io", "leases", "create", None),
                          ("coordination.k8s.io", "leases", "get", "tandem-controller"),
                          ("coordination.k8s.io", "leases", "update", "tandem-controller")})
        self.assertFalse(any("leases" in r["resources"] for r in controller[0]["rules"]))
        args = find(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--leader-election-namespace=%s" % NAMESPACE, args)
        self.assertIn("--leader-election-id=tandem-controller", args)
        self.assertIn("--leader-elect=true", args)

        ns = render(VALUE_SETS["namespaced"])
        self.assertEqual(find(ns, "ClusterRole"), [])
        self.assertEqual(find(ns, "ClusterRoleBinding"), [])
        role = find(ns, "Role", "tandem-controller")[0]
        self.assertEqual(role["metadata"]["namespace"], "llm")
        self.assertEqual(role["rules"], controller[0]["rules"])
        binding = find(ns, "RoleBinding", "tandem-controller")[0]
        self.assertEqual(binding["subjects"][0]["name"], "tandem-controller")
        args = find(ns, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--namespace=llm", args)
        self.assertIn("--leader-elect=false", args)
        self.assertEqual(find(ns, "ServiceAccount"), [])

    def test_deployment_probes_and_ports(self):
        dep = find(render(None), "Deployment")[0]
        self.assertEqual(dep["spec"]["replicas"], 2)
        c = dep["spec"]["template"]["spec"]["containers"][0]
        self.assertIn("--metrics-bind-address=:8080", c["args"])
        self.assertIn("--health-probe-bind-address=:8081", c["args"])
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"metrics": 8080, "health": 8081})
        self.assertEqual((c["livenessProbe"]["httpGet"]["path"], c["livenessProbe"]["httpGet"]["port"]),
                         ("/healthz", "health"))
        self.assertEqual((c["readinessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["port"]),
                         ("/readyz", "health"))
        self.assertIn("--agent-image=ghcr.io/tandem-dev/tandem-agent:0.1.0", c["args"])


class CertManagerTest(unittest.TestCase):
    def crd_tls_defaults(self):
        with open(os.path.join(REPO, "crds", "tandem.dev_modeldeployments.yaml")) as f:
            crd = yaml.safe_load(f)
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        return spec["properties"]["tls"]["properties"]

    def test_off_by_default(self):
        self.assertEqual([d for d in render(None) if d["apiVersion"] == "cert-manager.io/v1"], [])

    def test_private_ca_chain_per_agent_namespace(self):
        docs = render(VALUE_SETS["all-features"])
        tls = self.crd_tls_defaults()
        for ns in ("llm", "llm-staging"):
            mine = [d for d in docs if d["apiVersion"] == "cert-manager.io/v1" and d["metadata"]["namespace"] == ns]
            by_name = {(d["kind"], d["metadata"]["name"]): d for d in mine}
            self.assertEqual(len(mine), 4, ns)
            bootstrap = by_name[("Issuer", "tandem-agent-ca-bootstrap")]
            self.assertEqual(bootstrap["spec"], {"selfSigned": {}})
            ca = by_name[("Certificate", "tandem-agent-ca")]
            self.assertTrue(ca["spec"]["isCA"])
            self.assertEqual(ca["spec"]["issuerRef"]["name"], "tandem-agent-ca-bootstrap")
            issuer = by_name[("Issuer", "tandem-agent-ca")]
            self.assertEqual(issuer["spec"]["ca"]["secretName"], ca["spec"]["secretName"])
            leaf = by_name[("Certificate", "tandem-agent-tls")]["spec"]
            self.assertEqual(leaf["secretName"], "tandem-agent-tls")
            self.assertEqual(leaf["dnsNames"], [tls["serverName"]["default"]])  # what agents check
            self.assertIn("server auth", leaf["usages"])
            self.assertIn("client auth", leaf["usages"])
            self.assertEqual(leaf["issuerRef"], {"name": "tandem-agent-ca", "kind": "Issuer",
                                                 "group": "cert-manager.io"})
            self.assertEqual(leaf["privateKey"]["rotationPolicy"], "Always")

    def test_existing_issuer_and_namespaces(self):
        docs = render(None, "--set", "agentTLS.certManager.enabled=true", "--set",
                      "agentTLS.certManager.issuerRef.name=corp-ca", "--set",
                      "agentTLS.certManager.namespaces={a,b,c}", "--set", "agentTLS.certManager.serverName=agents.llm")
        mine = [d for d in docs if d["apiVersion"] == "cert-manager.io/v1"]
        self.assertEqual(sorted((d["kind"], d["metadata"]["namespace"]) for d in mine),
                         [("Certificate", "a"), ("Certificate", "b"), ("Certificate", "c")])
        for d in mine:
            self.assertEqual(d["spec"]["issuerRef"], {"name": "corp-ca", "kind": "ClusterIssuer",
                                                      "group": "cert-manager.io"})
            self.assertEqual(d["spec"]["dnsNames"], ["agents.llm"])

    def test_schema_refuses_bad_names(self):
        out = helm("template", "t", CHART, "--set", "agentTLS.certManager.secretName=Bad_Name", check=False)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("secretName", out.stderr)


if __name__ == "__main__":
    unittest.main()
