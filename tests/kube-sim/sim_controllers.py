"""The cluster's own controllers, simulated: garbage collection by ownerReferences (background,
foreground, orphan), namespace and CRD cleanup, CRD registration, pod status, StatefulSet and
Deployment controllers.

They run as a store reactor: after each outer write, under the store lock, over the events that
write produced, until nothing changes. Approximations (README.md): a deleted pod is gone at once;
Deployments own their pods directly (no ReplicaSet) and replace them all at once; pods have no
containers running, they become Ready by --auto-ready or POST /sim/pods-ready.
"""

import copy
import hashlib
import json
import logging

import sim_resources
import sim_store
from sim_errors import ApiError

PODS = ("", "pods")
NAMESPACES = ("", "namespaces")
STATEFULSETS = ("apps", "statefulsets")
DEPLOYMENTS = ("apps", "deployments")
CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")


def pod_ready(pod):
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def pod_status(pod, ready, now, pod_ip="127.0.0.1"):
    """A pod's status; a pod that had an IP keeps it, a new one gets `pod_ip`."""
    old = pod.get("status") or {}
    if old and pod_ready(pod) == ready and old.get("phase"):
        return old
    status = "True" if ready else "False"
    conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
             {"type": "Initialized", "status": "True", "lastTransitionTime": now},
             {"type": "ContainersReady", "status": status, "lastTransitionTime": now},
             {"type": "Ready", "status": status, "lastTransitionTime": now}]
    if not ready:
        for c in conds[2:]:
            c["reason"] = "ContainersNotReady"
    return {"phase": "Running" if ready else "Pending", "conditions": conds,
            "hostIP": "127.0.0.1", "podIP": old.get("podIP") or pod_ip,
            "startTime": old.get("startTime") or now}


def _template_hash(template):
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def _controller_ref(obj):
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


