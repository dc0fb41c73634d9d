"""The resources the simulated API server serves: built-ins and those of registered CRDs, plus the
discovery documents (`/api`, `/apis`, `/api/v1`, `/apis/<group>/<version>`) built from them."""

import logging

import crd_schema  # tests/kube-sim/crd_schema.py (written with the CRDs)
import sim_errors

_ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
_CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"


class Resource:
    """One served resource (group + plural); `versions` are the served versions."""

    def __init__(self, group, versions, plural, singular, kind, namespaced, short_names=(),
                 categories=(), status=False, scale=None, crd=None):
        self.group = group
        self.versions = list(versions)
        self.plural = plural
        self.singular = singular
        self.kind = kind
        self.namespaced = namespaced
        self.short_names = list(short_names)
        self.categories = list(categories)
        self.status = status
        # scale: {"spec": ".spec.replicas", "status": ".status.replicas", "selector": path or None,
        #         "match_labels": True to derive the selector from .spec.selector}
        self.scale = scale
        self.crd = crd  # the CRD object for custom resources
        self.key = (group, plural)

    def qualified(self):
        return "%s.%s" % (self.plural, self.group) if self.group else self.plural

    def api_version(self, version):
        return "%s/%s" % (self.group, version) if self.group else version

    def crd_version(self, version):
        if not self.crd:
            return None
        for v in self.crd["spec"].get("versions") or []:
            if v.get("name") == version:
                return v
        return None

    def printer_columns(self, version):
        v = self.crd_version(version)
        return (v or {}).get("additionalPrinterColumns") or []

    def admit(self, obj, old):
        """Validates and defaults a custom resource (crd_schema.admit); errors list, [] if valid."""
        if self.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            return crd_errors(obj)
        if not self.crd:
            return []
        version = obj.get("apiVersion", "").rsplit("/", 1)[-1]
        v = self.crd_version(version) or self.crd_version(self.versions[0])
        schema = ((v or {}).get("schema") or {}).get("openAPIV3Schema")
        if schema is None:
            return []
        try:
            return list(crd_schema.admit(schema, obj, old))
        except Exception as e:  # a bug there must not take the server down
            logging.exception("crd_schema.admit failed")
            raise sim_errors.ApiError(500, "schema admission failed: %s" % e)

    def discovery_entries(self):
        entry = {"name": self.plural, "singularName": self.singular, "namespaced": self.namespaced,
                 "kind": self.kind, "verbs": _ALL_VERBS}
        if self.short_names:
            entry["shortNames"] = self.short_names
        if self.categories:
            entry["categories"] = self.categories
        out = [entry]
        if self.status:
            out.append({"name": self.plural + "/status", "singularName": "",
                        "namespaced": self.namespaced, "kind": self.kind,
                        "verbs": ["get", "patch", "update"]})
        if self.scale:
            out.append({"name": self.plural + "/scale", "singularName": "",
                        "namespaced": self.namespaced, "group": "autoscaling", "version": "v1",
                        "kind": "Scale", "verbs": ["get", "patch", "update"]})
        return out


def builtin_resources():
    apps_scale = {"spec": ".spec.replicas", "status": ".status.replicas", "selector": None,
                  "match_labels": True}
    return [
        Resource("", ["v1"], "namespaces", "namespace", "Namespace", False, ["ns"], status=True),
        Resource("", ["v1"], "configmaps", "configmap", "ConfigMap", True, ["cm"]),
        Resource("", ["v1"], "secrets", "secret", "Secret", True),
        Resource("", ["v1"], "services", "service", "Service", True, ["svc"], ["all"], status=True),
        Resource("", ["v1"], "pods", "pod", "Pod", True, ["po"], ["all"], status=True),
        Resource("", ["v1"], "events", "event", "Event", True, ["ev"]),
        Resource("", ["v1"], "serviceaccounts", "serviceaccount", "ServiceAccount", True, ["sa"]),
        Resource("apps", ["v1"], "deployments", "deployment", "Deployment", True, ["deploy"],
                 ["all"], status=True, scale=apps_scale),
        Resource("apps", ["v1"], "statefulsets", "statefulset", "StatefulSet", True, ["sts"],
                 ["all"], status=True, scale=apps_scale),
        Resource("policy", ["v1"], "poddisruptionbudgets", "poddisruptionbudget",
                 "PodDisruptionBudget", True, ["pdb"], status=True),
        Resource("coordination.k8s.io", ["v1"], "leases", "lease", "Lease", True),
        Resource("events.k8s.io", ["v1"], "events", "event", "Event", True, ["ev"]),
        Resource("apiextensions.k8s.io", ["v1"], "customresourcedefinitions",
                 "customresourcedefinition", "CustomResourceDefinition", False, ["crd", "crds"],
                 ["api-extensions"], status=True),
    ]


