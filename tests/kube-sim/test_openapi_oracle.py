#!/usr/bin/env python3
"""crd_schema.py's OpenAPI value validation against PyPI `jsonschema` (Draft 4, which the CRD
dialect of OpenAPI v3 follows: boolean exclusiveMinimum, `required` lists, `pattern` on strings
only) on seeded random damage to the examples and a ModelPool: both must flag the same field
paths.

The CRD schemas are translated for jsonschema: `nullable` becomes a `null` type, Kubernetes
extensions and defaults are dropped. What jsonschema does not know is left out of the
comparison: `x-kubernetes-list-type` uniqueness, `format: date-time`, the CEL rules (those have
their own tests and oracle). Integral floats count as integers, as in go-openapi, the API
server's validator. Objects are pruned and defaulted first, as the API server does before
validating.

Run: .venv/bin/python tests/kube-sim/test_openapi_oracle.py   (ctest -R kube_sim.openapi_oracle)
"""
import copy
import os
import random
import re
import sys
import unittest

import jsonschema
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crd_schema  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return yaml.safe_load(f)


def schema_of(crd_file):
    return load(crd_file)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def to_draft4(node):
    """The CRD schema as plain Draft 4 JSON Schema."""
    if isinstance(node, list):
        return [to_draft4(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("default", "description", "format",
                                                       "nullable"):
            continue
        if key in ("properties",):
            out[key] = {k: to_draft4(v) for k, v in value.items()}
        else:
            out[key] = to_draft4(value)
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    return out


def _integer(checker, value):
    # go-openapi, which the API server validates with, takes an integral float as an integer
    # ("isFloatInt"); Draft 4 alone would not.
    return (isinstance(value, int) and not isinstance(value, bool)) or \
        (isinstance(value, float) and value.is_integer())


Validator = jsonschema.validators.extend(
    jsonschema.Draft4Validator,
    type_checker=jsonschema.Draft4Validator.TYPE_CHECKER.redefine("integer", _integer))

PATH_PART = re.compile(r"([^.\[\]]+)|\[([^\]]*)\]")
IGNORED = ("Duplicate value", "must be of type date-time")


def my_paths(obj, schema):
    errors = []
    crd_schema.validate_values(obj, schema, "", errors)
    paths = set()
    for e in errors:
        if any(x in e.text for x in IGNORED):
            continue
        field = e.text.split(": ", 1)[0]
        paths.add(tuple(a or b for a, b in PATH_PART.findall(field)))
    return paths


def oracle_paths(obj, draft4):
    paths = set()
    for err in Validator(draft4).iter_errors(obj):
        path = tuple(str(p) for p in err.absolute_path)
        if err.validator == "required":
            path += (re.match(r"'([^']*)' is a required property", err.message).group(1),)
        if path[:1] == ("metadata",):
            continue  # ObjectMeta: the API server's, not the CRD schema's
        paths.add(path)
    return paths


JUNK = [None, True, False, -1, 0, 1, 3, 8, 64, 65536, 2**40, 1.5, 0.0, -0.5, "", "x",
        "int8", "bf16", "fp8_e4m3", "prefill", "Always", "/models", "relative/path",
        "1Gi", "500m", "two cores", "Not_A_Name", "x" * 300, [], [1], [{}], [{"name": "s"}],
        {}, {"a": 1}, {"name": "n"}]


def leaves(node, path=()):
    """Every (path) into a JSON value, containers included."""
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from leaves(v, path + (i,))


def damage(obj, rng):
    paths = [p for p in leaves(obj) if p and p[0] in ("spec", "status")]
    if not paths:
        return  # both already replaced or removed
    path = rng.choice(paths)
    parent = obj
    for p in path[:-1]:
        parent = parent[p]
    if isinstance(parent, dict) and rng.random() < 0.2:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(rng.choice(JUNK))


STATUS = {"observedGeneration": 1,
          "conditions": [{"type": "Ready", "status": "True", "reason": "PodsReady",
                          "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}],
          "prefill": {"replicas": 1, "readyReplicas": 1, "ready": "1/1"}}

POOL = {"apiVersion": "tandem.dev/v1alpha1", "kind": "ModelPool", "metadata": {"name": "p"},
        "spec": {"deploymentName": "d", "role": "decode", "replicas": 2,
                 "model": {"name": "m", "path": "/models/m",
                           "volume": {"hostPath": {"path": "/data"}}},
                 "resources": {"limits": {"nvidia.com/gpu": 8}}, "nodeSelector": {"a": "b"},
                 "autoscaling": {"enabled": True, "maxReplicas": 4},
                 "imagePullSecrets": [{"name": "r"}]},
        "status": {"replicas": 2, "readyReplicas": 1, "selector": "a=b"}}


class OpenApiOracleTest(unittest.TestCase):
    def compare(self, schema, bases, rounds, seed):
        draft4 = to_draft4(schema)
        jsonschema.Draft4Validator.check_schema(draft4)
        rng = random.Random(seed)
        flagged = 0
        for i in range(rounds):
            obj = copy.deepcopy(rng.choice(bases))
            for _ in range(rng.randint(1, 3)):
                damage(obj, rng)
            crd_schema.prune(obj, schema, root=True)
            crd_schema.apply_defaults(obj, schema)
            ours, theirs = my_paths(obj, schema), oracle_paths(obj, draft4)
            self.assertEqual(ours, theirs, f"round {i}: {obj}")
            flagged += bool(ours)
        self.assertGreater(flagged, rounds // 4)  # the damage is not all harmless

    def test_model_deployments(self):
        bases = []
        for name in ("kimi-k2.6", "glm-5.2", "tiny-cpu"):
            obj = load(f"deploy/examples/{name}.yaml")
            obj["status"] = copy.deepcopy(STATUS)
            bases.append(obj)
        self.compare(schema_of("crds/tandem.dev_modeldeployments.yaml"), bases, 1500, 1)

    def test_model_pools(self):
        self.compare(schema_of("crds/tandem.dev_modelpools.yaml"), [POOL], 1000, 2)

    def test_undamaged_objects_are_clean_for_both(self):
        for crd_file, obj in (("crds/tandem.dev_modelpools.yaml", POOL),
                              ("crds/tandem.dev_modeldeployments.yaml",
                               load("deploy/examples/kimi-k2.6.yaml"))):
            schema = schema_of(crd_file)
            obj = copy.deepcopy(obj)
            self.assertEqual(crd_schema.admit(schema, obj), [])
            self.assertEqual(oracle_paths(obj, to_draft4(schema)), set())


if __name__ == "__main__":
    unittest.main(verbosity=1)
