"""kube-sim cases: token and TLS auth, shutdown, and the official Kubernetes Python client."""

import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_testlib import (  # noqa: E402
    CMS, SimProcess, SimTestCase, WatchStream, make_certs, mdep, sts, wait_for)


@unittest.skipIf(shutil.which("openssl") is None, "no openssl CLI to make test certificates")
class AuthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kube-sim-certs-")
        cls.certs = make_certs(cls.dir)

    def ctx(self, client_cert):
        import ssl
        ctx = ssl.create_default_context(cafile=self.certs["ca.crt"])
        if client_cert:
            ctx.load_cert_chain(self.certs["client.crt"], self.certs["client.key"])
        return ctx

    def test_token(self):
        sim = SimProcess("--token", "s3cret", token="s3cret")
        try:
            self.assertEqual(sim.req("GET", CMS)[0], 200)
            sim.token = None
            code, st = sim.req("GET", CMS)
            self.assertEqual((code, st["reason"]), (401, "Unauthorized"))
            self.assertEqual(sim.req("GET", CMS, headers={"Authorization": "Bearer no"})[0], 401)
            self.assertEqual(sim.req("GET", "/version")[0], 200)
        finally:
            self.assertEqual(sim.stop(), 0)

    def test_tls_client_certificates(self):
        c = self.certs
        sim = SimProcess("--tls-cert", c["server.crt"], "--tls-key", c["server.key"],
                         "--client-ca", c["ca.crt"], tls_context=self.ctx(True))
        try:
            self.assertEqual(sim.req("GET", CMS)[0], 200)
            sim.tls_context = self.ctx(False)
            sim._conn = None
            with self.assertRaises(OSError):
                sim.req("GET", CMS)
        finally:
            sim._conn = None
            sim.stop()

    def test_tls_with_token(self):
        c = self.certs
        sim = SimProcess("--tls-cert", c["server.crt"], "--tls-key", c["server.key"],
                         "--client-ca", c["ca.crt"], "--token", "t",
                         tls_context=self.ctx(False), token="t")
        try:
            self.assertEqual(sim.req("GET", CMS)[0], 200)
            sim.token = None
            self.assertEqual(sim.req("GET", CMS)[0], 401)
        finally:
            sim.stop()


class ShutdownTest(unittest.TestCase):
    @unittest.skipUnless(os.path.exists("/proc/self/status"), "needs /proc")
    def test_abandoned_watches_free_their_threads(self):
        sim = SimProcess()

        def threads():
            with open("/proc/%d/status" % sim.proc.pid) as f:
                return int([x for x in f if x.startswith("Threads:")][0].split()[1])
        try:
            base = threads()
            streams = [WatchStream(sim, CMS + "?watch=1") for _ in range(20)]
            self.assertGreaterEqual(threads(), base + 20)
            for w in streams:
                w.close()
            wait_for(lambda: threads() <= base, 15, "watch threads to end")
        finally:
            sim.stop()

    def test_sigterm_with_open_watch(self):
        sim = SimProcess()
        w = WatchStream(sim, CMS + "?watch=1")
        self.assertEqual(w.status, 200)
        self.assertEqual(sim.stop(), 0)
        w.close()


class OfficialClientTest(SimTestCase):
    """The same server through the official `kubernetes` Python client."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        import kubernetes
        cfg = kubernetes.client.Configuration()
        cfg.host = cls.sim.url
        cls.api = kubernetes.client.ApiClient(cfg)
        cls.k8s = kubernetes

    @classmethod
    def tearDownClass(cls):
        cls.api.close()
        super().tearDownClass()

    def test_core_and_apps(self):
        core = self.k8s.client.CoreV1Api(self.api)
        apps = self.k8s.client.AppsV1Api(self.api)
        core.create_namespace({"metadata": {"name": "pyclient"}})
        cmap = core.create_namespaced_config_map("pyclient", {"metadata": {"name": "c"},
                                                              "data": {"a": "1"}})
        self.assertEqual(cmap.metadata.generation, 1)
        cmap.data["a"] = "2"
        cmap = core.replace_namespaced_config_map("c", "pyclient", cmap)
        stale = core.read_namespaced_config_map("c", "pyclient")
        core.patch_namespaced_config_map("c", "pyclient", {"data": {"b": "3"}})
        stale.data["a"] = "9"
        with self.assertRaises(self.k8s.client.ApiException) as ctx:
            core.replace_namespaced_config_map("c", "pyclient", stale)
        self.assertEqual(ctx.exception.status, 409)
        page = core.list_namespaced_config_map("pyclient", limit=1)
        self.assertEqual(len(page.items), 1)
        apps.create_namespaced_stateful_set("pyclient", sts("py", 2, policy="Parallel"))
        got = apps.read_namespaced_stateful_set("py", "pyclient")
        self.assertEqual(got.status.replicas, 2)
        pods = core.list_namespaced_pod("pyclient", label_selector="app=py")
        self.assertEqual(len(pods.items), 2)
        apps.patch_namespaced_stateful_set_scale("py", "pyclient", {"spec": {"replicas": 3}})
        self.assertEqual(len(core.list_namespaced_pod("pyclient").items), 3)
        core.delete_namespace("pyclient")
        with self.assertRaises(self.k8s.client.ApiException) as ctx:
            core.read_namespace("pyclient")
        self.assertEqual(ctx.exception.status, 404)

    def test_custom_objects_and_watch(self):
        co = self.k8s.client.CustomObjectsApi(self.api)
        args = ("tandem.dev", "v1alpha1", "default", "modeldeployments")
        created = co.create_namespaced_custom_object(*args, mdep("py-mdep"))
        rv = created["metadata"]["resourceVersion"]
        co.patch_namespaced_custom_object_status(*args, "py-mdep", {"status": {
            "observedGeneration": 1}})
        co.patch_namespaced_custom_object(*args, "py-mdep", {"spec": {"decode": {"replicas": 2}}})
        with self.assertRaises(self.k8s.client.ApiException) as ctx:
            co.create_namespaced_custom_object(*args, mdep("py-bad", prefill={"weights": "x"}))
        self.assertEqual(ctx.exception.status, 422)
        seen = []
        w = self.k8s.watch.Watch()
        for ev in w.stream(co.list_namespaced_custom_object, *args, resource_version=rv,
                           timeout_seconds=1):
            seen.append((ev["type"], ev["object"]["metadata"].get("generation")))
        self.assertEqual(seen, [("MODIFIED", 1), ("MODIFIED", 2)])
        co.delete_namespaced_custom_object(*args, "py-mdep")
        lst = co.list_namespaced_custom_object(*args)
        self.assertNotIn("py-mdep", [o["metadata"]["name"] for o in lst["items"]])