class Controllers:
    """The store reactor (see the module comment). auto_ready: pods become Ready on creation."""

    def __init__(self, auto_ready=False):
        self.auto_ready = auto_ready
        self.ready_rules = {}  # (namespace, selector, names) -> (predicate, ready), newest last
        self.pods_started = 0

    def next_pod_ip(self):
        """A loopback address of its own for each new pod (127.1.0.1, 127.1.0.2, ...), as a
        cluster's pod network gives each pod an IP: a test can serve a pod's ports on it."""
        n = self.pods_started
        self.pods_started += 1
        return "127.1.%d.%d" % (n // 250 % 250, n % 250 + 1)

    def _initial_ready(self, pod):
        """Ready state of a new pod: the newest /sim/pods-ready rule that matches it, else
        --auto-ready."""
        ns = pod["metadata"].get("namespace", "")
        for (rule_ns, _, _), (pred, ready) in reversed(list(self.ready_rules.items())):
            if rule_ns == ns and pred(pod):
                return ready
        return self.auto_ready

    def __call__(self, store, batch):
        for res, ev in batch:
            try:
                self._react(store, res, ev)
            except ApiError as e:  # e.g. a pod create racing a namespace deletion
                logging.info("kube-sim controller: %s %s: %s", ev.type, res.qualified(), e.message)

    def _res(self, store, key):
        return store.registry.by_key.get(key)

    def _react(self, store, res, ev):
        obj, meta = ev.obj, ev.obj["metadata"]
        if ev.type == "DELETED":
            for key in list(store.dependents.get(meta["uid"], ())):
                self._gc_check(store, key)
            for ref in meta.get("ownerReferences") or []:
                self._foreground_check(store, ref.get("uid"))
                if ref.get("controller") and res.key == PODS:
                    self._sync_owner(store, ref.get("uid"))
            if res.namespaced:
                self._namespace_check(store, meta.get("namespace", ""))
            if res.crd is not None:
                self._crd_check(store, res.crd["metadata"]["name"])
            if res.key == CRDS:
                store.registry.unregister_crd(meta["name"])
            return
        # Act on the current state: later writes in this batch may have changed the object.
        obj = store.find(res.key, meta.get("namespace", ""), meta["name"])
        if obj is None:
            return
        meta = obj["metadata"]
        if res.key == CRDS:
            self._crd_added(store, res, obj)
        if res.key == NAMESPACES:
            if not (obj.get("status") or {}).get("phase"):
                new = copy.deepcopy(obj)
                new["status"] = {"phase": "Active"}
                store.put_internal(res, new)
            elif meta.get("deletionTimestamp"):
                self._namespace_check(store, meta["name"])
        if meta.get("deletionTimestamp") and "foregroundDeletion" in (meta.get("finalizers") or []):
            self._foreground_check(store, meta["uid"])
        if meta.get("deletionTimestamp"):
            return
        if meta.get("ownerReferences") and (ev.prev is None or ev.prev["metadata"].get(
                "ownerReferences") != ev.obj["metadata"].get("ownerReferences")):
            # A new or re-owned object whose owners are all gone is garbage at once.
            self._gc_check(store, (res.key, meta.get("namespace", ""), meta["name"]))
            if store.find(res.key, meta.get("namespace", ""), meta["name"]) is not obj:
                return
        if res.key == PODS:
            if not (obj.get("status") or {}).get("phase"):
                new = copy.deepcopy(obj)
                new["status"] = pod_status(obj, self._initial_ready(obj),
                                           sim_store.now_rfc3339(store.clock), self.next_pod_ip())
                store.put_internal(res, new)
                return
            ref = _controller_ref(obj)
            if ref:
                self._sync_owner(store, ref.get("uid"))
        elif res.key == STATEFULSETS:
            self._sync_statefulset(store, obj)
        elif res.key == DEPLOYMENTS:
            self._sync_deployment(store, obj)

    # ---- garbage collection --------------------------------------------------------------------
    def _gc_check(self, store, key):
        res = self._res(store, key[0])
        dep = store.find(key[0], key[1], key[2])
        if res is None or dep is None or dep["metadata"].get("deletionTimestamp"):
            return
        refs = dep["metadata"].get("ownerReferences") or []
        alive = [store.uids.get(r.get("uid")) for r in refs if r.get("uid") in store.uids]
        if not alive:
            store.delete_object(res, dep, "Background")
            return
        for okey in alive:
            owner = store.find(*okey)
            om = owner["metadata"] if owner else {}
            if om.get("deletionTimestamp") and "foregroundDeletion" in (om.get("finalizers") or []):
                store.delete_object(res, dep, "Foreground")
                return

    def _foreground_check(self, store, uid):
        key = store.uids.get(uid)
        owner = store.find(*key) if key else None
        if owner is None:
            return
        om = owner["metadata"]
        if not om.get("deletionTimestamp") or "foregroundDeletion" not in (om.get("finalizers")
                                                                            or []):
            return
        for dkey in list(store.dependents.get(uid, ())):
            self._gc_check(store, dkey)
        if not store.dependents.get(uid):
            owner = store.find(*key)
            if owner is None:
                return
            new = copy.deepcopy(owner)
            new["metadata"]["finalizers"] = [f for f in owner["metadata"]["finalizers"]
                                             if f != "foregroundDeletion"]
            if not new["metadata"]["finalizers"]:
                del new["metadata"]["finalizers"]
            store.put_internal(self._res(store, key[0]), new)

    def _namespace_check(self, store, ns):
        nsobj = store.find(NAMESPACES, "", ns)
        if nsobj is None or not nsobj["metadata"].get("deletionTimestamp"):
            return
        remaining = 0
        for res_key in list(store.objects):
            res = self._res(store, res_key)
            if res is None or not res.namespaced:
                continue
            for obj in store.items(res_key, ns):
                remaining += 1
                if not obj["metadata"].get("deletionTimestamp"):
                    store.delete_object(res, obj, "Background")
        if remaining == 0 or not any(store.items(k, ns) for k in list(store.objects)
                                     if k != NAMESPACES):
            nsobj = store.find(NAMESPACES, "", ns)
            if nsobj is not None and not nsobj["metadata"].get("finalizers"):
                store._remove(self._res(store, NAMESPACES), nsobj)

    # ---- CRDs ----------------------------------------------------------------------------------
    def _crd_added(self, store, res, crd):
        meta = crd["metadata"]
        if meta.get("deletionTimestamp"):
            self._crd_check(store, meta["name"])
            return
        store.registry.register_crd(crd)
        names = crd["spec"]["names"]
        want_status = copy.deepcopy(crd.get("status") or {})
        want_status["acceptedNames"] = copy.deepcopy(names)
        conds = {c.get("type"): c for c in want_status.get("conditions") or []}
        now = sim_store.now_rfc3339(store.clock)
        for t, reason, msg in (("NamesAccepted", "NoConflicts", "no conflicts found"),
                               ("Established", "InitialNamesAccepted",
                                "the initial names have been accepted")):
            if conds.get(t, {}).get("status") != "True":
                conds[t] = {"type": t, "status": "True", "reason": reason, "message": msg,
                            "lastTransitionTime": now}
        want_status["conditions"] = list(conds.values())
        want_status["storedVersions"] = sorted(
            set(want_status.get("storedVersions") or [])
            | {v["name"] for v in crd["spec"].get("versions") or [] if v.get("storage")})
        fins = meta.get("finalizers") or []
        if want_status != crd.get("status") or sim_resources.CRD_CLEANUP_FINALIZER not in fins:
            new = copy.deepcopy(crd)
            new["status"] = want_status
            if sim_resources.CRD_CLEANUP_FINALIZER not in fins:
                new["metadata"]["finalizers"] = fins + [sim_resources.CRD_CLEANUP_FINALIZER]
            store.put_internal(res, new)

    def _crd_check(self, store, name):
        crd = store.find(CRDS, "", name)
        if crd is None or not crd["metadata"].get("deletionTimestamp"):
            return
        res = store.registry.by_crd.get(name)
        if res is not None:
            for obj in store.items(res.key):
                if not obj["metadata"].get("deletionTimestamp"):
                    store.delete_object(res, obj, "Background")
            if store.items(res.key):
                return
        new = copy.deepcopy(crd)
        fins = [f for f in new["metadata"].get("finalizers") or []
                if f != sim_resources.CRD_CLEANUP_FINALIZER]
        if fins == (crd["metadata"].get("finalizers") or []):
            return
        new["metadata"]["finalizers"] = fins
        if not fins:
            del new["metadata"]["finalizers"]
        store.put_internal(self._res(store, CRDS), new)

    # ---- workloads -----------------------------------------------------------------------------
    def _sync_owner(self, store, uid):
        key = store.uids.get(uid)
        owner = store.find(*key) if key else None
        if owner is None or owner["metadata"].get("deletionTimestamp"):
            return
        if key[0] == STATEFULSETS:
            self._sync_statefulset(store, owner)
        elif key[0] == DEPLOYMENTS:
            self._sync_deployment(store, owner)

    def _owned_pods(self, store, owner):
        uid = owner["metadata"]["uid"]
        return [p for p in store.items(PODS, owner["metadata"]["namespace"])
                if (_controller_ref(p) or {}).get("uid") == uid]

    def _new_pod(self, owner, name, labels, extra_spec):
        template = owner["spec"].get("template") or {}
        tmeta = template.get("metadata") or {}
        meta = {"labels": dict(tmeta.get("labels") or {}, **labels),
                "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                     "name": owner["metadata"]["name"],
                                     "uid": owner["metadata"]["uid"], "controller": True,
                                     "blockOwnerDeletion": True}]}
        meta.update(name)
        if tmeta.get("annotations"):
            meta["annotations"] = dict(tmeta["annotations"])
        spec = copy.deepcopy(template.get("spec") or {})
        spec.update(extra_spec)
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    def _sync_statefulset(self, store, sts):
        """Pods <name>-<ordinal>. OrderedReady (the default): pod i is created only when pods
        0..i-1 exist and are Ready; scale-down and template updates delete one pod at a time,
        highest ordinal first, only while all the others are Ready. Parallel: all at once."""
        if sts["metadata"].get("deletionTimestamp"):
            return
        pods_res = self._res(store, PODS)
        name, ns = sts["metadata"]["name"], sts["metadata"]["namespace"]
        spec = sts.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        ordered = spec.get("podManagementPolicy", "OrderedReady") != "Parallel"
        revision = "%s-%s" % (name, _template_hash(spec.get("template") or {}))

        def rev(pod):
            return pod["metadata"].get("labels", {}).get("controller-revision-hash")

        live, condemned = {}, []
        for pod in self._owned_pods(store, sts):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            ordinal = pod["metadata"]["name"][len(name) + 1:]
            if ordinal.isdigit() and int(ordinal) < replicas:
                live[int(ordinal)] = pod
            else:
                condemned.append((int(ordinal) if ordinal.isdigit() else -1, pod))
        condemned.sort(key=lambda x: -x[0])
        stale = sorted((i for i, p in live.items() if rev(p) != revision), reverse=True)
        if not ordered:
            for _, pod in condemned:
                store.delete_object(pods_res, pod, "Background")
            for i in stale:
                store.delete_object(pods_res, live.pop(i), "Background")
        for i in range(replicas):
            if i in live:
                if ordered and not pod_ready(live[i]):
                    break  # OrderedReady waits for this one
                continue
            pname = "%s-%d" % (name, i)
            if store.find(PODS, ns, pname) is not None:
                break  # a terminating (or foreign) pod holds the name
            pod = self._new_pod(sts, {"name": pname},
                                {"statefulset.kubernetes.io/pod-name": pname,
                                 "apps.kubernetes.io/pod-index": str(i),
                                 "controller-revision-hash": revision},
                                {"hostname": pname, "subdomain": spec.get("serviceName", "")})
            store.create(pods_res, ns, pod)
            if ordered:
                break  # the next one once this one is Ready
        else:
            if ordered and all(pod_ready(p) for p in live.values()):
                if condemned:
                    store.delete_object(pods_res, condemned[0][1], "Background")
                elif stale:
                    store.delete_object(pods_res, live[stale[0]], "Background")
        pods = [p for p in self._owned_pods(store, sts)
                if not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in pods if pod_ready(p))
        updated = sum(1 for p in pods if rev(p) == revision)
        current = (sts.get("status") or {}).get("currentRevision") or revision
        if updated == len(pods) == replicas:
            current = revision
        status = {"observedGeneration": sts["metadata"].get("generation", 1),
                  "replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready,
                  "currentReplicas": sum(1 for p in pods if rev(p) == current),
                  "updatedReplicas": updated, "currentRevision": current,
                  "updateRevision": revision, "collisionCount": 0}
        self._put_status(store, STATEFULSETS, sts, status)

    def _sync_deployment(self, store, dep):
        if dep["metadata"].get("deletionTimestamp"):
            return
        pods_res = self._res(store, PODS)
        name, ns = dep["metadata"]["name"], dep["metadata"]["namespace"]
        spec = dep.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        tmpl_hash = _template_hash(spec.get("template") or {})
        live = []
        for pod in self._owned_pods(store, dep):
            if pod["metadata"].get("deletionTimestamp"):
                continue
            if pod["metadata"].get("labels", {}).get("pod-template-hash") != tmpl_hash or len(
                    live) >= replicas:
                store.delete_object(pods_res, pod, "Background")
            else:
                live.append(pod)
        for _ in range(replicas - len(live)):
            pod = self._new_pod(dep, {"generateName": "%s-%s-" % (name, tmpl_hash)},
                                {"pod-template-hash": tmpl_hash}, {})
            store.create(pods_res, ns, pod)
        live = [p for p in self._owned_pods(store, dep) if not p["metadata"].get(
            "deletionTimestamp")]
        ready = sum(1 for p in live if pod_ready(p))
        now = sim_store.now_rfc3339(store.clock)
        old_conds = {c["type"]: c for c in (dep.get("status") or {}).get("conditions") or []}
        avail = "True" if ready >= replicas else "False"
        conds = []
        for t, st, reason in (("Available", avail, "MinimumReplicasAvailable" if avail == "True"
                               else "MinimumReplicasUnavailable"),
                              ("Progressing", "True", "NewReplicaSetAvailable")):
            c = old_conds.get(t)
            if not c or c.get("status") != st or c.get("reason") != reason:
                c = {"type": t, "status": st, "reason": reason, "lastUpdateTime": now,
                     "lastTransitionTime": now}
            conds.append(c)
        status = {"observedGeneration": dep["metadata"].get("generation", 1),
                  "replicas": len(live), "updatedReplicas": len(live), "readyReplicas": ready,
                  "availableReplicas": ready, "unavailableReplicas": max(0, replicas - ready),
                  "conditions": conds}
        self._put_status(store, DEPLOYMENTS, dep, status)

    def _put_status(self, store, key, obj, status):
        cur = store.find(key, obj["metadata"]["namespace"], obj["metadata"]["name"])
        if cur is None or cur.get("status") == status:
            return
        new = copy.deepcopy(cur)
        new["status"] = status
        store.put_internal(self._res(store, key), new)

    def set_pods_ready(self, store, ns, predicate, ready, rule_key=None):
        """Marks matching pods Ready (or not); returns how many changed. With rule_key the rule
        also applies to matching pods created later (replacing an earlier rule of that key), so
        an OrderedReady StatefulSet rolls out completely."""
        pods_res = self._res(store, PODS)
        changed = 0
        with store.cond:
            if rule_key is not None:
                self.ready_rules.pop(rule_key, None)
                self.ready_rules[rule_key] = (predicate, ready)
            store._begin()
            try:
                for pod in store.items(PODS, ns):
                    if not predicate(pod) or pod["metadata"].get("deletionTimestamp"):
                        continue
                    if pod_ready(pod) == ready and (pod.get("status") or {}).get("phase"):
                        continue
                    new = copy.deepcopy(pod)
                    # A fresh status (conditions stamped now) on the same pod IP.
                    new["status"] = pod_status({"status": {}}, ready, sim_store.now_rfc3339(store.clock),
                                               (pod.get("status") or {}).get("podIP") or self.next_pod_ip())
                    store.put_internal(pods_res, new)
                    changed += 1
            finally:
                store._end()
        return changed
