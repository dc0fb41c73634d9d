#!/usr/bin/env python3
"""crds/ and deploy/examples/ through crd_schema.py and cel.py, the API server's admission of
custom resources as kube-sim performs it.

  - the CRDs are structural, their rules compile, crds/generate.py --check holds;
  - every example admits cleanly and gets its defaults; unknown fields are pruned;
  - each OpenAPI constraint and each CEL rule of the CRDs rejects a crafted bad resource with the
    API server's wording; transition rules run only on updates;
  - the registration checks reject what Kubernetes rejects (test_crd_structural.py); CEL
    semantics (test_cel.py);
  - malformed CRDs and resources (seeded random mutations) give errors, never exceptions.

Run: .venv/bin/python tests/kube-sim/test_crd_schema.py   (ctest -R kube_sim.crd_schema)
"""
import copy
import os
import random
import subprocess
import sys
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import crd_schema  # noqa: E402
from test_cel import CelTest  # noqa: E402,F401  (run with these tests, one CTest entry)
from test_crd_structural import StructuralTest  # noqa: E402,F401


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return yaml.safe_load(f)


MD_CRD = load("crds/tandem.dev_modeldeployments.yaml")
MP_CRD = load("crds/tandem.dev_modelpools.yaml")
MD = MD_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
MP = MP_CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
EXAMPLES = ["kimi-k2.6", "glm-5.2", "tiny-cpu"]
# Appended when a type, required, enum, too-long or too-many error stops the CEL rules.
NOT_CHECKED = ('<nil>: Invalid value: "null": some validation rules were not checked because the '
               "object was invalid; correct the existing errors to complete validation")


def example(name):
    return load(f"deploy/examples/{name}.yaml")


def pool(**spec):
    base = {"deploymentName": "tiny-cpu", "role": "decode",
            "model": {"name": "tandem/tiny", "dummy": {"preset": "tiny"}}}
    base.update(spec)
    return {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelPool",
            "metadata": {"name": "tiny-cpu-decode", "namespace": "default"}, "spec": base}


class CrdFilesTest(unittest.TestCase):
    def test_crds_are_structural_and_their_rules_compile(self):
        for crd in (MD_CRD, MP_CRD):
            self.assertEqual(crd_schema.validate_crd(crd), [], crd["metadata"]["name"])

    def test_generated_files_are_current(self):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "crds/generate.py"), "--check"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_names_columns_and_subresources(self):
        md, mp = MD_CRD["spec"], MP_CRD["spec"]
        self.assertEqual((md["group"], md["names"]["shortNames"], md["names"]["categories"]),
                         ("tandem.dev", ["mdep"], ["tandem"]))
        self.assertEqual(mp["names"]["shortNames"], ["mpool"])
        columns = [c["name"].upper() for c in md["versions"][0]["additionalPrinterColumns"]]
        self.assertEqual(columns, ["READY", "PREFILL", "DECODE", "PRECISION", "AGE"])
        columns = [c["name"].upper() for c in mp["versions"][0]["additionalPrinterColumns"]]
        self.assertEqual(columns, ["ROLE", "REPLICAS", "READY", "WEIGHTS", "KV", "AGE"])
        self.assertEqual(md["versions"][0]["subresources"], {"status": {}})
        self.assertEqual(mp["versions"][0]["subresources"]["scale"],
                         {"specReplicasPath": ".spec.replicas",
                          "statusReplicasPath": ".status.replicas",
                          "labelSelectorPath": ".status.selector"})
        for crd in (md, mp):
            v = crd["versions"][0]
            self.assertEqual((v["name"], v["served"], v["storage"]), ("v1alpha1", True, True))


