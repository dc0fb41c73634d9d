"""Helpers for the Helm chart tests: the real helm, the chart's value sets, and the checks the
rendered manifests are held to (restricted Pod Security Standard, RBAC rules as a set)."""

import os
import re
import shutil
import subprocess

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(REPO, "deploy", "helm", "tandem")
HELM = os.environ.get("HELM") or shutil.which("helm") or os.path.join(REPO, ".venv", "bin", "helm")
HELM_VERSION = "v3.17.1"  # what scripts/install-deps.sh installs
RELEASE, NAMESPACE = "tandem", "tandem-system"

# The value sets every test renders: the defaults and each example under ci/.
VALUE_SETS = {"default": None}
for _f in sorted(os.listdir(os.path.join(CHART, "ci"))):
    if _f.endswith(".yaml"):
        VALUE_SETS[_f[:-len("-values.yaml")] if _f.endswith("-values.yaml") else _f[:-5]] = \
            os.path.join(CHART, "ci", _f)


def helm(*args, check=True):
    env = dict(os.environ, HELM_CACHE_HOME="/tmp/tandem-helm-cache", HELM_CONFIG_HOME="/tmp/tandem-helm-config",
               HELM_DATA_HOME="/tmp/tandem-helm-data")
    out = subprocess.run([HELM] + list(args), capture_output=True, text=True, env=env, timeout=120)
    if check and out.returncode != 0:
        raise AssertionError("helm %s: %s%s" % (" ".join(args), out.stdout, out.stderr))
    return out


def kube_version():
    """The oldest Kubernetes the chart declares (Chart.yaml kubeVersion ">=1.29.0-0" -> "1.29.0")."""
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        declared = yaml.safe_load(f)["kubeVersion"]
    m = re.fullmatch(r">=\s*(\d+\.\d+\.\d+)(-0)?", declared)
    if not m:
        raise AssertionError("Chart.yaml kubeVersion %r is not of the form >=X.Y.Z-0" % declared)
    return m.group(1)


def render_text(values_file=None, *extra, include_crds=False, release=RELEASE, namespace=NAMESPACE):
    args = ["template", release, CHART, "--namespace", namespace, "--kube-version", kube_version()]
    if values_file:
        args += ["-f", values_file]
    if include_crds:
        args.append("--include-crds")
    return helm(*(args + list(extra))).stdout


def render(values_file=None, *extra, include_crds=False):
    """The rendered chart as a list of objects."""
    return [d for d in yaml.safe_load_all(render_text(values_file, *extra, include_crds=include_crds)) if d]


def find(docs, kind, name=None):
    out = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return out


def pod_templates(docs):
    """(object description, pod spec) for every workload object among docs."""
    out = []
    for d in docs:
        spec = d.get("spec") or {}
        if d["kind"] == "Pod":
            out.append(("Pod %s" % d["metadata"]["name"], spec))
        elif d["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
            out.append(("%s %s" % (d["kind"], d["metadata"]["name"]), spec["template"]["spec"]))
        elif d["kind"] == "CronJob":
            out.append(("CronJob %s" % d["metadata"]["name"], spec["jobTemplate"]["spec"]["template"]["spec"]))
    return out


# Volume types the restricted profile allows (Kubernetes Pod Security Standards, "Volume Types").
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def restricted_violations(pod):
    """Where a pod spec breaks the restricted Pod Security Standard (baseline + restricted rules as
    the PodSecurity admission checks them, v1.29), as readable strings; [] when it meets it."""
    out = []
    psc = pod.get("securityContext") or {}
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(host):
            out.append("spec.%s" % host)
    for v in pod.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append("volume %s: %s" % (v.get("name"), ", ".join(sorted(kinds - RESTRICTED_VOLUMES))))
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
        sc = c.get("securityContext") or {}
        where = "container %s" % c.get("name")
        if sc.get("privileged"):
            out.append(where + ": privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(where + ": allowPrivilegeEscalation is not false")
        if sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is not True:
            out.append(where + ": runAsNonRoot is not true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            out.append(where + ": runAsUser 0")
        if (sc.get("seccompProfile") or {}).get("type", pod_seccomp) not in ("RuntimeDefault", "Localhost"):
            out.append(where + ": seccompProfile is not RuntimeDefault or Localhost")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(where + ": capabilities do not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(where + ": adds capabilities %s" % caps["add"])
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(where + ": hostPort")
        for opt in ("procMount",):
            if sc.get(opt) not in (None, "Default"):
                out.append(where + ": " + opt)
    return out


def hardening_violations(pod):
    """What the chart asks beyond the restricted profile: read-only root filesystems and CPU and
    memory requests and limits on every container."""
    out = []
    for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
        where = "container %s" % c.get("name")
        if (c.get("securityContext") or {}).get("readOnlyRootFilesystem") is not True:
            out.append(where + ": readOnlyRootFilesystem is not true")
        res = c.get("resources") or {}
        for section in ("requests", "limits"):
            for r in ("cpu", "memory"):
                if r not in (res.get(section) or {}):
                    out.append("%s: no %s.%s" % (where, section, r))
    return out


def rbac_grants(rules):
    """{(apiGroup, resource, verb, resourceName or None)} a list of PolicyRules grants."""
    out = set()
    for r in rules:
        for g in r.get("apiGroups") or []:
            for res in r.get("resources") or []:
                for v in r.get("verbs") or []:
                    for n in r.get("resourceNames") or [None]:
                        out.add((g, res, v, n))
    return out
