"""What the Kubernetes API server does to a custom resource before storing it, for kube-sim.

    errors = admit(version_schema, obj, old_obj=None)

`version_schema` is a CRD version's `openAPIV3Schema` (or the version entry, or its `schema`).
`obj` is mutated as the API server would: unknown fields pruned (kept under
`x-kubernetes-preserve-unknown-fields`; `metadata` is never pruned at the root), defaults applied
(also inside defaulted and existing objects, list items and map values; a `null` in a
non-nullable field becomes its default, or is dropped when it has none). Then the OpenAPI value validations and
the `x-kubernetes-validations` CEL rules (cel.py) run; transition rules (those using `oldSelf`)
only when `old_obj` is given and the field existed in it. The result is a list of error strings
worded like the API server's (`spec.decode.weights: Unsupported value: "int8": supported values:
"bf16", "fp8", "int4"`); empty means admitted. As in Kubernetes, CEL rules are skipped when a type,
required, enum, too-long or too-many error already makes the object unusable.

`validate_crd(crd)` (in crd_structural.py) is the registration-time check: every version's schema
is structural and every rule compiles. kube-sim rejects a CRD that fails it, so a rule this
evaluator does not understand is refused there, never a crash at admission.
"""
import copy
import json
import re

import cel

_PROGRAMS = {}


def program_for(rule):
    if rule not in _PROGRAMS:
        _PROGRAMS[rule] = cel.compile_rule(rule)  # raises cel.CelSyntaxError
    return _PROGRAMS[rule]


def unwrap(version_schema):
    s = version_schema
    if "schema" in s and isinstance(s["schema"], dict):
        s = s["schema"]
    return s.get("openAPIV3Schema", s)


def admit(version_schema, obj, old_obj=None):
    schema = unwrap(version_schema)
    prune(obj, schema, root=True)
    apply_defaults(obj, schema)
    errors = []
    validate_values(obj, schema, "", errors)
    # strategy.go's hasBlockingErr: type, required, enum, too-long and too-many errors mean the
    # object lacks the shape the rules were written for.
    blocking = any(e.kind in BLOCKING for e in errors)
    messages = [e.text for e in errors]
    if blocking:
        if _has_rules(schema):
            messages.append('<nil>: Invalid value: "null": some validation rules were not '
                            "checked because the object was invalid; correct the existing "
                            "errors to complete validation")
        return messages
    cel_self = _to_cel(obj, schema, root=True)
    cel_old = _to_cel(old_obj, schema, root=True) if old_obj is not None else None
    _check_rules(cel_self, schema, cel_old, old_obj is not None, "", messages)
    return messages


# ---------------------------------------------------------------- pruning and defaulting

def _is_object(schema):
    return schema.get("type") == "object" or "properties" in schema


def prune(value, schema, root=False):
    if isinstance(value, dict) and _is_object(schema):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        keep_unknown = schema.get("x-kubernetes-preserve-unknown-fields") is True
        embedded = root or schema.get("x-kubernetes-embedded-resource") is True
        for key in list(value):
            if embedded and key in ("apiVersion", "kind", "metadata"):
                continue  # ObjectMeta is the API server's to check, not the schema's
            if key in props:
                prune(value[key], props[key])
            elif isinstance(extra, dict):
                prune(value[key], extra)
            elif not keep_unknown and extra is not True:
                del value[key]
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            prune(item, schema["items"])


