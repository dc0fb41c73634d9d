"""The object store of the simulated API server: objects by resource, one global resourceVersion
counter, an event history for watches, consistent list snapshots for pagination, and the write
semantics (conflicts, generation, status, finalizers, deletion propagation).

Every method takes the store lock; the reactors of sim_controllers run after each outer write,
under the same lock, so a client never sees a half-reconciled state between two of its requests
for what the simulated controllers do synchronously (GC, StatefulSet pods, namespace and CRD
cleanup).
"""

import base64
import collections
import copy
import datetime
import json
import logging
import random
import threading
import uuid

import sim_defaults
import sim_errors
import sim_validation
from sim_errors import ApiError

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
CRDS_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")


def now_rfc3339(clock):
    return datetime.datetime.fromtimestamp(clock(), datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def spec_part(obj, res):
    """What counts for metadata.generation: everything but metadata (and status when it is a
    subresource) and the type fields."""
    return {k: v for k, v in obj.items()
            if k not in ("metadata", "apiVersion", "kind") and not (res.status and k == "status")}


class Event:
    """One change: obj is the new state (the last state for DELETED), prev the state before."""
    __slots__ = ("rv", "res_key", "namespace", "type", "obj", "prev")

    def __init__(self, rv, res_key, namespace, type_, obj, prev):
        self.rv, self.res_key, self.namespace, self.type = rv, res_key, namespace, type_
        self.obj, self.prev = obj, prev


class Store:
    """All objects. Stored dicts are never mutated after they are stored: readers may hold them."""

    def __init__(self, registry, history=1000, clock=None, seed=None):
        import time
        self.registry = registry
        self.clock = clock or time.time
        self.cond = threading.Condition(threading.RLock())
        self.rv = 0
        self.objects = collections.defaultdict(dict)  # res_key -> {(ns, name): obj}
        self.dependents = collections.defaultdict(set)  # owner uid -> {(res_key, ns, name)}
        self.uids = {}  # uid -> (res_key, ns, name)
        self.history = collections.deque()
        self.history_size = max(1, history)
        self.floor = 0  # newest resourceVersion evicted from the history
        self.snapshots = collections.OrderedDict()
        self.rng = random.Random(seed)
        self.reactors = []  # callables(store, events) run after each outer write
        self._pending = []
        self._depth = 0
        self.closed = False

    # ---- helpers -------------------------------------------------------------------------------
    def _next_rv(self):
        self.rv += 1
        return self.rv

    def _emit(self, res, type_, obj, prev):
        ns = obj["metadata"].get("namespace", "")
        ev = Event(int(obj["metadata"]["resourceVersion"]), res.key, ns, type_, obj, prev)
        self.history.append(ev)
        while len(self.history) > self.history_size:
            self.floor = self.history.popleft().rv
        self._pending.append((res, ev))
        self.cond.notify_all()

    def _index(self, key, obj, add):
        meta = obj["metadata"]
        for ref in meta.get("ownerReferences") or []:
            deps = self.dependents[ref.get("uid")]
            if add:
                deps.add(key)
            else:
                deps.discard(key)
                if not deps:
                    self.dependents.pop(ref.get("uid"), None)
        if add:
            self.uids[meta["uid"]] = key
        else:
            self.uids.pop(meta["uid"], None)

    def _store(self, res, obj, type_):
        ns = obj["metadata"].get("namespace", "")
        key = (res.key, ns, obj["metadata"]["name"])
        old = self.objects[res.key].get((ns, obj["metadata"]["name"]))
        if old is not None:
            self._index(key, old, False)
        self.objects[res.key][(ns, obj["metadata"]["name"])] = obj
        self._index(key, obj, True)
        self._emit(res, type_, obj, old)

    def _remove(self, res, obj):
        ns = obj["metadata"].get("namespace", "")
        key = (res.key, ns, obj["metadata"]["name"])
        self.objects[res.key].pop((ns, obj["metadata"]["name"]), None)
        self._index(key, obj, False)
        final = copy.deepcopy(obj)
        final["metadata"]["resourceVersion"] = str(self._next_rv())
        self._emit(res, "DELETED", final, obj)
        return final

    def _begin(self):
        self.cond.acquire()
        self._depth += 1

    def _end(self):
        try:
            if self._depth == 1:
                # Run the simulated controllers to a fixed point (bounded) before releasing.
                for _ in range(10000):
                    if not self._pending:
                        break
                    batch, self._pending = self._pending, []
                    for reactor in self.reactors:
                        try:
                            reactor(self, batch)
                        except Exception:  # the write stands; a simulator bug is only logged
                            logging.exception("kube-sim: a simulated controller failed")
        finally:
            self._depth -= 1
            self.cond.release()

    def _check_namespace(self, res, ns):
        if res.namespaced:
            if not ns:
                raise ApiError(400, "the namespace of the object must be set for %s"
                               % res.qualified())
            nsobj = self.objects[("", "namespaces")].get(("", ns))
            if nsobj is None:
                raise ApiError(404, 'namespaces "%s" not found' % ns,
                               details={"name": ns, "kind": "namespaces"})
            return nsobj
        return None

    # ---- reads ---------------------------------------------------------------------------------
    def get(self, res, ns, name):
        with self.cond:
            obj = self.objects[res.key].get((ns if res.namespaced else "", name))
            if obj is None:
                raise sim_errors.not_found(res, name)
            return obj

    def find(self, res_key, ns, name):
        """The stored object or None (no copy)."""
        return self.objects[res_key].get((ns, name))

    def items(self, res_key, ns=None):
        """Stored objects of a resource (optionally of one namespace), sorted by namespace/name."""
        objs = self.objects[res_key]
        keys = sorted(k for k in objs if ns is None or k[0] == ns)
        return [objs[k] for k in keys]

    def list(self, res, ns, predicate, limit=0, cont=None):
        """(items, resourceVersion, continue token, remainingItemCount) over a consistent
        snapshot: continuing a list returns the state as of the first page."""
        with self.cond:
            if cont:
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont.encode()).decode())
                    snap_id, start = tok["id"], int(tok["start"])
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "invalid continue token")
                snap = self.snapshots.get(snap_id)
                if snap is None:
                    raise sim_errors.gone("The provided continue parameter is too old to display "
                                          "a consistent list result. You can start a new list "
                                          "without the continue parameter.")
                items, rv = snap
            else:
                items = [o for o in self.items(res.key, (ns or None) if res.namespaced else None)
                         if predicate(o)]
                rv = self.rv
                start = 0
            if not limit or start + limit >= len(items):
                return items[start:], rv, "", None
            if not cont:
                snap_id = uuid.uuid4().hex
                self.snapshots[snap_id] = (items, rv)
                while len(self.snapshots) > 64:
                    self.snapshots.popitem(last=False)
            token = base64.urlsafe_b64encode(
                json.dumps({"id": snap_id, "start": start + limit, "rv": rv}).encode()).decode()
            return items[start:start + limit], rv, token, len(items) - start - limit

    # ---- writes --------------------------------------------------------------------------------
    def create(self, res, ns, body, dry_run=False):
        self._begin()
        try:
            if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
                raise ApiError(400, "the body of the request must be an object")
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if res.namespaced:
                if meta.get("namespace") and meta["namespace"] != ns:
                    raise ApiError(400, "the namespace of the provided object does not match the "
                                   "namespace sent on the request")
                meta["namespace"] = ns
                nsobj = self._check_namespace(res, ns)
                if nsobj["metadata"].get("deletionTimestamp"):
                    raise ApiError(403, 'unable to create new content in namespace %s because it '
                                   'is being terminated' % ns, reason="Forbidden")
            else:
                meta.pop("namespace", None)
            if not meta.get("name"):
                if not meta.get("generateName") or not isinstance(meta["generateName"], str):
                    raise sim_errors.invalid(res, "", [
                        "metadata.name: Required value: name or generateName is required"])
                for _ in range(100):
                    meta["name"] = meta["generateName"] + "".join(
                        self.rng.choice(_NAME_CHARS) for _ in range(5))
                    if (meta.get("namespace", ""), meta["name"]) not in self.objects[res.key]:
                        break
            if (meta.get("namespace", ""), meta["name"]) in self.objects[res.key]:
                raise sim_errors.already_exists(res, meta["name"])
            if res.crd and res.crd["metadata"].get("deletionTimestamp"):
                raise ApiError(405, "%s is being deleted" % res.qualified(),
                               reason="MethodNotAllowed")
            api = obj.get("apiVersion")
            version = api.rsplit("/", 1)[-1] if isinstance(api, str) else ""
            obj["apiVersion"] = res.api_version(version if version in res.versions
                                                else res.versions[0])
            obj["kind"] = res.kind
            if res.status and res.key != ("", "namespaces"):
                obj.pop("status", None)
            if meta.get("resourceVersion"):
                # What the real server's storage answers (e.g. for a re-created `get -o yaml`).
                raise ApiError(500, "resourceVersion should not be set on objects to be created",
                               reason="InternalError")
            for k in ("resourceVersion", "uid", "deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(k, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339(self.clock)
            meta["generation"] = 1
            self._admit(res, obj, None)
            if dry_run:
                meta["resourceVersion"] = str(self.rv)
                return obj
            meta["resourceVersion"] = str(self._next_rv())
            self._store(res, obj, "ADDED")
            return obj
        finally:
            self._end()

    def _cluster_ip(self):
        used = {(s.get("spec") or {}).get("clusterIP") for s in self.objects[("", "services")]
                .values()}
        for _ in range(1000):
            ip = "10.96.%d.%d" % (self.rng.randrange(0, 256), self.rng.randrange(1, 255))
            if ip not in used:
                return ip
        raise ApiError(500, "no free cluster IP")

    def _admit(self, res, obj, old):
        if not res.crd:
            if old is not None and res.key == ("", "services") and isinstance(obj.get("spec"),
                                                                             dict):
                # An update without the allocated address keeps it (as the real registry does).
                for k in ("clusterIP", "clusterIPs"):
                    if not obj["spec"].get(k) and (old.get("spec") or {}).get(k):
                        obj["spec"][k] = copy.deepcopy(old["spec"][k])
            sim_defaults.apply(res.key, obj, self._cluster_ip)
            if old is not None and res.key == ("", "services"):
                ip = (old.get("spec") or {}).get("clusterIP")
                if ip and (obj.get("spec") or {}).get("clusterIP") != ip:
                    raise sim_errors.invalid(res, obj["metadata"]["name"], [
                        "spec.clusterIP: Invalid value: %r: field is immutable"
                        % (obj.get("spec") or {}).get("clusterIP")])
        errors = sim_validation.metadata_errors(res, obj) + sim_validation.workload_errors(
            res, obj)
        if errors:
            raise sim_errors.invalid(res, obj["metadata"].get("name", ""), errors)
        errors = res.admit(obj, old)
        if errors:
            raise sim_errors.invalid(res, obj["metadata"].get("name", ""), errors)

    def update(self, res, ns, name, body, subresource=None, dry_run=False, check_rv=True):
        """PUT semantics: body replaces the object (or its status for subresource "status")."""
        self._begin()
        try:
            if not isinstance(body, dict):
                raise ApiError(400, "the body of the request must be an object")
            old = self.get(res, ns, name)
            meta = body.get("metadata") or {}
            if meta.get("name") not in (None, name):
                raise ApiError(400, "the name of the object (%s) does not match the name on the "
                               "URL (%s)" % (meta.get("name"), name))
            if res.namespaced and meta.get("namespace") not in (None, "", ns):
                raise ApiError(400, "the namespace of the object does not match the URL")
            if meta.get("uid") and meta["uid"] != old["metadata"]["uid"]:
                raise sim_errors.conflict(res, name, "Precondition failed: UID in precondition: "
                                          "%s, UID in object meta: %s"
                                          % (meta["uid"], old["metadata"]["uid"]))
            want_rv = meta.get("resourceVersion")
            if check_rv and not want_rv and (res.crd or res.key == CRDS_KEY):
                # Custom resources (and CRDs) do not allow unconditional updates.
                raise sim_errors.invalid(res, name, [
                    "metadata.resourceVersion: Invalid value: 0x0: must be specified for an "
                    "update"])
            if check_rv and want_rv and want_rv != old["metadata"]["resourceVersion"]:
                raise sim_errors.conflict(res, name, "the object has been modified; please apply "
                                          "your changes to the latest version and try again")
            return self._write(res, old, body, subresource, dry_run)
        finally:
            self._end()

    def _write(self, res, old, body, subresource, dry_run):
        if subresource == "status":
            new = copy.deepcopy(old)
            if "status" in body:
                new["status"] = copy.deepcopy(body["status"])
            else:
                new.pop("status", None)
        else:
            new = copy.deepcopy(body)
            if not isinstance(body.get("apiVersion"), str) or not body.get("apiVersion"):
                new["apiVersion"] = old["apiVersion"]
            version = new["apiVersion"].rsplit("/", 1)[-1]
            if version not in res.versions:
                new["apiVersion"] = old["apiVersion"]
            new["kind"] = res.kind
            meta = new.setdefault("metadata", {})
            for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
                if k in old["metadata"]:
                    meta[k] = old["metadata"][k]
                else:
                    meta.pop(k, None)
            if res.status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            if old["metadata"].get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(old["metadata"].get("finalizers")
                                                                or [])
                if added:
                    raise ApiError(422, "metadata.finalizers: Forbidden: no new finalizers can be "
                                   "added if the object is being deleted, found new finalizers %s"
                                   % sorted(added), reason="Invalid")
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        self._admit(res, new, old)
        if spec_part(new, res) != spec_part(old, res):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        if new == old:
            return old  # a no-op write changes nothing, not even the resourceVersion
        if dry_run:
            return new
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            self._store_no_event(res, new)
            return self._remove(res, new)
        new["metadata"]["resourceVersion"] = str(self._next_rv())
        self._store(res, new, "MODIFIED")
        return new

    def _store_no_event(self, res, obj):
        ns = obj["metadata"].get("namespace", "")
        key = (res.key, ns, obj["metadata"]["name"])
        old = self.objects[res.key].get((ns, obj["metadata"]["name"]))
        if old is not None:
            self._index(key, old, False)
        self.objects[res.key][(ns, obj["metadata"]["name"])] = obj
        self._index(key, obj, True)

    def mutate(self, res, ns, name, fn, subresource=None, dry_run=False):
        """Read-modify-write under the lock (PATCH): fn(copy of the object) returns the new body.
        A resourceVersion in the result that differs from the stored one is a conflict."""
        self._begin()
        try:
            old = self.get(res, ns, name)
            body = fn(copy.deepcopy(old))
            meta = body.get("metadata") if isinstance(body, dict) else None
            if not isinstance(meta, dict):
                raise ApiError(422, "the patched object has no metadata", reason="Invalid")
            if meta.get("name") != name:
                raise ApiError(422, "metadata.name: Invalid value: the name cannot be changed",
                               reason="Invalid")
            want_rv = meta.get("resourceVersion")
            if want_rv and want_rv != old["metadata"]["resourceVersion"]:
                raise sim_errors.conflict(res, name, "the object has been modified; please apply "
                                          "your changes to the latest version and try again")
            return self._write(res, old, body, subresource, dry_run)
        finally:
            self._end()

    def delete(self, res, ns, name, propagation=None, preconditions=None, dry_run=False):
        """DELETE: returns the object as deleted, or as marked for deletion while finalizers
        remain. propagation: Background (default), Foreground or Orphan."""
        self._begin()
        try:
            old = self.get(res, ns, name)
            pre = preconditions or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise sim_errors.conflict(res, name, "Precondition failed: UID in precondition: "
                                          "%s, UID in object meta: %s"
                                          % (pre["uid"], old["metadata"]["uid"]))
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"][
                    "resourceVersion"]:
                raise sim_errors.conflict(res, name, "Precondition failed: ResourceVersion in "
                                          "precondition: %s, ResourceVersion in object meta: %s"
                                          % (pre["resourceVersion"],
                                             old["metadata"]["resourceVersion"]))
            if propagation not in (None, "", "Background", "Foreground", "Orphan"):
                raise ApiError(400, "unsupported propagationPolicy %r" % propagation)
            if dry_run:
                return old
            return self.delete_object(res, old, propagation or "Background")
        finally:
            self._end()

    def delete_object(self, res, old, propagation="Background"):
        """Deletes a stored object (caller holds the lock through _begin, or is a reactor)."""
        uid = old["metadata"]["uid"]
        if propagation == "Orphan":
            for key in list(self.dependents.get(uid, ())):
                dep_res = self.registry.by_key.get(key[0])
                dep = self.objects[key[0]].get((key[1], key[2]))
                if dep_res is None or dep is None:
                    continue
                new = copy.deepcopy(dep)
                refs = [r for r in new["metadata"].get("ownerReferences") or []
                        if r.get("uid") != uid]
                if refs:
                    new["metadata"]["ownerReferences"] = refs
                else:
                    new["metadata"].pop("ownerReferences", None)
                new["metadata"]["resourceVersion"] = str(self._next_rv())
                self._store(dep_res, new, "MODIFIED")
        finalizers = list(old["metadata"].get("finalizers") or [])
        if propagation == "Foreground" and self.dependents.get(uid):
            if "foregroundDeletion" not in finalizers:
                finalizers.append("foregroundDeletion")
        if res.key == ("", "namespaces") and old["metadata"].get("deletionTimestamp"):
            return old  # already terminating: the namespace reactor finishes it
        if res.key == ("", "namespaces"):
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = now_rfc3339(self.clock)
            new.setdefault("status", {})["phase"] = "Terminating"
            new["metadata"]["resourceVersion"] = str(self._next_rv())
            self._store(res, new, "MODIFIED")
            return new
        if finalizers:
            if old["metadata"].get("deletionTimestamp") and finalizers == old["metadata"].get(
                    "finalizers"):
                return old
            new = copy.deepcopy(old)
            new["metadata"]["finalizers"] = finalizers
            new["metadata"].setdefault("deletionTimestamp", now_rfc3339(self.clock))
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new["metadata"]["resourceVersion"] = str(self._next_rv())
            self._store(res, new, "MODIFIED")
            return new
        return self._remove(res, old)

    def put_internal(self, res, new):
        """A write by a simulated controller (no admission, no conflict check)."""
        self._begin()
        try:
            old = self.find(res.key, new["metadata"].get("namespace", ""), new["metadata"]["name"])
            if old is not None and old == new:
                return old
            new["metadata"]["resourceVersion"] = str(self._next_rv())
            if old is not None and new["metadata"].get("deletionTimestamp") and not new[
                    "metadata"].get("finalizers"):
                self._store_no_event(res, new)
                return self._remove(res, new)
            self._store(res, new, "MODIFIED" if old is not None else "ADDED")
            return new
        finally:
            self._end()

    # ---- watch ---------------------------------------------------------------------------------
    def events_since(self, rv):
        """History events newer than rv; raises 410 Gone when rv is older than the history."""
        if rv < self.floor:
            raise sim_errors.gone("too old resource version: %d (%d)" % (rv, self.floor))
        out = []
        for ev in reversed(self.history):
            if ev.rv <= rv:
                break
            out.append(ev)
        out.reverse()
        return out