class ExamplesTest(unittest.TestCase):
    def test_every_example_admits_cleanly(self):
        for name in EXAMPLES:
            obj = example(name)
            self.assertEqual(obj["kind"], "ModelDeployment")
            self.assertEqual(crd_schema.admit(MD, obj), [], name)
            # Admitting the admitted object again as an update changes nothing and passes the
            # transition rules.
            again = copy.deepcopy(obj)
            self.assertEqual(crd_schema.admit(MD, again, obj), [], name)
            self.assertEqual(again, obj)

    def test_kimi_is_disaggregated_as_documented(self):
        spec = example("kimi-k2.6")["spec"]
        self.assertEqual((spec["prefill"]["weights"], spec["prefill"]["kvCache"]), ("fp8", "bf16"))
        self.assertEqual((spec["decode"]["weights"], spec["decode"]["kvCache"]),
                         ("int4", "fp8_e4m3"))
        for role in ("prefill", "decode"):
            self.assertEqual(spec[role]["tensorParallel"], 8)
            self.assertEqual(spec[role]["resources"]["limits"]["nvidia.com/gpu"], 8)
            self.assertTrue(spec[role]["autoscaling"]["enabled"])

    def test_defaults_appear(self):
        obj = example("tiny-cpu")
        crd_schema.admit(MD, obj)
        spec = obj["spec"]
        self.assertEqual(spec["router"]["port"], 8000)
        for role in ("prefill", "decode"):
            self.assertEqual((spec[role]["tensorParallel"], spec[role]["weights"],
                              spec[role]["kvCache"]), (1, "bf16", "bf16"))
            self.assertNotIn("autoscaling", spec[role])  # no default: absent stays absent
        self.assertEqual(spec["integrity"], {"pageTags": True, "transferChecksum": True})
        self.assertEqual(spec["model"]["dummy"]["seed"], 1)  # given values are kept

    def test_defaults_fill_absent_objects_and_nested_fields(self):
        obj = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelDeployment",
               "metadata": {"name": "m"},
               "spec": {"model": {"name": "x", "path": "/models/x",
                                  "volume": {"persistentVolumeClaim": {"claimName": "c"}}},
                        "decode": {"autoscaling": {"enabled": True, "maxReplicas": 3},
                                   "integrity": None},
                        "integrity": None}}
        self.assertEqual(crd_schema.admit(MD, obj), [])
        spec = obj["spec"]
        self.assertEqual(spec["prefill"]["replicas"], 1)  # a defaulted {} gets its defaults
        self.assertEqual(spec["router"], {"replicas": 1, "port": 8000, "unknownToolCalls": "drop"})
        self.assertEqual(spec["model"]["volume"]["mountPath"], "/models")
        self.assertTrue(spec["model"]["volume"]["persistentVolumeClaim"]["readOnly"])
        self.assertEqual(spec["decode"]["autoscaling"]["minReplicas"], 1)
        self.assertEqual(spec["decode"]["autoscaling"]["targetKvCacheUsage"], 0.8)
        self.assertEqual({k: spec["decode"]["autoscaling"][k] for k in (
            "mode", "targetWaitingRequestsPerReplica", "targetWaitingPrefillTokensPerReplica",
            "scaleUpDelaySeconds", "scaleDownDelaySeconds", "maxScaleUpStep", "maxScaleDownStep")},
            {"mode": "builtin", "targetWaitingRequestsPerReplica": 4,
             "targetWaitingPrefillTokensPerReplica": 8192, "scaleUpDelaySeconds": 30,
             "scaleDownDelaySeconds": 300, "maxScaleUpStep": 4, "maxScaleDownStep": 1})
        self.assertNotIn("targetTTFTSeconds", spec["decode"]["autoscaling"])  # no default: off
        self.assertNotIn("gpuBudget", spec)  # no default: no cap
        self.assertEqual(spec["integrity"]["pageTags"], True)  # null + default -> default
        self.assertNotIn("integrity", spec["decode"])  # not a pool field: pruned

    def test_unknown_fields_are_pruned_metadata_is_not(self):
        obj = example("tiny-cpu")
        obj["spec"]["bogus"] = 1
        obj["spec"]["prefill"]["gpus"] = 8
        obj["spec"]["prefill"]["resources"]["claims"] = [{"name": "x"}]
        obj["metadata"]["labels"] = {"team": "a"}
        obj["metadata"]["whatever"] = True
        obj["status"] = {"nonsense": 1, "observedGeneration": 2}
        self.assertEqual(crd_schema.admit(MD, obj), [])
        self.assertNotIn("bogus", obj["spec"])
        self.assertNotIn("gpus", obj["spec"]["prefill"])
        self.assertNotIn("claims", obj["spec"]["prefill"]["resources"])
        self.assertEqual(obj["metadata"]["labels"], {"team": "a"})
        self.assertTrue(obj["metadata"]["whatever"])
        self.assertEqual(obj["status"], {"observedGeneration": 2})


