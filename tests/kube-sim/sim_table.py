"""meta.k8s.io/v1 Table output (what `kubectl get` asks for) and the JSONPath subset printer
columns use: `.a.b`, `.a[0]`, `.a[*].b`, `.a[?(@.k=="v")].b`."""

import datetime
import re

_TOKEN = re.compile(r"\.([A-Za-z0-9_$-]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_.-]+)\s*==\s*"
                    r"(?:\"([^\"]*)\"|'([^']*)')\)\]|\['([^']+)'\]")


def jsonpath(obj, path):
    """All values the path selects (an empty list when none); raises ValueError on bad syntax."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    pos, cur = 0, [obj]
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            raise ValueError("unsupported JSONPath %r at %d" % (path, pos))
        pos = m.end()
        field, index, fkey, fv1, fv2, quoted = m.groups()
        nxt = []
        for v in cur:
            if field is not None or quoted is not None:
                name = field if field is not None else quoted
                if isinstance(v, dict) and name in v:
                    nxt.append(v[name])
            elif index is not None:
                if isinstance(v, list):
                    if index == "*":
                        nxt.extend(v)
                    elif int(index) < len(v):
                        nxt.append(v[int(index)])
            else:
                want = fv1 if fv1 is not None else fv2
                if isinstance(v, list):
                    for item in v:
                        got = jsonpath(item, "." + fkey) if isinstance(item, dict) else []
                        if got and str(got[0]) == want:
                            nxt.append(item)
        cur = nxt
    return cur


def human_duration(seconds):
    """kubectl's short age format: 45s, 5m10s, 3h2m, 4d5h, 30d, 2y."""
    s = max(0, int(seconds))
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    d = h // 24
    if d < 8:
        return "%dd%dh" % (d, h % 24) if h % 24 else "%dd" % d
    if d < 365 * 2:
        return "%dd" % d
    if d < 365 * 8 and d % 365:
        return "%dy%dd" % (d // 365, d % 365)
    return "%dy" % (d // 365)


def _age(ts, now):
    try:
        t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return "<invalid>"
    return human_duration(now - t.timestamp())


def _cell(col_type, values, now):
    if not values:
        return None
    v = values[0]
    if col_type == "date":
        return _age(v, now) if isinstance(v, str) else "<invalid>"
    if col_type == "integer":
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    if col_type == "number":
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
    if col_type == "boolean":
        return v if isinstance(v, bool) else None
    if isinstance(v, (dict, list)):
        import json
        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def columns(res, version):
    """[(definition, jsonPath or None)] for a resource: Name, then the CRD's printer columns (or
    Age when it has none)."""
    cols = [({"name": "Name", "type": "string", "format": "name", "priority": 0,
              "description": "Name must be unique within a namespace."}, ".metadata.name")]
    extra = res.printer_columns(version)
    if not extra:
        extra = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    for c in extra:
        cols.append(({"name": c.get("name", ""), "type": c.get("type", "string"),
                      "format": c.get("format", ""), "description": c.get("description", ""),
                      "priority": int(c.get("priority", 0))}, c.get("jsonPath", "")))
    return cols


def table(res, version, objects, now, list_meta=None, include_object="Metadata"):
    """A meta.k8s.io/v1 Table of objects (each row carries PartialObjectMetadata by default)."""
    cols = columns(res, version)
    rows = []
    for obj in objects:
        cells = []
        for definition, path in cols:
            try:
                cells.append(_cell(definition["type"], jsonpath(obj, path), now))
            except ValueError:
                cells.append("<error>")
        row = {"cells": cells}
        if include_object == "Object":
            row["object"] = obj
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": obj.get("metadata", {})}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta or {},
            "columnDefinitions": [d for d, _ in cols], "rows": rows}
