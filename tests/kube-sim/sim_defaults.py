"""Defaults the real API server fills into built-in objects on every write (create, update,
patch), so a controller that compares its desired object with the stored one meets the same
server-set fields it would meet on a real cluster (e.g. a Service's clusterIP, a container's
imagePullPolicy, a probe's periodSeconds). A subset: the fields of the kinds the controller
writes: Service, StatefulSet, Deployment, Pod (and pod templates), Secret stringData."""

import base64


def _set(d, key, value):
    if d.get(key) is None:
        d[key] = value


def _probe(p):
    if not isinstance(p, dict):
        return
    for k, v in (("timeoutSeconds", 1), ("periodSeconds", 10), ("successThreshold", 1),
                 ("failureThreshold", 3)):
        _set(p, k, v)
    if isinstance(p.get("httpGet"), dict):
        _set(p["httpGet"], "scheme", "HTTP")


def _container(c):
    if not isinstance(c, dict):
        return
    _set(c, "terminationMessagePath", "/dev/termination-log")
    _set(c, "terminationMessagePolicy", "File")
    image = c.get("image") or ""
    tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
    _set(c, "imagePullPolicy", "IfNotPresent" if tagged and not image.endswith(":latest")
         else "Always")
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            _set(port, "protocol", "TCP")
    for k in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(c.get(k))
    _set(c, "resources", {})


def pod_spec(spec):
    if not isinstance(spec, dict):
        return
    _set(spec, "restartPolicy", "Always")
    _set(spec, "terminationGracePeriodSeconds", 30)
    _set(spec, "dnsPolicy", "ClusterFirst")
    _set(spec, "schedulerName", "default-scheduler")
    _set(spec, "securityContext", {})
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            _container(c)


def _template(spec):
    if isinstance(spec, dict) and isinstance(spec.get("template"), dict):
        spec["template"].setdefault("metadata", {})
        pod_spec(spec["template"].setdefault("spec", {}))


def apply(res_key, obj, cluster_ip):
    """Fills in obj's server defaults in place. cluster_ip() allocates a Service address."""
    spec = obj.get("spec")
    if res_key == ("", "secrets"):
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict):
            data = obj.setdefault("data", {})
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
        _set(obj, "type", "Opaque")
    if not isinstance(spec, dict):
        return
    if res_key == ("", "services"):
        _set(spec, "type", "ClusterIP")
        _set(spec, "sessionAffinity", "None")
        if spec["type"] in ("ClusterIP", "NodePort", "LoadBalancer"):
            if not spec.get("clusterIP"):
                spec["clusterIP"] = cluster_ip()
            _set(spec, "clusterIPs", [spec["clusterIP"]])
            _set(spec, "ipFamilies", ["IPv4"])
            _set(spec, "ipFamilyPolicy", "SingleStack")
            _set(spec, "internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                _set(port, "protocol", "TCP")
                _set(port, "targetPort", port.get("port"))
    elif res_key == ("apps", "statefulsets"):
        _set(spec, "replicas", 1)
        _set(spec, "podManagementPolicy", "OrderedReady")
        _set(spec, "updateStrategy", {"type": "RollingUpdate",
                                      "rollingUpdate": {"partition": 0}})
        _set(spec, "revisionHistoryLimit", 10)
        _set(spec, "persistentVolumeClaimRetentionPolicy",
             {"whenDeleted": "Retain", "whenScaled": "Retain"})
        _template(spec)
    elif res_key == ("apps", "deployments"):
        _set(spec, "replicas", 1)
        _set(spec, "strategy", {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        _set(spec, "revisionHistoryLimit", 10)
        _set(spec, "progressDeadlineSeconds", 600)
        _template(spec)
    elif res_key == ("", "pods"):
        pod_spec(spec)