def errors_of(schema, obj, old=None):
    return crd_schema.admit(schema, obj, old)


class ConstraintTest(unittest.TestCase):
    """One crafted bad resource per OpenAPI constraint, with the API server's wording."""

    def md_errors(self, mutate, old=None):
        obj = example("tiny-cpu")
        mutate(obj["spec"])
        return errors_of(MD, obj, old)

    def test_enums(self):
        e = self.md_errors(lambda s: s["decode"].update(weights="int8"))
        self.assertEqual(e, ['spec.decode.weights: Unsupported value: "int8": supported values: '
                             '"bf16", "fp8", "int4"', NOT_CHECKED])
        e = self.md_errors(lambda s: s["decode"].update(kvCache="fp8"))
        self.assertEqual(e, ['spec.decode.kvCache: Unsupported value: "fp8": supported values: '
                             '"bf16", "fp8_e4m3"', NOT_CHECKED])
        e = errors_of(MP, pool(role="router"))
        self.assertEqual(e, ['spec.role: Unsupported value: "router": supported values: '
                             '"prefill", "decode"', NOT_CHECKED])
        e = self.md_errors(lambda s: s["model"]["dummy"].update(preset="huge"))
        self.assertIn('spec.model.dummy.preset: Unsupported value: "huge"', e[0])
        e = self.md_errors(lambda s: s["decode"].update(autoscaling={"mode": "keda"}))
        self.assertEqual(e, ['spec.decode.autoscaling.mode: Unsupported value: "keda": supported '
                             'values: "builtin", "external"', NOT_CHECKED])
        e = self.md_errors(lambda s: s.setdefault("router", {}).update(unknownToolCalls="keep"))
        self.assertEqual(e, ['spec.router.unknownToolCalls: Unsupported value: "keep": supported '
                             'values: "drop", "forward"', NOT_CHECKED])

    def test_minimum_maximum_and_exclusive(self):
        e = self.md_errors(lambda s: s["prefill"].update(replicas=-1))
        self.assertEqual(e, ["spec.prefill.replicas: Invalid value: -1: spec.prefill.replicas in "
                             "body should be greater than or equal to 0"])
        e = self.md_errors(lambda s: s["decode"].update(tensorParallel=128))
        self.assertIn("spec.decode.tensorParallel: Invalid value: 128: spec.decode.tensorParallel "
                      "in body should be less than or equal to 64", e)
        e = self.md_errors(lambda s: s["router"].update(port=0))
        self.assertEqual(e, ["spec.router.port: Invalid value: 0: spec.router.port in body should "
                             "be greater than or equal to 1"])
        scale = {"enabled": True, "maxReplicas": 2, "targetKvCacheUsage": 0}
        e = self.md_errors(lambda s: s["decode"].update(autoscaling=scale))
        self.assertEqual(e, ["spec.decode.autoscaling.targetKvCacheUsage: Invalid value: 0: "
                             "spec.decode.autoscaling.targetKvCacheUsage in body should be "
                             "greater than 0"])
        scale = {"enabled": True, "maxReplicas": 2, "targetKvCacheUsage": 1.5}
        e = self.md_errors(lambda s: s["decode"].update(autoscaling=scale))
        self.assertIn("should be less than or equal to 1", e[0])
        at_least = "greater than or equal to "
        for field, bad, bound in (("targetTTFTSeconds", 0, "greater than 0"),
                                  ("targetITLSeconds", -0.1, "greater than 0"),
                                  ("targetWaitingRequestsPerReplica", -1, at_least + "0"),
                                  ("scaleUpDelaySeconds", -1, at_least + "0"),
                                  ("maxScaleUpStep", 0, at_least + "1"),
                                  ("maxScaleDownStep", 0, at_least + "1")):
            scale = {"enabled": True, "maxReplicas": 2, field: bad}
            e = self.md_errors(lambda s: s["decode"].update(autoscaling=scale))
            self.assertEqual(len(e), 1, e)
            self.assertIn(f"spec.decode.autoscaling.{field}: Invalid value", e[0])
            self.assertIn(f"should be {bound}", e[0])
        e = self.md_errors(lambda s: s.update(gpuBudget=-8))
        self.assertEqual(e, ["spec.gpuBudget: Invalid value: -8: spec.gpuBudget in body should be "
                             "greater than or equal to 0"])

    def test_types(self):
        e = self.md_errors(lambda s: s["prefill"].update(replicas="two"))
        self.assertEqual(e[0], 'spec.prefill.replicas: Invalid value: "string": '
                               'spec.prefill.replicas in body must be of type integer: "string"')
        e = self.md_errors(lambda s: s["integrity"].update(pageTags="yes") if "integrity" in s
                           else s.update(integrity={"pageTags": "yes"}))
        self.assertIn('spec.integrity.pageTags in body must be of type boolean: "string"', e[0])
        e = self.md_errors(lambda s: s.update(prefill=[]))
        self.assertIn('spec.prefill in body must be of type object: "array"', e[0])
        # A null in a non-nullable field without a default is dropped first, as Kubernetes does.
        e = self.md_errors(lambda s: s["model"].update(name=None))
        self.assertEqual(e[0], "spec.model.name: Required value")
        e = self.md_errors(lambda s: s["model"]["dummy"].update(seed=None))
        self.assertEqual(e, [])
        e = self.md_errors(lambda s: s.update(imagePullSecrets=[None]))
        self.assertIn('spec.imagePullSecrets[0]: Invalid value: "null": spec.imagePullSecrets[0] '
                      'in body must be of type object: "null"', e)

    def test_int_or_string_quantities(self):
        ok = self.md_errors(lambda s: s["decode"]["resources"]["limits"].update(
            {"nvidia.com/gpu": 1, "memory": "1.5Gi", "cpu": "250m"}))
        self.assertEqual(ok, [])
        e = self.md_errors(lambda s: s["decode"]["resources"]["limits"].update(cpu="two cores"))
        self.assertEqual(len(e), 1, e)  # a string, so the anyOf holds; the pattern does not
        self.assertTrue(e[0].startswith('spec.decode.resources.limits[cpu]: Invalid value: '
                                        '"two cores": spec.decode.resources.limits[cpu] in body '
                                        "should match '^(\\+|-)?"), e[0])
        e = self.md_errors(lambda s: s["decode"]["resources"]["limits"].update(cpu=True))
        self.assertIn('must be of type integer,string: "boolean"', e[0])
        e = self.md_errors(lambda s: s["decode"].update(kvCacheMemory=[1]))
        self.assertIn('spec.decode.kvCacheMemory in body must be of type integer,string', e[0])

    def test_strings(self):
        e = self.md_errors(lambda s: s["model"].update(name=""))
        self.assertEqual(e, ['spec.model.name: Invalid value: "": spec.model.name in body should '
                             "be at least 1 chars long"])
        e = self.md_errors(lambda s: s["model"].update(name="x" * 254))
        self.assertEqual(e, ["spec.model.name: Too long: may not be more than 253 bytes",
                             NOT_CHECKED])
        e = errors_of(MP, pool(deploymentName="Not_A_Name"))
        self.assertEqual(e, ['spec.deploymentName: Invalid value: "Not_A_Name": '
                             "spec.deploymentName in body should match "
                             "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"])

    def test_required(self):
        obj = example("tiny-cpu")
        del obj["spec"]["model"]
        e = errors_of(MD, obj)
        self.assertEqual(e[0], "spec.model: Required value")
        obj = pool()
        del obj["spec"]["role"]
        self.assertEqual(errors_of(MP, obj)[0], "spec.role: Required value")
        obj = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelPool", "metadata": {"name": "p"}}
        self.assertEqual(errors_of(MP, obj)[0], "spec: Required value")
        e = self.md_errors(lambda s: s["model"]["dummy"].pop("preset"))
        self.assertEqual(e[0], "spec.model.dummy.preset: Required value")

    def test_blocking_errors_skip_the_cel_rules(self):
        e = self.md_errors(lambda s: (s["model"].pop("name"), s["model"].pop("dummy")))
        self.assertEqual(e, ["spec.model.name: Required value", NOT_CHECKED])
        # A value error (a minimum) does not stop them: both are reported.
        e = self.md_errors(lambda s: (s["prefill"].update(replicas=-1),
                                      s["decode"].update(tensorParallel=3)))
        self.assertEqual(len(e), 2, e)
        self.assertIn("tensorParallel must be a power of two", e[1])

    def test_lists(self):
        secrets = [{"name": f"s{i}"} for i in range(17)]
        e = self.md_errors(lambda s: s.update(imagePullSecrets=secrets))
        self.assertEqual(e, ["spec.imagePullSecrets: Too many: 17: must have at most 16 items",
                             NOT_CHECKED])
        e = self.md_errors(lambda s: s.update(imagePullSecrets=[{}]))
        self.assertEqual(e[0], "spec.imagePullSecrets[0].name: Required value")

    def test_status_conditions(self):
        cond = {"type": "Ready", "status": "True", "reason": "PodsReady", "message": "",
                "lastTransitionTime": "2026-12-01T01:00:00Z"}
        obj = example("tiny-cpu")
        obj["status"] = {"conditions": [cond, dict(cond, status="False")]}
        self.assertEqual(errors_of(MD, obj),
                         ['status.conditions[1]: Duplicate value: {"type":"Ready"}'])
        obj["status"] = {"conditions": [dict(cond, status="Yes", lastTransitionTime="yesterday",
                                             reason="pods not ready")]}
        e = errors_of(MD, obj)
        self.assertIn('status.conditions[0].status: Unsupported value: "Yes": supported values: '
                      '"True", "False", "Unknown"', e)
        self.assertIn('status.conditions[0].lastTransitionTime: Invalid value: "yesterday": '
                      "status.conditions[0].lastTransitionTime in body must be of type "
                      'date-time: "yesterday"', e)
        self.assertTrue(any(x.startswith('status.conditions[0].reason: Invalid value: '
                                         '"pods not ready"') for x in e), e)
        obj["status"] = {"conditions": [cond], "prefill": {"ready": "1/1", "replicas": 1}}
        self.assertEqual(errors_of(MD, obj), [])


