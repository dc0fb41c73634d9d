"""Label and field selectors as the Kubernetes API server parses them.

Label selectors: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a` (exists), `!a` (absent),
comma-separated (all must match). Field selectors: `path=value`, `path==value`, `path!=value` over
dotted object paths (`metadata.name`, `metadata.namespace`, `status.phase`, ...).
"""

import re


class SelectorError(ValueError):
    """A selector string that does not parse (the server answers 400 BadRequest)."""


_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_CMP_RE = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")


def _split_terms(text):
    """Splits on commas that are not inside parentheses."""
    terms, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError("unbalanced parenthesis in selector %r" % text)
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise SelectorError("unbalanced parenthesis in selector %r" % text)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def parse_label_selector(text):
    """Returns a predicate over a labels dict; raises SelectorError on bad syntax."""
    reqs = []
    for term in _split_terms(text or ""):
        m = _CMP_RE.match(term)
        if m:
            key, op, val = m.groups()
            reqs.append((key, "!=" if op == "!=" else "=", {val}))
            continue
        m = _SET_RE.match(term)
        if not m:
            raise SelectorError("unable to parse requirement %r" % term.strip())
        neg, key, op, vals = m.groups()
        if neg and op:
            raise SelectorError("unable to parse requirement %r" % term.strip())
        if op:
            reqs.append((key, op, {v.strip() for v in vals.split(",") if v.strip()}))
        else:
            reqs.append((key, "!exists" if neg else "exists", None))

    def match(labels):
        labels = labels or {}
        for key, op, vals in reqs:
            present = key in labels
            if op == "=" and (not present or labels[key] not in vals):
                return False
            if op == "!=" and present and labels[key] in vals:
                return False
            if op == "in" and (not present or labels[key] not in vals):
                return False
            if op == "notin" and present and labels[key] in vals:
                return False
            if op == "exists" and not present:
                return False
            if op == "!exists" and present:
                return False
        return True

    return match


def match_labels_selector(selector):
    """A predicate for a metav1.LabelSelector dict (matchLabels + matchExpressions)."""
    selector = selector or {}
    ml = selector.get("matchLabels") or {}
    exprs = selector.get("matchExpressions") or []

    def match(labels):
        labels = labels or {}
        for k, v in ml.items():
            if labels.get(k) != v:
                return False
        for e in exprs:
            key, op, vals = e.get("key"), e.get("operator"), set(e.get("values") or [])
            if op == "In" and labels.get(key) not in vals:
                return False
            if op == "NotIn" and key in labels and labels[key] in vals:
                return False
            if op == "Exists" and key not in labels:
                return False
            if op == "DoesNotExist" and key in labels:
                return False
        return True

    return match


def selector_string(selector):
    """Renders a metav1.LabelSelector dict as the string form (Scale.status.selector)."""
    selector = selector or {}
    parts = ["%s=%s" % (k, v) for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for e in selector.get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key"), sorted(e.get("values") or [])
        if op == "In":
            parts.append("%s in (%s)" % (key, ",".join(vals)))
        elif op == "NotIn":
            parts.append("%s notin (%s)" % (key, ",".join(vals)))
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append("!" + key)
    return ",".join(parts)


def _field_value(obj, path):
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return ""
        cur = cur[part]
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return "" if cur is None else str(cur)


def parse_field_selector(text):
    """Returns a predicate over an object; raises SelectorError on bad syntax."""
    reqs = []
    for term in _split_terms(text or ""):
        m = re.match(r"^\s*([A-Za-z0-9._-]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise SelectorError("invalid field selector term %r" % term.strip())
        reqs.append(m.groups())

    def match(obj):
        for path, op, val in reqs:
            got = _field_value(obj, path)
            if (op == "!=") == (got == val):
                return False
        return True

    return match