def crd_errors(crd):
    """Why a CRD would not be accepted (crd_schema.validate_crd: required fields, one storage
    version, structural schemas, compilable CEL rules; and the name), or []."""
    name = (crd.get("metadata") or {}).get("name", "")
    errors = list(crd_schema.validate_crd(crd))
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    if not errors and name != "%s.%s" % (names.get("plural"), spec.get("group")):
        errors = ['metadata.name: Invalid value: "%s": must be spec.names.plural+"."+spec.group'
                  % name]
    if not errors:
        try:
            res = resource_from_crd(crd)
            if res.key in _BUILTIN_KEYS:
                errors = ["spec.group: Invalid value: \"%s\": %s is served by the API server itself"
                          % (res.group, res.qualified())]
        except sim_errors.ApiError as e:
            errors = [e.message]
    return errors


def resource_from_crd(crd):
    """The Resource a CRD object serves; raises ApiError on a CRD without the needed fields."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
    if not spec.get("group") or not names.get("plural") or not names.get("kind") or not versions:
        raise sim_errors.ApiError(422, "CustomResourceDefinition %r needs spec.group, "
                                  "spec.names.plural/kind and a served version"
                                  % crd["metadata"].get("name"), reason="Invalid")
    # Storage version first: it is the preferred one in discovery.
    versions.sort(key=lambda v: not v.get("storage", False))
    subs = versions[0].get("subresources") or {}
    scale = None
    if "scale" in subs:
        sc = subs["scale"] or {}
        scale = {"spec": sc.get("specReplicasPath", ".spec.replicas"),
                 "status": sc.get("statusReplicasPath", ".status.replicas"),
                 "selector": sc.get("labelSelectorPath"), "match_labels": False}
    return Resource(spec["group"], [v["name"] for v in versions], names["plural"],
                    names.get("singular") or names["kind"].lower(), names["kind"],
                    spec.get("scope", "Namespaced") == "Namespaced", names.get("shortNames") or [],
                    names.get("categories") or [], status="status" in subs, scale=scale, crd=crd)


_BUILTIN_KEYS = {r.key for r in builtin_resources()}


class Registry:
    """Resources by (group, plural), by (group, version, plural) and by CRD name."""

    def __init__(self):
        self.by_key = {}
        self.by_crd = {}
        for r in builtin_resources():
            self.by_key[r.key] = r

    def lookup(self, group, version, plural):
        r = self.by_key.get((group, plural))
        if r is None or version not in r.versions:
            return None
        return r

    def register_crd(self, crd):
        res = resource_from_crd(crd)
        name = crd["metadata"]["name"]
        old = self.by_crd.get(name)
        if old is not None and old.key != res.key:
            self.by_key.pop(old.key, None)
        existing = self.by_key.get(res.key)
        if existing is not None and existing.crd is None:
            raise sim_errors.ApiError(422, "%s is a built-in resource" % res.qualified(),
                                      reason="Invalid")
        self.by_key[res.key] = res
        self.by_crd[name] = res
        return res

    def unregister_crd(self, name):
        res = self.by_crd.pop(name, None)
        if res is not None:
            self.by_key.pop(res.key, None)
        return res

    def groups(self):
        """{group: [versions]} in a stable order, core ("") excluded."""
        out = {}
        for r in self.by_key.values():
            if r.group:
                vs = out.setdefault(r.group, [])
                for v in r.versions:
                    if v not in vs:
                        vs.append(v)
        return out

    def api_versions(self, host):
        return {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                "serverAddress": host}]}

    def api_group_list(self):
        groups = []
        for g, vs in sorted(self.groups().items()):
            gvs = [{"groupVersion": "%s/%s" % (g, v), "version": v} for v in vs]
            groups.append({"name": g, "versions": gvs, "preferredVersion": gvs[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def api_group(self, group):
        vs = self.groups().get(group)
        if not vs:
            return None
        gvs = [{"groupVersion": "%s/%s" % (group, v), "version": v} for v in vs]
        return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": gvs,
                "preferredVersion": gvs[0]}

    def resource_list(self, group, version):
        rs = [r for r in self.by_key.values() if r.group == group and version in r.versions]
        if not rs:
            return None
        entries = []
        for r in sorted(rs, key=lambda r: r.plural):
            entries.extend(r.discovery_entries())
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": "%s/%s" % (group, version) if group else version,
                "resources": entries}


CRD_CLEANUP_FINALIZER = _CRD_CLEANUP