class RuleTest(unittest.TestCase):
    """Each x-kubernetes-validations rule of the CRDs, failing and passing."""

    def md(self, mutate, old_mutate=None):
        obj = example("tiny-cpu")
        mutate(obj["spec"])
        old = None
        if old_mutate is not None:
            old = example("tiny-cpu")
            old_mutate(old["spec"])
            self.assertEqual(crd_schema.admit(MD, old), [])
        return errors_of(MD, obj, old)

    def test_tensor_parallel_power_of_two(self):
        for tp, ok in ((1, True), (2, True), (3, False), (6, False), (8, True), (64, True)):
            e = self.md(lambda s: s["decode"].update(tensorParallel=tp))
            want = [] if ok else ['spec.decode.tensorParallel: Invalid value: "integer": '
                                  "tensorParallel must be a power of two from 1 to 64"]
            self.assertEqual(e, want, tp)

    def test_model_path_xor_dummy(self):
        e = self.md(lambda s: s["model"].update(path="/models/x"))
        self.assertEqual(e, ['spec.model: Invalid value: "object": set exactly one of model.path '
                             "(a checkpoint) and model.dummy (random weights)"])
        e = self.md(lambda s: s["model"].pop("dummy"))
        self.assertEqual(len(e), 1)
        self.assertIn("set exactly one of model.path", e[0])

    def test_volume_rules(self):
        def with_volume(volume, path="/models/x"):
            def mutate(s):
                s["model"].pop("dummy")
                s["model"].update(path=path, volume=volume)
            return mutate
        pvc = {"persistentVolumeClaim": {"claimName": "w"}}
        self.assertEqual(self.md(with_volume(pvc)), [])
        e = self.md(with_volume(pvc, path="/weights/x"))
        self.assertEqual(e, ['spec.model: Invalid value: "object": model.path must lie under '
                             "model.volume.mountPath"])
        e = self.md(with_volume(pvc, path="/models2/x"))  # a sibling directory, not under it
        self.assertEqual(len(e), 1)
        self.assertIn("model.path must lie under model.volume.mountPath", e[0])
        self.assertEqual(self.md(with_volume(dict(pvc, mountPath="/models/"))), [])
        e = self.md(with_volume({}))
        self.assertEqual(e, ['spec.model.volume: Invalid value: "object": volume needs exactly one '
                             "of persistentVolumeClaim and hostPath"])
        both = dict(pvc, hostPath={"path": "/data"})
        self.assertEqual(len(self.md(with_volume(both))), 1)

    def test_autoscaling_rules(self):
        def scale(**a):
            return lambda s: s["decode"].update(autoscaling=a)
        self.assertEqual(self.md(scale(enabled=True, minReplicas=1, maxReplicas=2)), [])
        self.assertEqual(self.md(scale(enabled=True)),
                         ['spec.decode.autoscaling: Invalid value: "object": '
                          "autoscaling.maxReplicas is required when autoscaling is enabled in "
                          "builtin mode"])
        self.assertEqual(self.md(scale(enabled=False, minReplicas=3, maxReplicas=2)),
                         ['spec.decode.autoscaling: Invalid value: "object": '
                          "autoscaling.minReplicas must not exceed autoscaling.maxReplicas"])
        e = self.md(scale(enabled=True, minReplicas=2, maxReplicas=4))  # replicas 1 < min 2
        self.assertEqual(e, ['spec.decode: Invalid value: "object": replicas must lie within '
                             "autoscaling.minReplicas..autoscaling.maxReplicas while autoscaling "
                             "is enabled in builtin mode"])
        self.assertEqual(self.md(scale(enabled=False, minReplicas=2, maxReplicas=4)), [])
        # mode external: HPA/KEDA own the size and its bounds (scale to zero included).
        self.assertEqual(self.md(scale(enabled=True, mode="external")), [])
        self.assertEqual(errors_of(MP, pool(replicas=0, autoscaling={"enabled": True,
                                                                     "mode": "external",
                                                                     "maxReplicas": 8})), [])
        e = errors_of(MP, pool(replicas=9, autoscaling={"enabled": True, "maxReplicas": 8}))
        self.assertEqual(len(e), 1)
        self.assertTrue(e[0].startswith('spec: Invalid value: "object": replicas must lie'))

    def test_kv_cache_memory_is_not_negative(self):
        for value, ok in (("40Gi", True), (1 << 30, True), ("-1Gi", False), (-5, False)):
            e = self.md(lambda s: s["decode"].update(kvCacheMemory=value))
            want = [] if ok else ['spec.decode.kvCacheMemory: Invalid value: "": kvCacheMemory '
                                  "must not be negative"]
            self.assertEqual(e, want, value)

    def test_prefill_fp8_kv_needs_decode_fp8_kv(self):
        e = self.md(lambda s: s["prefill"].update(kvCache="fp8_e4m3"))
        self.assertEqual(len(e), 1)
        self.assertTrue(e[0].startswith('spec: Invalid value: "object": prefill.kvCache fp8_e4m3 '
                                        "needs decode.kvCache fp8_e4m3"), e[0])
        both = self.md(lambda s: (s["prefill"].update(kvCache="fp8_e4m3"),
                                  s["decode"].update(kvCache="fp8_e4m3")))
        self.assertEqual(both, [])

    def test_name_length_rule_at_the_root(self):
        obj = example("tiny-cpu")
        obj["metadata"]["name"] = "n" * 45
        self.assertEqual(errors_of(MD, obj),
                         ['<nil>: Invalid value: "object": metadata.name must be at most 44 '
                          "characters so that <name>-prefill (ModelPool, StatefulSet) stays "
                          "within 52"])
        obj["metadata"]["name"] = "n" * 44
        self.assertEqual(errors_of(MD, obj), [])

    def test_transition_rules_only_on_update(self):
        def checkpoint(path):
            def mutate(s):
                s["model"].pop("dummy")
                s["model"]["path"] = path
            return mutate
        self.assertEqual(self.md(checkpoint("/a")), [])  # a create: no oldSelf
        self.assertEqual(self.md(checkpoint("/a"), checkpoint("/a")), [])
        self.assertEqual(self.md(checkpoint("/b"), checkpoint("/a")),
                         ['spec.model.path: Invalid value: "string": model.path is immutable'])
        e = self.md(checkpoint("/a"), lambda s: None)  # dummy -> checkpoint
        self.assertEqual(e, ['spec.model: Invalid value: "object": the model source (path or '
                             "dummy) is immutable"])
        e = self.md(lambda s: s["model"]["dummy"].update(seed=2), lambda s: None)
        self.assertEqual(e, ['spec.model.dummy: Invalid value: "object": model.dummy is '
                             "immutable"])
        # Mutable fields may change.
        self.assertEqual(self.md(lambda s: s["decode"].update(replicas=5), lambda s: None), [])

    def test_model_pool_identity_is_immutable(self):
        old = pool()
        self.assertEqual(errors_of(MP, old), [])
        e = errors_of(MP, pool(role="prefill"), old)
        self.assertEqual(e, ['spec.role: Invalid value: "string": role is immutable'])
        e = errors_of(MP, pool(deploymentName="other"), old)
        self.assertEqual(e, ['spec.deploymentName: Invalid value: "string": deploymentName is '
                             "immutable"])
        self.assertEqual(errors_of(MP, pool(replicas=4), old), [])  # the scale subresource's way


