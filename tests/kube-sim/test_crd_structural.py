#!/usr/bin/env python3
"""crd_structural.py, the CRD registration checks kube-sim runs: structural schemas, compilable
rules, oldSelf only where values correlate, valid and pruned defaults, names, printer columns,
scale paths, root metadata. Run alone or through test_crd_schema.py (ctest -R kube_sim.crd_schema).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import crd_schema  # noqa: E402


def crd_with(schema_spec, rules=None):
    root = {"type": "object", "properties": {"spec": schema_spec}}
    if rules:
        root["x-kubernetes-validations"] = rules
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "things", "kind": "Thing"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": root}}]}}


class StructuralTest(unittest.TestCase):
    def assert_rejected(self, spec_schema, fragment, rules=None):
        errors = crd_schema.validate_crd(crd_with(spec_schema, rules))
        self.assertTrue(any(fragment in e for e in errors), errors)

    def test_accepts_a_plain_schema(self):
        self.assertEqual(crd_schema.validate_crd(crd_with({"type": "object"})), [])

    def test_rejects_non_structural_schemas(self):
        self.assert_rejected({"properties": {"a": {"type": "string"}}}, "type: Required value")
        self.assert_rejected({"type": "object", "properties": {"a": {"type": "string"}},
                              "additionalProperties": {"type": "string"}}, "mutually exclusive")
        self.assert_rejected({"type": "object", "properties": {"a": {
            "type": "string", "anyOf": [{"type": "string"}]}}}, "anyOf[0].type: Forbidden")
        self.assert_rejected({"type": "object", "properties": {"a": {"$ref": "#/x"}}},
                             "$ref: Forbidden")
        self.assert_rejected({"type": "array"}, "items: Required value")
        self.assert_rejected({"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                             "uniqueItems")
        self.assert_rejected({"type": "object", "additionalProperties": False}, "must not be false")
        self.assert_rejected({"type": "string", "x-kubernetes-int-or-string": True},
                             "must be empty with x-kubernetes-int-or-string")
        self.assert_rejected({"type": "array", "x-kubernetes-list-type": "map",
                              "items": {"type": "object"}}, "list-map-keys: Required value")

    def test_rejects_bad_rules_and_defaults(self):
        self.assert_rejected({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.a <="}]}, "compilation failed")
        self.assert_rejected({"type": "object", "x-kubernetes-validations": [
            {"rule": "quantity(self.a).isGreaterThan(quantity('1'))"}]}, "compilation failed")
        self.assert_rejected({"type": "array", "items": {
            "type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}},
            "uncorrelatable")
        self.assert_rejected({"type": "object", "properties": {"n": {
            "type": "integer", "minimum": 1, "default": 0}}}, "default: Invalid value")
        self.assert_rejected({"type": "object", "properties": {"o": {
            "type": "object", "properties": {}, "default": {"x": 1}}}}, "unknown fields")
        self.assert_rejected({"type": "object"}, "compilation failed",
                             rules=[{"rule": "self.spec.size() > "}])

    def test_rejects_bad_names_columns_scale_and_metadata(self):
        crd = crd_with({"type": "object"})
        crd["spec"]["names"]["plural"] = "Things"
        crd["spec"]["scope"] = "Global"
        version = crd["spec"]["versions"][0]
        version["additionalPrinterColumns"] = [{"name": "X", "type": "float", "jsonPath": "spec"}]
        version["subresources"] = {"scale": {"specReplicasPath": ".status.replicas",
                                             "statusReplicasPath": ".status.replicas"}}
        version["schema"]["openAPIV3Schema"]["properties"]["metadata"] = {
            "type": "object", "properties": {"labels": {"type": "object"}}}
        errors = crd_schema.validate_crd(crd)
        for fragment in ("spec.names.plural: Invalid value", "spec.scope: Unsupported value",
                         "additionalPrinterColumns[0].type: Unsupported value",
                         "additionalPrinterColumns[0].jsonPath: Invalid value",
                         "scale.specReplicasPath: Invalid value",
                         "properties[metadata].properties[labels]: Forbidden"):
            self.assertTrue(any(fragment in e for e in errors), (fragment, errors))
        self.assertEqual(len(errors), 6, errors)

    def test_admission_of_an_uncompilable_rule_is_an_error_not_a_crash(self):
        schema = {"type": "object", "x-kubernetes-validations": [{"rule": "foo(self)"}]}
        e = crd_schema.admit(schema, {})
        self.assertEqual(len(e), 1)
        self.assertTrue(e[0].startswith('<nil>: Invalid value: "object": rule compile error: '), e)


if __name__ == "__main__":
    unittest.main(verbosity=1)
