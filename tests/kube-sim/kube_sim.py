#!/usr/bin/env python3
"""kube-sim: a simulated Kubernetes API server for Tandem's controller tests (stdlib only).

    python3 tests/kube-sim/kube_sim.py --port 0 --port-file FILE [--host 127.0.0.1]
        [--tls-cert C --tls-key K [--client-ca CA]] [--token T] [--faults JSON] [--auto-ready]
        [--history N] [--bookmark-interval S] [--verbose]

Serves discovery, CRUD + watch of the built-in resources the controller uses and of CRDs
registered at run time (validated and defaulted by crd_schema.py), status/scale subresources,
generation, finalizers, owner-reference garbage collection, simulated StatefulSet/Deployment
controllers and fault injection. README.md beside this file says what is approximated.
"""

import argparse
import json
import logging
import os
import signal
import ssl
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sim_controllers  # noqa: E402
import sim_faults  # noqa: E402
import sim_http  # noqa: E402
import sim_resources  # noqa: E402
import sim_store  # noqa: E402


class Sim:
    """Everything one server instance holds."""

    def __init__(self, history=1000, auto_ready=False, faults=None, token=None, client_ca=None,
                 bookmark_interval=5.0, verbose=False, clock=None):
        self.registry = sim_resources.Registry()
        self.store = sim_store.Store(self.registry, history=history, clock=clock, seed=0)
        self.controllers = sim_controllers.Controllers(auto_ready=auto_ready)
        self.store.reactors.append(self.controllers)
        self.faults = sim_faults.Faults(faults)
        self.stats = sim_faults.Stats()
        self.token = token
        self.client_ca = client_ca
        self.bookmark_interval = bookmark_interval
        self.verbose = verbose
        ns_res = self.registry.by_key[("", "namespaces")]
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.store.create(ns_res, "", {"metadata": {"name": ns}})


def make_tls_context(cert, key, client_ca, token):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    if client_ca:
        ctx.load_verify_locations(client_ca)
        # With a token too, a client may authenticate either way.
        ctx.verify_mode = ssl.CERT_OPTIONAL if token is not None else ssl.CERT_REQUIRED
    return ctx


def serve(sim, host, port, tls_context=None):
    """Starts the server in a thread; returns it (server.server_address has the bound port)."""
    server = sim_http.ApiServer((host, port), sim, tls_context, ipv6=":" in host)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                              daemon=True)
    thread.start()
    return server


def shutdown(sim, server):
    with sim.store.cond:
        sim.store.closed = True
        sim.store.cond.notify_all()
    server.shutdown()
    server.server_close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca", help="require (or, with --token, accept) client certificates")
    ap.add_argument("--token", help="require Authorization: Bearer TOKEN")
    ap.add_argument("--faults", default="{}", help="fault-injection JSON (see sim_faults.py)")
    ap.add_argument("--auto-ready", action="store_true", help="pods become Ready on creation")
    ap.add_argument("--history", type=int, default=1000, help="watch events kept for resuming")
    ap.add_argument("--bookmark-interval", type=float, default=5.0,
                    help="seconds between BOOKMARK events on watches that allow them")
    ap.add_argument("--verbose", action="store_true", help="log every request")
    args = ap.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s kube-sim %(levelname)s %(message)s")
    if bool(args.tls_cert) != bool(args.tls_key):
        ap.error("--tls-cert and --tls-key go together")
    if args.client_ca and not args.tls_cert:
        ap.error("--client-ca needs --tls-cert/--tls-key")
    try:
        faults = json.loads(args.faults)
        sim = Sim(history=args.history, auto_ready=args.auto_ready, faults=faults,
                  token=args.token, client_ca=args.client_ca,
                  bookmark_interval=args.bookmark_interval, verbose=args.verbose)
        tls = (make_tls_context(args.tls_cert, args.tls_key, args.client_ca, args.token)
               if args.tls_cert else None)
        server = serve(sim, args.host, args.port, tls)
    except (ValueError, OSError, ssl.SSLError) as e:
        print("kube-sim: %s" % e, file=sys.stderr)
        return 2
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.port_file)
    logging.info("listening on %s://%s:%d", "https" if tls else "http", args.host, port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    shutdown(sim, server)
    logging.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