class GenericAdmitTest(unittest.TestCase):
    """Schema features the tandem CRDs do not use but kube-sim may meet."""

    SCHEMA = {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                     "properties": {"known": {"type": "object",
                                              "properties": {"a": {"type": "integer"}}}}},
            "labels": {"type": "object",
                       "additionalProperties": {"type": "object", "properties": {
                           "w": {"type": "integer", "default": 7}}}},
            "items": {"type": "array", "items": {"type": "object", "properties": {
                "n": {"type": "string", "default": "x"}}}},
            "maybe": {"type": "string", "nullable": True},
            "ratio": {"type": "number"},
            "pair": {"type": "object", "properties": {
                "lo": {"type": "integer"}, "hi": {"type": "integer"}},
                "x-kubernetes-validations": [
                    {"rule": "self.lo <= self.hi", "messageExpression":
                     "'lo ' + string(self.lo) + ' above hi ' + string(self.hi)"},
                    {"rule": "self.lo != 13", "fieldPath": ".lo", "reason": "FieldValueForbidden",
                     "message": "unlucky"},
                    {"rule": "self.hi != 99"}]},
            "qty": {"x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-validations": [{"rule": "self > 1", "message": "more than one"}]},
            "half": {"type": "number",
                     "x-kubernetes-validations": [{"rule": "self == 0.5 || self == 1.0"}]},
        }}}}

    def test_preserve_unknown_maps_list_defaults_nullable(self):
        obj = {"spec": {"free": {"anything": [1], "known": {"a": 1, "b": 2}},
                        "labels": {"x": {}, "y": {"w": 1, "z": 0}},
                        "items": [{}, {"n": "y", "m": 1}], "maybe": None}}
        self.assertEqual(crd_schema.admit(self.SCHEMA, obj), [])
        spec = obj["spec"]
        self.assertEqual(spec["free"], {"anything": [1], "known": {"a": 1}})
        self.assertEqual(spec["labels"], {"x": {"w": 7}, "y": {"w": 1}})
        self.assertEqual(spec["items"], [{"n": "x"}, {"n": "y"}])
        self.assertIsNone(spec["maybe"])

    def test_message_expression_field_path_reason_default_message(self):
        obj = {"spec": {"pair": {"lo": 13, "hi": 12}}}
        self.assertEqual(crd_schema.admit(self.SCHEMA, obj), [
            'spec.pair: Invalid value: "object": lo 13 above hi 12',
            "spec.pair.lo: Forbidden: unlucky"])
        obj = {"spec": {"pair": {"lo": 1, "hi": 99}}}
        self.assertEqual(crd_schema.admit(self.SCHEMA, obj), [
            'spec.pair: Invalid value: "object": failed rule: self.hi != 99'])

    def test_rule_runtime_error_is_reported(self):
        obj = {"spec": {"pair": {"lo": 1}}}
        self.assertEqual(crd_schema.admit(self.SCHEMA, obj), [
            'spec.pair: Invalid value: "object": no such key: hi evaluating rule: '
            "self.lo <= self.hi",
            'spec.pair: Invalid value: "object": no such key: hi evaluating rule: self.hi != 99'])

    def test_overload_errors_name_the_rule_by_its_message(self):
        self.assertEqual(crd_schema.admit(self.SCHEMA, {"spec": {"qty": 2}}), [])
        self.assertEqual(crd_schema.admit(self.SCHEMA, {"spec": {"qty": 1}}),
                         ['spec.qty: Invalid value: "": more than one'])
        self.assertEqual(crd_schema.admit(self.SCHEMA, {"spec": {"qty": "2Gi"}}), [
            "spec.qty: Invalid value: \"\": 'no such overload: string > int': call arguments did "
            "not match a supported operator, function or macro signature for rule: more than one"])

    def test_number_fields_are_doubles_in_cel(self):
        self.assertEqual(crd_schema.admit(self.SCHEMA, {"spec": {"half": 1}}), [])
        self.assertEqual(len(crd_schema.admit(self.SCHEMA, {"spec": {"half": 2}})), 1)

    def test_accepts_the_version_entry_or_the_schema(self):
        for wrapped in (MD_CRD["spec"]["versions"][0], MD_CRD["spec"]["versions"][0]["schema"],
                        MD):
            obj = example("tiny-cpu")
            obj["spec"]["decode"]["weights"] = "int8"
            self.assertEqual(crd_schema.admit(wrapped, obj)[1:], [NOT_CHECKED])


