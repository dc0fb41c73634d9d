"""HTTP layer of the simulated API server: routing, authentication, the REST verbs, watch streams
(chunked newline-delimited JSON), discovery and the /sim/ admin endpoints."""

import http.server
import json
import logging
import socket
import socketserver
import ssl
import sys
import urllib.parse

import sim_errors
import sim_patch
import sim_selectors
import sim_table
from sim_errors import ApiError
from sim_watch import WatchMixin, view

VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-kube-sim", "gitCommit": "kube-sim",
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23",
           "compiler": "gc", "platform": "linux/amd64"}
_OPEN_PATHS = ("/version", "/healthz", "/readyz", "/livez")


class ApiServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, sim, tls_context=None, ipv6=False):
        if ipv6:
            self.address_family = socket.AF_INET6
        self.sim = sim
        self.tls_context = tls_context
        super().__init__(addr, Handler)

    def get_request(self):
        sock, addr = super().get_request()
        if self.tls_context is not None:
            sock = self.tls_context.wrap_socket(sock, server_side=True,
                                                do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, TimeoutError)):
            return  # a client that went away
        logging.exception("kube-sim: request from %s failed", client_address)

    def finish_request(self, request, client_address):
        if self.tls_context is not None:
            try:
                request.settimeout(30)
                request.do_handshake()
                request.settimeout(None)
            except (OSError, ssl.SSLError) as e:
                logging.info("kube-sim: TLS handshake from %s failed: %s", client_address, e)
                return
        super().finish_request(request, client_address)


