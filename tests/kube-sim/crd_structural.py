"""Registration-time checks of a CustomResourceDefinition for kube-sim (crd_schema.py has the
admission side): each version's schema is structural as Kubernetes defines it (every node typed,
value validations only inside anyOf/allOf/oneOf/not, no $ref, properties and
additionalProperties exclusive, list-type maps keyed by required scalars, well-formed keywords),
every CEL rule compiles, `oldSelf` only where old and new values correlate, and defaults are
pruned and valid.

    errors = validate_crd(crd)          # [] when the API server would accept it
"""
import copy
import re

import cel
from crd_schema import apply_defaults, program_for, prune, validate_values


def structural_errors(schema, path="openAPIV3Schema"):
    """Why `schema` is not a structural schema (Kubernetes' rules), or []."""
    errors = []
    _structural(schema, path, errors, in_combinator=False, root=True)
    return errors


FORBIDDEN_KEYS = ("$ref", "definitions", "dependencies", "additionalItems", "patternProperties",
                  "id", "$schema")
INT_OR_STRING_ANYOF = [{"type": "integer"}, {"type": "string"}]


TYPES = ("object", "array", "string", "integer", "number", "boolean")
LIST_TYPES = ("atomic", "set", "map")
RULE_FIELDS = ("rule", "message", "messageExpression", "reason", "fieldPath")


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_str_list(v):
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_pattern(v):
    if not isinstance(v, str):
        return False
    try:
        re.compile(v)
    except re.error:
        return False
    return True


def _is_rule_list(v):
    return isinstance(v, list) and all(
        isinstance(r, dict) and isinstance(r.get("rule"), str) and
        all(isinstance(r.get(f, ""), str) for f in RULE_FIELDS) for r in v)


# keyword -> (check, what it must be)
KEYWORD_SHAPES = {
    "type": (lambda v: v in TYPES, "one of " + ", ".join(TYPES)),
    "properties": (lambda v: isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()),
                   "a map of schemas"),
    "required": (_is_str_list, "a list of strings"),
    "enum": (lambda v: isinstance(v, list), "a list"),
    "items": (lambda v: isinstance(v, dict), "one schema"),
    "additionalProperties": (lambda v: isinstance(v, (dict, bool)), "a schema or a boolean"),
    "anyOf": (lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
              "a list of schemas"),
    "not": (lambda v: isinstance(v, dict), "a schema"),
    "pattern": (_is_pattern, "a regular expression"),
    "format": (lambda v: isinstance(v, str), "a string"),
    "description": (lambda v: isinstance(v, str), "a string"),
    "x-kubernetes-validations": (_is_rule_list, "a list of {rule, message, ...}"),
    "x-kubernetes-list-type": (lambda v: v in LIST_TYPES, "one of " + ", ".join(LIST_TYPES)),
    "x-kubernetes-list-map-keys": (_is_str_list, "a list of strings"),
}
KEYWORD_SHAPES["allOf"] = KEYWORD_SHAPES["oneOf"] = KEYWORD_SHAPES["anyOf"]
for _k in ("minimum", "maximum", "multipleOf"):
    KEYWORD_SHAPES[_k] = (_is_number, "a number")
for _k in ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"):
    KEYWORD_SHAPES[_k] = (_is_count, "a non-negative integer")
for _k in ("exclusiveMinimum", "exclusiveMaximum", "nullable", "uniqueItems",
           "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
           "x-kubernetes-embedded-resource"):
    KEYWORD_SHAPES[_k] = (lambda v: isinstance(v, bool), "a boolean")


