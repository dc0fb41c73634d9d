"""Watch streams of the simulated API server: chunked newline-delimited JSON events from the
store's history, with selectors, bookmarks, timeouts, 410 Gone and the watch faults."""

import json
import select
import socket
import ssl
import time

import sim_errors
import sim_table
from sim_errors import ApiError


def view(res, version, obj):
    """obj as seen through `version` of its resource (apiVersion rewritten, no conversion)."""
    api_version = res.api_version(version)
    if obj.get("apiVersion") == api_version:
        return obj
    out = dict(obj)
    out["apiVersion"] = api_version
    return out


class WatchMixin:
    """The watch verb of sim_http.Handler."""

    def _chunk(self, obj):
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _watch(self, res, version, ns, name, query):
        sim = self.server.sim
        store = sim.store
        pred = self._predicate(query)
        if name:
            base = pred
            pred = lambda o: o["metadata"]["name"] == name and base(o)  # noqa: E731
        try:
            timeout = float(query.get("timeoutSeconds") or 0)
        except ValueError:
            raise ApiError(400, "timeoutSeconds must be a number")
        if timeout <= 0:
            timeout = 1800.0
        bookmarks = query.get("allowWatchBookmarks") in ("true", "1")
        table = self._wants_table()
        rv_param = query.get("resourceVersion", "")
        initial, error = [], None
        with store.cond:
            if rv_param in ("", "0"):
                initial = [o for o in store.items(res.key, (ns or None) if res.namespaced else None)
                           if pred(o)]
                last = store.rv
            else:
                try:
                    last = int(rv_param)
                except ValueError:
                    raise ApiError(400, "resourceVersion must be an integer")
                try:
                    store.events_since(last)
                except ApiError as e:
                    error = e
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self._code = 200
        deadline = time.monotonic() + timeout
        sent = 0

        def wrap(obj):
            obj = view(res, version, obj)
            if table:
                return sim_table.table(res, version, [obj], store.clock(),
                                       {"resourceVersion": obj["metadata"]["resourceVersion"]})
            return obj

        def send(type_, obj):
            nonlocal sent
            self._chunk({"type": type_, "object": obj})
            sent += 1
            if sim.faults.gone_every and sent % sim.faults.gone_every == 0:
                self._chunk({"type": "ERROR", "object": sim_errors.gone(
                    "too old resource version (injected after %d events)" % sent).status()})
                return "end"
            if sim.faults.drop_watch():
                return "drop"
            return None

        try:
            if error is not None:
                self._chunk({"type": "ERROR", "object": error.status()})
                return self._end_stream()
            for obj in initial:
                action = send("ADDED", wrap(obj))
                if action:
                    return self._end_stream(action == "drop")
            next_bookmark = time.monotonic() + sim.bookmark_interval
            while True:
                # The deadline is checked after each round, so history already there when the
                # watch began is always delivered, however late this thread gets to run.
                now = time.monotonic()
                with store.cond:
                    if store.closed:
                        return self._end_stream()
                    try:
                        events = store.events_since(last)
                        if not events:
                            wait = min(deadline, next_bookmark if bookmarks else deadline) - now
                            store.cond.wait(max(0.0, min(wait, 1.0)))
                            events = store.events_since(last) if not store.closed else []
                    except ApiError as e:
                        events, error = [], e
                    last = store.rv
                    unserved = res.key not in store.registry.by_key  # its CRD was deleted
                if error is not None:
                    self._chunk({"type": "ERROR", "object": error.status()})
                    return self._end_stream()
                for ev in events:
                    if ev.res_key != res.key or (res.namespaced and ns and ev.namespace != ns):
                        continue
                    # A selector watch sees an object entering the selection as ADDED and one
                    # leaving it as DELETED, as the API server's watch cache reports them.
                    now_in = pred(ev.obj)
                    was_in = ev.prev is not None and pred(ev.prev)
                    if ev.type == "MODIFIED" and now_in != was_in:
                        type_ = "ADDED" if now_in else "DELETED"
                    elif ev.type == "DELETED":
                        type_ = ev.type if was_in or now_in else None
                    else:
                        type_ = ev.type if now_in else None
                    if type_ is None:
                        continue
                    action = send(type_, wrap(ev.obj))
                    if action:
                        return self._end_stream(action == "drop")
                if unserved or time.monotonic() >= deadline:
                    return self._end_stream()
                if not events and self._client_gone():
                    self.close_connection = True
                    return None  # an idle watch whose client hung up frees its thread
                if bookmarks and time.monotonic() >= next_bookmark:
                    next_bookmark = time.monotonic() + sim.bookmark_interval
                    self._chunk({"type": "BOOKMARK", "object": {
                        "kind": res.kind, "apiVersion": res.api_version(version),
                        "metadata": {"resourceVersion": str(last)}}})
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        return None

    def _client_gone(self):
        """True when the client closed its side (a watch client never sends anything more)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            if isinstance(self.connection, ssl.SSLSocket):
                return True  # a close_notify or EOF; nothing else is expected here
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _end_stream(self, drop=False):
        if drop:
            # Cut the connection mid-stream: no closing chunk, the client sees a dropped watch.
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.shutdown(2)
            except OSError:
                pass
            return None
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        return None