def _parse_path(registry, path):
    """(resource, version, namespace, name, subresource, watch) for an API path, or None."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    watch = False
    if rest and rest[0] == "watch":
        watch, rest = True, rest[1:]
    ns = ""
    if (len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize")
            and registry.lookup(group, version, rest[2]) is not None):
        ns, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    res = registry.lookup(group, version, rest[0])
    if res is None:
        return None
    if ns and not res.namespaced:
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return res, version, ns, name, sub, watch


def _get_path(obj, path):
    cur = obj
    for p in [p for p in path.split(".") if p]:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def _set_path(obj, path, value):
    parts = [p for p in path.split(".") if p]
    cur = obj
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value


def _to_scale(res, obj):
    sc = res.scale
    if sc.get("match_labels"):
        selector = sim_selectors.selector_string((obj.get("spec") or {}).get("selector"))
    else:
        selector = _get_path(obj, sc["selector"]) if sc.get("selector") else None
    meta = obj["metadata"]
    status = {"replicas": _get_path(obj, sc["status"]) or 0}
    if selector:
        status["selector"] = selector
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                               "creationTimestamp") if k in meta},
            "spec": {"replicas": _get_path(obj, sc["spec"]) or 0}, "status": status}


class Handler(WatchMixin, http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-sim/1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def log_message(self, fmt, *args):
        if self.server.sim.verbose:
            logging.info("kube-sim %s %s", self.address_string(), fmt % args)

    # ---- plumbing ------------------------------------------------------------------------------
    def _send_json(self, code, body, extra_headers=None):
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (extra_headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        self._code = code

    def _send_error(self, err):
        self._send_json(err.code, err.status())

    def _read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(length) if length > 0 else b""

    def _json_body(self, raw):
        if not raw:
            raise ApiError(400, "the request body is empty")
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if "protobuf" in ctype or "cbor" in ctype:
            raise ApiError(415, "kube-sim reads JSON bodies only, not %s" % ctype,
                           reason="UnsupportedMediaType")
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ApiError(400, "the request body is not valid JSON: %s" % e)

    def _authenticated(self):
        sim = self.server.sim
        if sim.token is None and not sim.client_ca:
            return True
        auth = self.headers.get("Authorization", "")
        if sim.token is not None and auth == "Bearer " + sim.token:
            return True
        if sim.client_ca and hasattr(self.connection, "getpeercert"):
            try:
                if self.connection.getpeercert():
                    return True
            except ValueError:
                pass
        return False

    def do_GET(self):
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    def _dispatch(self):
        sim = self.server.sim
        self._code = 0
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query,
                                                            keep_blank_values=True).items()}
        verb, resource = self.command.lower(), ""
        try:
            raw = self._read_body()
            if url.path.startswith("/sim/"):
                return self._admin(url.path, raw)
            if url.path not in _OPEN_PATHS and not self._authenticated():
                raise ApiError(401, "Unauthorized")
            sim.faults.delay()
            route = _parse_path(sim.registry, url.path)
            if route is None:
                verb = "get"
                return self._discovery(url.path)
            res, version, ns, name, sub, watch = route
            resource = res.qualified() + ("/" + sub if sub else "")
            watch = watch or query.get("watch") in ("true", "1")
            verb = self._verb(name, watch)
            return self._resource(verb, res, version, ns, name, sub, query, raw)
        except ApiError as e:
            if not self._headers_sent():
                self._send_error(e)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # a server bug answers 500 instead of killing the connection
            logging.exception("kube-sim: %s %s failed", self.command, self.path)
            if not self._headers_sent():
                self._send_error(ApiError(500, "internal error: %s" % e))
        finally:
            if not url.path.startswith("/sim/"):
                sim.stats.record(verb, resource, self._code, self.headers.get("User-Agent", ""))

    def _headers_sent(self):
        return self._code != 0

    def _verb(self, name, watch):
        m = self.command
        if m in ("GET", "HEAD"):
            return "watch" if watch else ("get" if name else "list")
        if m == "POST":
            return "create"
        if m == "PUT":
            return "update"
        if m == "PATCH":
            return "patch"
        if m == "DELETE":
            return "delete" if name else "deletecollection"
        return m.lower()

    # ---- discovery and admin -------------------------------------------------------------------
    def _discovery(self, path):
        sim = self.server.sim
        if self.command not in ("GET", "HEAD"):
            raise ApiError(405, "the server does not allow this method on the requested resource")
        path = path.rstrip("/") or "/"
        reg = sim.registry
        with sim.store.cond:
            if path == "/version":
                return self._send_json(200, VERSION)
            if path in ("/healthz", "/readyz", "/livez"):
                data = b"ok"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self._code = 200
                return None
            if path == "/api":
                return self._send_json(200, reg.api_versions(self.headers.get("Host", "")))
            if path == "/api/v1":
                return self._send_json(200, reg.resource_list("", "v1"))
            if path == "/apis":
                return self._send_json(200, reg.api_group_list())
            parts = path.split("/")[1:]
            if len(parts) == 2 and parts[0] == "apis":
                body = reg.api_group(parts[1])
                if body:
                    return self._send_json(200, body)
            if len(parts) == 3 and parts[0] == "apis":
                body = reg.resource_list(parts[1], parts[2])
                if body:
                    return self._send_json(200, body)
        raise ApiError(404, "the server could not find the requested resource")

    def _admin(self, path, raw):
        sim = self.server.sim
        try:
            if path == "/sim/faults":
                if self.command == "POST":
                    sim.faults.set(self._json_body(raw))
                return self._send_json(200, sim.faults.spec)
            if path == "/sim/stats":
                if self.command == "DELETE":
                    sim.stats.reset()
                return self._send_json(200, sim.stats.snapshot())
            if path == "/sim/pods-ready" and self.command == "POST":
                body = self._json_body(raw)
                if not isinstance(body, dict):
                    raise ApiError(400, "expected {namespace, selector, names, ready}")
                pred = sim_selectors.parse_label_selector(body.get("selector", ""))
                names = body.get("names")
                if names is not None and (not isinstance(names, list) or not all(
                        isinstance(n, str) for n in names)):
                    raise ApiError(400, "names must be a list of pod names")
                ns = body.get("namespace", "default")
                sticky = body.get("sticky", True)
                n = sim.controllers.set_pods_ready(
                    sim.store, ns,
                    lambda p: pred(p["metadata"].get("labels")) and (
                        names is None or p["metadata"]["name"] in names),
                    bool(body.get("ready", True)),
                    (ns, body.get("selector", ""), tuple(names or ())) if sticky else None)
                return self._send_json(200, {"changed": n})
        except (sim_selectors.SelectorError, ValueError) as e:
            raise ApiError(400, str(e))
        raise ApiError(404, "unknown admin endpoint %s %s" % (self.command, path))

    # ---- resources -----------------------------------------------------------------------------
    def _wants_table(self):
        accept = self.headers.get("Accept", "")
        first = accept.split(",")[0]
        return "as=Table" in first and "g=meta.k8s.io" in first

    def _resource(self, verb, res, version, ns, name, sub, query, raw):
        sim = self.server.sim
        store = sim.store
        dry_run = query.get("dryRun") == "All"
        if sub and sub not in ("status", "scale"):
            raise ApiError(404, "the server could not find the requested resource")
        if (sub == "status" and not res.status) or (sub == "scale" and not res.scale):
            raise ApiError(404, "the server could not find the requested resource")
        if sub and verb not in ("get", "update", "patch"):
            raise ApiError(405, "%s is not allowed on %s/%s" % (verb, res.qualified(), sub))
        if verb in ("update", "patch") and sim.faults.inject_conflict():
            raise sim_errors.conflict(res, name, "the object has been modified; please apply your "
                                      "changes to the latest version and try again (injected)")
        if verb == "get":
            obj = store.get(res, ns, name)
            if sub == "scale":
                return self._send_json(200, _to_scale(res, obj))
            obj = view(res, version, obj)
            if self._wants_table():
                return self._send_json(200, sim_table.table(
                    res, version, [obj], store.clock(),
                    {"resourceVersion": obj["metadata"]["resourceVersion"]},
                    query.get("includeObject", "Metadata")))
            return self._send_json(200, obj)
        if verb == "list":
            return self._list(res, version, ns, query)
        if verb == "watch":
            return self._watch(res, version, ns, name, query)
        if verb == "create":
            body = self._typed_body(res, version, raw)
            obj = store.create(res, ns, body, dry_run=dry_run)
            return self._send_json(201, view(res, version, obj))
        if verb == "update":
            body = self._json_body(raw)
            if sub == "scale":
                return self._scale_write(res, ns, name, lambda s: body, dry_run)
            body = self._typed_body(res, version, raw)
            obj = store.update(res, ns, name, body, subresource=sub or None, dry_run=dry_run)
            return self._send_json(200, view(res, version, obj))
        if verb == "patch":
            patcher = self._patcher(res, raw)
            if sub == "scale":
                return self._scale_write(res, ns, name, patcher, dry_run)
            obj = store.mutate(res, ns, name, patcher, subresource=sub or None, dry_run=dry_run)
            return self._send_json(200, view(res, version, obj))
        if verb == "delete":
            opts = self._delete_options(raw, query)
            obj = store.delete(res, ns, name, opts.get("propagationPolicy"),
                               opts.get("preconditions"), dry_run=dry_run)
            return self._send_json(200, view(res, version, obj))
        if verb == "deletecollection":
            opts = self._delete_options(raw, query)
            pred = self._predicate(query)
            deleted = []
            for obj in store.list(res, ns, pred)[0]:
                try:
                    deleted.append(view(res, version, store.delete(
                        res, obj["metadata"].get("namespace", ""), obj["metadata"]["name"],
                        opts.get("propagationPolicy"), dry_run=dry_run)))
                except ApiError as e:
                    if e.code != 404:
                        raise
            return self._send_json(200, {"kind": res.kind + "List",
                                         "apiVersion": res.api_version(version),
                                         "metadata": {"resourceVersion": str(store.rv)},
                                         "items": deleted})
        raise ApiError(405, "method %s is not allowed" % self.command)

    def _typed_body(self, res, version, raw):
        """The JSON body of a create/update, which must be of the URL's group/version and kind
        (missing type fields are filled in)."""
        body = self._json_body(raw)
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request must be an object")
        want = res.api_version(version)
        if body.get("apiVersion") not in (None, "", want):
            raise ApiError(400, "the API version in the data (%s) does not match the expected "
                           "API version (%s)" % (body.get("apiVersion"), want))
        if body.get("kind") not in (None, "", res.kind):
            raise ApiError(400, "the kind in the data (%s) does not match the expected kind "
                           "(%s)" % (body.get("kind"), res.kind))
        return dict(body, apiVersion=want, kind=res.kind)

    def _delete_options(self, raw, query):
        opts = {}
        if raw:
            body = self._json_body(raw)
            if isinstance(body, dict):
                opts = body
        if query.get("propagationPolicy"):
            opts["propagationPolicy"] = query["propagationPolicy"]
        if opts.get("orphanDependents") is True or query.get("orphanDependents") == "true":
            opts.setdefault("propagationPolicy", "Orphan")
        return opts

    def _patcher(self, res, raw):
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        body = self._json_body(raw)
        if ctype == "application/json-patch+json":
            fn = sim_patch.json_patch
        elif ctype == "application/merge-patch+json":
            fn = sim_patch.merge_patch
        elif ctype == "application/strategic-merge-patch+json":
            if res.crd is not None:
                raise ApiError(415, "strategic merge patch is not supported for custom resources; "
                               "use application/merge-patch+json",
                               reason="UnsupportedMediaType")
            fn = sim_patch.strategic_merge_patch
        else:
            raise ApiError(415, "the patch content type %r is not supported (kube-sim serves "
                           "json-patch, merge-patch and strategic-merge-patch)" % ctype,
                           reason="UnsupportedMediaType")
        if fn is not sim_patch.json_patch and not isinstance(body, dict):
            raise ApiError(400, "a merge patch must be a JSON object")

        def apply(obj):
            try:
                return fn(obj, body)
            except sim_patch.PatchError as e:
                raise ApiError(422, "the patch could not be applied: %s" % e, reason="Invalid")
        return apply

    def _scale_write(self, res, ns, name, patcher, dry_run):
        def fn(obj):
            scale = patcher(_to_scale(res, obj))
            if not isinstance(scale, dict):
                raise ApiError(400, "a Scale body must be an object")
            replicas = (scale.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise ApiError(422, "Scale.autoscaling \"%s\" is invalid: spec.replicas: Invalid "
                               "value: %r: must be a non-negative integer" % (name, replicas),
                               reason="Invalid")
            rv = (scale.get("metadata") or {}).get("resourceVersion")
            if rv:
                obj["metadata"]["resourceVersion"] = rv
            _set_path(obj, res.scale["spec"], replicas)
            return obj
        obj = self.server.sim.store.mutate(res, ns, name, fn, dry_run=dry_run)
        return self._send_json(200, _to_scale(res, obj))

    def _predicate(self, query):
        try:
            labels = sim_selectors.parse_label_selector(query.get("labelSelector", ""))
            fields = sim_selectors.parse_field_selector(query.get("fieldSelector", ""))
        except sim_selectors.SelectorError as e:
            raise ApiError(400, str(e))
        return lambda o: labels(o["metadata"].get("labels")) and fields(o)

    def _list(self, res, version, ns, query):
        store = self.server.sim.store
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise ApiError(400, "limit must be an integer")
        items, rv, cont, remaining = store.list(res, ns, self._predicate(query), max(0, limit),
                                                query.get("continue"))
        meta = {"resourceVersion": str(rv)}
        if cont:
            meta["continue"] = cont
            meta["remainingItemCount"] = remaining
        items = [view(res, version, o) for o in items]
        if self._wants_table():
            return self._send_json(200, sim_table.table(res, version, items, store.clock(), meta,
                                                        query.get("includeObject", "Metadata")))
        return self._send_json(200, {"kind": res.kind + "List", "apiVersion":
                                     res.api_version(version), "metadata": meta, "items": items})