def _structural(s, path, errors, in_combinator, root=False):
    if not isinstance(s, dict):
        errors.append(f"{path}: must be an object")
        return
    bad = [k for k, (ok, _) in KEYWORD_SHAPES.items() if k in s and not ok(s[k])]
    for key in bad:
        errors.append(f"{path}.{key}: Invalid value: must be {KEYWORD_SHAPES[key][1]}")
    if bad:
        return  # the checks below assume well-formed keywords
    for key in FORBIDDEN_KEYS:
        if key in s:
            errors.append(f"{path}.{key}: Forbidden: {key} is not supported")
    if s.get("uniqueItems") is True:
        errors.append(f"{path}.uniqueItems: Forbidden: uniqueItems cannot be set to true")
    if s.get("additionalProperties") is False:
        errors.append(f"{path}.additionalProperties: Forbidden: must not be false")
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    if in_combinator:
        for key in ("type", "description", "default", "nullable", "additionalProperties",
                    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations"):
            if key in s:
                errors.append(f"{path}.{key}: Forbidden: must be empty inside anyOf/allOf/oneOf/"
                              "not (value validations only)")
    else:
        if root and s.get("type") != "object":
            errors.append(f"{path}.type: Required value: must be object at the root")
        if not s.get("type") and not int_or_string and not preserve:
            errors.append(f"{path}.type: Required value: must not be empty for specified "
                          "object fields")
        if int_or_string and s.get("type"):
            errors.append(f"{path}.type: Forbidden: must be empty with "
                          "x-kubernetes-int-or-string")
    if "properties" in s and isinstance(s.get("additionalProperties"), dict):
        errors.append(f"{path}.additionalProperties: Forbidden: additionalProperties and "
                      "properties are mutually exclusive")
    if (s.get("type") == "array" and not in_combinator) and not isinstance(s.get("items"), dict):
        errors.append(f"{path}.items: Required value: must be specified (one schema) for arrays")
    if s.get("x-kubernetes-embedded-resource") and s.get("type") != "object":
        errors.append(f"{path}.type: Required value: must be object for an embedded resource")
    if s.get("x-kubernetes-list-type") == "map":
        _structural_list_map(s, path, errors)
    for key, prop in s.get("properties", {}).items():
        _structural(prop, f"{path}.properties[{key}]", errors, in_combinator)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(s.get(key), dict):
            _structural(s[key], f"{path}.{key}", errors, in_combinator or key == "not")
    for key in ("anyOf", "allOf", "oneOf"):
        if key in s:
            if int_or_string and key == "anyOf" and s[key] == INT_OR_STRING_ANYOF:
                continue
            for i, sub in enumerate(s[key]):
                _structural(sub, f"{path}.{key}[{i}]", errors, True)


def _structural_list_map(s, path, errors):
    keys = s.get("x-kubernetes-list-map-keys") or []
    items = s.get("items") if isinstance(s.get("items"), dict) else {}
    if not keys:
        errors.append(f"{path}.x-kubernetes-list-map-keys: Required value: needed with "
                      "x-kubernetes-list-type map")
    if items.get("type") != "object":
        errors.append(f"{path}.items.type: Invalid value: must be object for a list-type map")
    for k in keys:
        prop = items.get("properties", {}).get(k)
        if prop is None or prop.get("type") not in ("string", "integer", "boolean", "number"):
            errors.append(f"{path}.x-kubernetes-list-map-keys: Invalid value: {k!r} must be a "
                          "scalar property of the items")
        elif k not in items.get("required", []) and "default" not in prop:
            errors.append(f"{path}.x-kubernetes-list-map-keys: Invalid value: {k!r} must be "
                          "required or defaulted")


def _rule_errors(s, path, correlatable, errors):
    for i, rule in enumerate(s.get("x-kubernetes-validations", [])):
        where = f"{path}.x-kubernetes-validations[{i}]"
        for field in ("rule", "messageExpression"):
            if field not in rule:
                continue
            try:
                program = program_for(rule[field])
            except cel.CelSyntaxError as e:
                errors.append(f"{where}.{field}: Invalid value: {rule[field]!r}: compilation "
                              f"failed: {e}")
                continue
            if program.uses_old_self and not correlatable:
                errors.append(f"{where}.{field}: Invalid value: oldSelf cannot be used on the "
                              "uncorrelatable portion of the schema")
    for key, prop in s.get("properties", {}).items():
        _rule_errors(prop, f"{path}.properties[{key}]", correlatable, errors)
    if isinstance(s.get("additionalProperties"), dict):
        _rule_errors(s["additionalProperties"], f"{path}.additionalProperties", correlatable,
                     errors)
    if isinstance(s.get("items"), dict):
        keep = correlatable and s.get("x-kubernetes-list-type") == "map"
        _rule_errors(s["items"], f"{path}.items", keep, errors)


def _default_errors(s, path, errors):
    if "default" in s:
        value = copy.deepcopy(s["default"])
        pruned = copy.deepcopy(value)
        prune(pruned, s)
        if pruned != value:
            errors.append(f"{path}.default: Invalid value: must not have unknown fields")
        apply_defaults(value, s)
        trial = []
        validate_values(value, s, "", trial)
        errors.extend(f"{path}.default: Invalid value: {e.text}" for e in trial)
    for key, prop in s.get("properties", {}).items():
        _default_errors(prop, f"{path}.properties[{key}]", errors)
    for key in ("items", "additionalProperties"):
        if isinstance(s.get(key), dict):
            _default_errors(s[key], f"{path}.{key}", errors)


COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _names_errors(spec, errors):
    names = spec.get("names")
    if not isinstance(names, dict):
        return
    for field in ("plural", "kind"):
        if not isinstance(names.get(field), str) or not names.get(field):
            errors.append(f"spec.names.{field}: Required value")
    for field in ("plural", "singular"):
        value = names.get(field)
        if isinstance(value, str) and value and not NAME.match(value):
            errors.append(f"spec.names.{field}: Invalid value: {value!r}: a lowercase RFC 1123 "
                          "label must consist of lower case alphanumeric characters or '-'")
    for field in ("shortNames", "categories"):
        if field in names and not _is_str_list(names[field]):
            errors.append(f"spec.names.{field}: Invalid value: must be a list of strings")
    if spec.get("scope") not in (None, "Namespaced", "Cluster"):
        errors.append(f"spec.scope: Unsupported value: {spec.get('scope')!r}: supported values: "
                      '"Cluster", "Namespaced"')


def _version_extras_errors(version, path, errors):
    columns = version.get("additionalPrinterColumns", [])
    if not isinstance(columns, list) or not all(isinstance(c, dict) for c in columns):
        errors.append(f"{path}.additionalPrinterColumns: Invalid value: must be a list of objects")
        columns = []
    for i, column in enumerate(columns):
        where = f"{path}.additionalPrinterColumns[{i}]"
        if not isinstance(column.get("name"), str) or not column.get("name"):
            errors.append(f"{where}.name: Required value")
        if column.get("type") not in COLUMN_TYPES:
            errors.append(f"{where}.type: Unsupported value: {column.get('type')!r}: supported "
                          "values: " + ", ".join(f'"{t}"' for t in COLUMN_TYPES))
        if not isinstance(column.get("jsonPath"), str) or not column["jsonPath"].startswith("."):
            errors.append(f"{where}.jsonPath: Invalid value: must be a JSON path starting with .")
    subresources = version.get("subresources") or {}
    scale = subresources.get("scale") if isinstance(subresources, dict) else None
    if scale is None:
        return
    if not isinstance(scale, dict):
        errors.append(f"{path}.subresources.scale: Invalid value: must be an object")
        return
    for field, prefixes, required in (("specReplicasPath", (".spec.",), True),
                                      ("statusReplicasPath", (".status.",), True),
                                      ("labelSelectorPath", (".spec.", ".status."), False)):
        value = scale.get(field)
        if value is None and not required:
            continue
        if not isinstance(value, str) or not value.startswith(prefixes):
            errors.append(f"{path}.subresources.scale.{field}: Invalid value: {value!r}: should "
                          f"be a json path under {' or '.join(prefixes)}")


def validate_crd(crd):
    """Registration-time errors of a CustomResourceDefinition (apiextensions.k8s.io/v1)."""
    errors = []
    spec = crd.get("spec") if isinstance(crd, dict) else None
    if not isinstance(spec, dict):
        return ["spec: Required value"]
    for field in ("group", "names", "scope", "versions"):
        if field not in spec:
            errors.append(f"spec.{field}: Required value")
    _names_errors(spec, errors)
    versions = spec.get("versions") or []
    if not isinstance(versions, list) or not all(isinstance(v, dict) for v in versions):
        return errors + ["spec.versions: Invalid value: must be a list of objects"]
    if sum(1 for v in versions if v.get("storage")) != 1:
        errors.append("spec.versions: Invalid value: must have exactly one storage version")
    for i, version in enumerate(versions):
        _version_extras_errors(version, f"spec.versions[{i}]", errors)
        path = f"spec.versions[{i}].schema.openAPIV3Schema"
        wrapper = version.get("schema")
        schema = wrapper.get("openAPIV3Schema") if isinstance(wrapper, dict) else None
        if not isinstance(schema, dict):
            errors.append(f"{path}: Required value: schemas are required")
            continue
        before = len(errors)
        errors.extend(structural_errors(schema, path))
        if len(errors) == before:
            _metadata_errors(schema, path, errors)
            _rule_errors(schema, path, True, errors)
            _default_errors(schema, path, errors)
    return errors


def _metadata_errors(schema, path, errors):
    """At the root, metadata may only narrow name and generateName (as strings)."""
    meta = schema.get("properties", {}).get("metadata")
    if meta is None:
        return
    if meta.get("type") != "object":
        errors.append(f"{path}.properties[metadata].type: Invalid value: must be object")
    for key, prop in meta.get("properties", {}).items():
        if key not in ("name", "generateName") or prop.get("type") != "string":
            errors.append(f"{path}.properties[metadata].properties[{key}]: Forbidden: only name "
                          "and generateName may be specified, as strings")
