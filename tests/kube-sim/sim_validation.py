"""The API server's own validation of what every object carries (metadata) and of the built-in
workloads' fields the simulated controllers read, so bad input is a 422 Invalid, never a crash."""

import re

import sim_selectors

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _label_key_ok(key):
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME_PART.match(name))


def metadata_errors(res, obj):
    """Errors (Kubernetes wording) in obj's apiVersion/kind types and metadata."""
    errors = []
    meta = obj.get("metadata")
    if not isinstance(obj.get("apiVersion", ""), str) or not isinstance(obj.get("kind", ""), str):
        errors.append("apiVersion, kind: Invalid value: must be strings")
    name = meta.get("name")
    single_label = res.key in (("", "namespaces"), ("", "services"))
    pattern = _DNS_LABEL if single_label else _DNS_SUBDOMAIN
    if not isinstance(name, str) or not pattern.match(name) or len(name) > (
            63 if single_label else 253):
        errors.append('metadata.name: Invalid value: %s: a lowercase RFC 1123 %s must consist of '
                      "lower case alphanumeric characters, '-' or '.', and must start and end "
                      "with an alphanumeric character"
                      % (_q(name), "label" if single_label else "subdomain"))
    for field in ("labels", "annotations"):
        m = meta.get(field)
        if m is None:
            continue
        if not isinstance(m, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in m.items()):
            errors.append("metadata.%s: Invalid value: must be a map of strings to strings"
                          % field)
            continue
        for k, v in m.items():
            if not _label_key_ok(k):
                errors.append("metadata.%s: Invalid value: %s: name part must consist of "
                              "alphanumeric characters, '-', '_' or '.'" % (field, _q(k)))
            if field == "labels" and v and (len(v) > 63 or not _NAME_PART.match(v)):
                errors.append("metadata.labels: Invalid value: %s: a valid label must be an "
                              "empty string or consist of alphanumeric characters, '-', '_' or "
                              "'.', and must start and end with an alphanumeric character"
                              % _q(v))
    fins = meta.get("finalizers")
    if fins is not None and (not isinstance(fins, list) or not all(isinstance(f, str) and f
                                                                   for f in fins)):
        errors.append("metadata.finalizers: Invalid value: must be a list of strings")
    refs = meta.get("ownerReferences")
    if refs is not None:
        if not isinstance(refs, list):
            errors.append("metadata.ownerReferences: Invalid value: must be a list")
        else:
            for i, ref in enumerate(refs):
                for k in ("apiVersion", "kind", "name", "uid"):
                    if not isinstance(ref, dict) or not isinstance(ref.get(k), str) or not ref[k]:
                        errors.append("metadata.ownerReferences[%d].%s: Required value" % (i, k))
            if sum(1 for r in refs if isinstance(r, dict) and r.get("controller")) > 1:
                errors.append("metadata.ownerReferences: Invalid value: only one reference can "
                              "have Controller set to true")
    return errors


def _q(v):
    return '"%s"' % v if isinstance(v, str) else repr(v)


def workload_errors(res, obj):
    """StatefulSet / Deployment fields the simulated controllers rely on."""
    if res.key not in (("apps", "statefulsets"), ("apps", "deployments")):
        return []
    errors = []
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return ["spec: Required value"]
    replicas = spec.get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        errors.append("spec.replicas: Invalid value: %s: must be greater than or equal to 0"
                      % _q(replicas))
    selector = spec.get("selector")
    template = spec.get("template")
    if not isinstance(selector, dict) or not (selector.get("matchLabels")
                                              or selector.get("matchExpressions")):
        errors.append("spec.selector: Required value")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        errors.append("spec.template: Required value")
    elif isinstance(selector, dict):
        labels = (template.get("metadata") or {}).get("labels") or {}
        if not isinstance(labels, dict) or not sim_selectors.match_labels_selector(selector)(
                labels):
            errors.append("spec.template.metadata.labels: Invalid value: %s: `selector` does not "
                          "match template `labels`" % _q(labels))
    return errors