def apply_defaults(value, schema):
    """Kubernetes' PruneNonNullableNullsWithoutDefaults, then Default: a null field that is
    neither nullable nor defaulted is dropped, a null or absent one with a default gets it."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key in list(value):
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if value[key] is None and sub is not None and not sub.get("nullable") and \
                    "default" not in sub:
                del value[key]
        for key, prop in props.items():
            if "default" in prop and (key not in value or
                                      (value[key] is None and not prop.get("nullable"))):
                value[key] = copy.deepcopy(prop["default"])
            if key in value:
                apply_defaults(value[key], prop)
        if isinstance(extra, dict):
            for key in value:
                if key not in props:
                    if value[key] is None and not extra.get("nullable") and "default" in extra:
                        value[key] = copy.deepcopy(extra["default"])
                    apply_defaults(value[key], extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


# ---------------------------------------------------------------- OpenAPI value validation

BLOCKING = ("type", "required", "enum", "too_long", "too_many")


class _Error:
    def __init__(self, kind, text):
        self.kind, self.text = kind, text


def _child(path, key):
    return f"{path}.{key}" if path else key


def _show(path):
    return path or "<nil>"


def fmt_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(v, separators=(",", ":"))


def json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "number"
    return {str: "string", list: "array", dict: "object"}.get(type(v), type(v).__name__)


def _type_ok(v, want):
    have = json_type(v)
    return have == want or (want == "number" and have == "integer")


def _invalid(errors, path, value, detail, kind="value"):
    errors.append(_Error(kind, f"{_show(path)}: Invalid value: {fmt_value(value)}: {detail}"))


def validate_values(value, schema, path, errors):
    """Appends the OpenAPI value-validation errors of `value` at `path` to `errors`."""
    where = f"{_show(path)} in body"
    if value is None:
        if not schema.get("nullable"):
            want = "integer,string" if schema.get("x-kubernetes-int-or-string") else \
                schema.get("type")
            if want:
                _invalid(errors, path, "null", f"{where} must be of type {want}: \"null\"",
                         "type")
        return
    if schema.get("x-kubernetes-int-or-string"):
        if json_type(value) not in ("integer", "string"):
            have = json_type(value)
            _invalid(errors, path, have, f"{where} must be of type integer,string: \"{have}\"",
                     "type")
            return
    elif schema.get("type") and not _type_ok(value, schema["type"]):
        have = json_type(value)
        _invalid(errors, path, have, f"{where} must be of type {schema['type']}: \"{have}\"",
                 "type")
        return
    if "enum" in schema and not any(cel.cel_equal(value, e) and json_type(value) ==
                                    json_type(e) for e in schema["enum"]):
        allowed = ", ".join(fmt_value(e) for e in schema["enum"])
        errors.append(_Error("enum", f"{_show(path)}: Unsupported value: {fmt_value(value)}: "
                                      f"supported values: {allowed}"))
    if json_type(value) in ("integer", "number"):
        _validate_number(value, schema, path, where, errors)
    elif isinstance(value, str):
        _validate_string(value, schema, path, where, errors)
    elif isinstance(value, list):
        _validate_array(value, schema, path, where, errors)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, where, errors)
    _validate_combinators(value, schema, path, where, errors)


def _validate_number(value, schema, path, where, errors):
    if "minimum" in schema:
        lo, excl = schema["minimum"], schema.get("exclusiveMinimum") is True
        if value < lo or (excl and value == lo):
            op = "greater than" if excl else "greater than or equal to"
            _invalid(errors, path, value, f"{where} should be {op} {fmt_value(lo)}")
    if "maximum" in schema:
        hi, excl = schema["maximum"], schema.get("exclusiveMaximum") is True
        if value > hi or (excl and value == hi):
            op = "less than" if excl else "less than or equal to"
            _invalid(errors, path, value, f"{where} should be {op} {fmt_value(hi)}")
    m = schema.get("multipleOf")
    if m and (value / m) != int(value / m):
        _invalid(errors, path, value, f"{where} should be a multiple of {fmt_value(m)}")


DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _validate_string(value, schema, path, where, errors):
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(_Error("too_long", f"{_show(path)}: Too long: may not be more than "
                                      f"{schema['maxLength']} bytes"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        _invalid(errors, path, value,
                 f"{where} should be at least {schema['minLength']} chars long")
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        _invalid(errors, path, value, f"{where} should match '{schema['pattern']}'")
    if schema.get("format") == "date-time" and not DATE_TIME.match(value):
        _invalid(errors, path, value, f"{where} must be of type date-time: {fmt_value(value)}")


def _validate_array(value, schema, path, where, errors):
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(_Error("too_many", f"{_show(path)}: Too many: {len(value)}: must have at "
                                         f"most {schema['maxItems']} items"))
    if "minItems" in schema and len(value) < schema["minItems"]:
        _invalid(errors, path, value, f"{where} should have at least {schema['minItems']} items")
    items = schema.get("items")
    if isinstance(items, dict):
        for i, item in enumerate(value):
            validate_values(item, items, f"{_show(path)}[{i}]", errors)
    list_type = schema.get("x-kubernetes-list-type")
    if list_type in ("set", "map"):
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen = []
        for i, item in enumerate(value):
            ident = item if list_type == "set" else (
                {k: item.get(k) for k in keys} if isinstance(item, dict) else item)
            if any(cel.cel_equal(ident, s) for s in seen):
                errors.append(_Error("value", f"{_show(path)}[{i}]: Duplicate value: "
                                              f"{fmt_value(ident)}"))
            seen.append(ident)


def _validate_object(value, schema, path, where, errors):
    props = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in value:
            errors.append(_Error("required", f"{_child(path, key)}: Required value"))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(_Error("too_many", f"{_show(path)}: Too many: {len(value)}: must have at "
                                         f"most {schema['maxProperties']} items"))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        _invalid(errors, path, "object",
                 f"{where} should have at least {schema['minProperties']} properties")
    extra = schema.get("additionalProperties")
    for key, child in value.items():
        if path == "" and key == "metadata":
            continue  # ObjectMeta is checked by the API server itself, not by the CRD schema
        if key in props:
            validate_values(child, props[key], _child(path, key), errors)
        elif isinstance(extra, dict):
            validate_values(child, extra, f"{_show(path)}[{key}]", errors)


def _validate_combinators(value, schema, path, where, errors):
    def passes(sub):
        trial = []
        validate_values(value, sub, path, trial)
        return not trial

    if "anyOf" in schema and not any(passes(s) for s in schema["anyOf"]):
        _invalid(errors, path, value, f"{where} must validate at least one schema (anyOf)")
    if "oneOf" in schema and sum(passes(s) for s in schema["oneOf"]) != 1:
        _invalid(errors, path, value, f"{where} must validate one and only one schema (oneOf)")
    for sub in schema.get("allOf", []):
        validate_values(value, sub, path, errors)
    if "not" in schema and passes(schema["not"]):
        _invalid(errors, path, value, f"{where} must not validate the schema (not)")


# ---------------------------------------------------------------- CEL rules

def _has_rules(schema):
    if not isinstance(schema, dict):
        return False
    if schema.get("x-kubernetes-validations"):
        return True
    children = list(schema.get("properties", {}).values())
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            children.append(schema[key])
    return any(_has_rules(c) for c in children)


def _to_cel(value, schema, root=False):
    """JSON → CEL values: `number` fields are doubles even when written as 1; the root sees only
    metadata.name and metadata.generateName, as in Kubernetes."""
    if isinstance(value, dict):
        out = {}
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if root and key == "metadata" and isinstance(child, dict):
                out[key] = {k: child[k] for k in ("name", "generateName") if k in child}
            elif key in props:
                out[key] = _to_cel(child, props[key])
            else:
                out[key] = _to_cel(child, extra if isinstance(extra, dict) else {})
        return out
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        return [_to_cel(v, items) for v in value]
    if schema.get("type") == "number" and json_type(value) == "integer":
        return float(value)
    if schema.get("type") == "integer" and isinstance(value, float):
        return int(value)
    return value


REASONS = {"FieldValueInvalid": None, "FieldValueRequired": "Required value",
           "FieldValueForbidden": "Forbidden", "FieldValueDuplicate": "Duplicate value"}


def _rule_path(path, field_path):
    for m in re.finditer(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[['\"]([^'\"]*)['\"]\]|\[(\d+)\]",
                         field_path or ""):
        if m.group(1):
            path = _child(path, m.group(1))
        else:
            path = f"{_show(path)}[{m.group(2) if m.group(2) is not None else m.group(3)}]"
    return path


def _rule_text(rule):
    """The rule as error details name it: its message when it has one (ruleErrorString)."""
    return (rule.get("message") or "").strip() or rule["rule"].strip()


def _failure_message(rule, activation):
    message = (rule.get("message") or "").strip() or f"failed rule: {rule['rule'].strip()}"
    if rule.get("messageExpression"):
        try:
            m = program_for(rule["messageExpression"]).evaluate(activation)
        except (cel.CelSyntaxError, cel.CelEvalError):
            return message
        if isinstance(m, str) and m.strip() and "\n" not in m.strip():
            return m.strip()
    return message


def _rule_error(rule, schema, path, detail):
    return f'{_show(path)}: Invalid value: "{schema.get("type", "")}": {detail}'


def _check_node_rules(value, schema, old, has_old, path, out):
    for rule in schema.get("x-kubernetes-validations", []):
        try:
            program = program_for(rule["rule"])
        except cel.CelSyntaxError as e:  # validate_crd would have refused the CRD
            out.append(_rule_error(rule, schema, path, f"rule compile error: {e}"))
            continue
        if program.uses_old_self and not has_old:
            continue  # transition rules need a value to compare with
        activation = {"self": value}
        if has_old:
            activation["oldSelf"] = old
        try:
            result = program.evaluate(activation)
        except cel.CelEvalError as e:
            if str(e).startswith("no such overload"):
                detail = (f"'{e}': call arguments did not match a supported operator, function or "
                          f"macro signature for rule: {_rule_text(rule)}")
            else:
                detail = f"{e} evaluating rule: {_rule_text(rule)}"
            out.append(_rule_error(rule, schema, path, detail))
            continue
        if result is True:
            continue
        if not isinstance(result, bool):
            out.append(_rule_error(rule, schema, path, f"rule returned {cel.type_name(result)}, "
                                                       f"not bool: {_rule_text(rule)}"))
            continue
        message = _failure_message(rule, activation)
        target = _show(_rule_path(path, rule.get("fieldPath")))
        label = REASONS.get(rule.get("reason"))
        if label:
            out.append(f"{target}: {label}: {message}")
        else:
            out.append(f'{target}: Invalid value: "{schema.get("type", "")}": {message}')


def _check_rules(value, schema, old, has_old, path, out):
    if value is None:
        return
    _check_node_rules(value, schema, old, has_old, path, out)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is None or (path == "" and key == "metadata"):
                continue
            child_has_old = has_old and isinstance(old, dict) and key in old
            child_path = _child(path, key) if key in props else f"{_show(path)}[{key}]"
            _check_rules(child, sub, old.get(key) if child_has_old else None, child_has_old,
                         child_path, out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        keys = schema.get("x-kubernetes-list-map-keys", [])
        correlate = schema.get("x-kubernetes-list-type") == "map" and has_old and \
            isinstance(old, list)
        for i, item in enumerate(value):
            match = None
            if correlate and isinstance(item, dict):
                match = next((o for o in old if isinstance(o, dict) and
                              all(o.get(k) == item.get(k) for k in keys)), None)
            _check_rules(item, schema["items"], match, match is not None,
                         f"{_show(path)}[{i}]", out)


def validate_crd(crd):
    """Registration-time errors of a CustomResourceDefinition (crd_structural.py)."""
    import crd_structural  # imports this module; loaded on first use to avoid an import cycle
    return crd_structural.validate_crd(crd)


def structural_errors(schema, path="openAPIV3Schema"):
    """Why `schema` is not a structural schema (crd_structural.py), or []."""
    import crd_structural
    return crd_structural.structural_errors(schema, path)