class RobustnessTest(unittest.TestCase):
    """Seeded random damage to CRDs and resources: errors, never exceptions."""

    JUNK = [None, 0, -1, 1.5, "", "x", True, [], [None], {}, {"type": 5}, {"rule": 1},
            [{"rule": "self"}], {"x-kubernetes-validations": "no"}]

    def mutate(self, node, rng, depth=0):
        if isinstance(node, dict) and node:
            key = rng.choice(sorted(node, key=str))
            if rng.random() < 0.3 or depth > 12:
                node[key] = copy.deepcopy(rng.choice(self.JUNK))
            else:
                self.mutate(node[key], rng, depth + 1)
        elif isinstance(node, list) and node:
            i = rng.randrange(len(node))
            if rng.random() < 0.3 or depth > 12:
                node[i] = copy.deepcopy(rng.choice(self.JUNK))
            else:
                self.mutate(node[i], rng, depth + 1)

    def test_mutated_crds_and_resources(self):
        rng = random.Random(7)
        for i in range(600):
            crd = copy.deepcopy(rng.choice([MD_CRD, MP_CRD]))
            for _ in range(rng.randint(1, 3)):
                self.mutate(crd, rng)
            errors = crd_schema.validate_crd(crd)
            self.assertIsInstance(errors, list)
            obj = example(rng.choice(EXAMPLES)) if crd is not None else {}
            for _ in range(rng.randint(0, 3)):
                self.mutate(obj, rng)
            if errors:
                continue
            schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            old = copy.deepcopy(obj) if rng.random() < 0.5 else None
            self.assertIsInstance(crd_schema.admit(schema, obj, old), list, i)


if __name__ == "__main__":
    unittest.main(verbosity=1)
