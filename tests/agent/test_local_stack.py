#!/usr/bin/env python3
"""`tandem local` end to end: router, prefill and decode agents as separate processes, driven by
the official OpenAI Python client (PyPI `openai`), scraped by a real Prometheus, linted by
`promtool check metrics`, with injected transfer faults and a decode agent killed mid-transfer.

Usage: test_local_stack.py MODEL_DIR   (TANDEM_BIN: the `tandem` binary)
"""
import asyncio
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import openai

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tandem_local import TandemLocal  # noqa: E402

TANDEM = os.environ.get("TANDEM_BIN", "")
MODEL = sys.argv.pop(1) if len(sys.argv) > 1 else ""
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
AGENT_SERIES = [
    "tandem_kv_cache_usage_ratio", "tandem_kv_cache_capacity_tokens", "tandem_kv_cache_used_tokens",
    "tandem_kv_integrity_pages_checked_total", "tandem_kv_integrity_aborts_total", "tandem_requests_running",
    "tandem_requests_waiting", "tandem_requests_finished_total", "tandem_time_to_first_token_seconds_bucket",
    "tandem_inter_token_latency_seconds_bucket", "tandem_e2e_request_latency_seconds_bucket",
    "tandem_prompt_tokens_total", "tandem_generation_tokens_total", "tandem_kv_transfer_bytes_total",
    "tandem_kv_transfer_seconds_bucket", "tandem_kv_transfer_failures_total",
    "tandem_prefix_cache_queries_total", "tandem_prefix_cache_hits_total", "tandem_prefix_cache_tokens",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def metric(text, name, labels=""):
    """The first sample of `name` whose label text contains `labels`, or None."""
    for line in text.splitlines():
        if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " ") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return None


class LocalStack(TandemLocal):
    def __init__(self, *extra):
        super().__init__(TANDEM, MODEL, "--enable-fault-injection", "--transfer-timeout-ms", "3000", *extra)
        self.client = openai.OpenAI(base_url=self.base_url, api_key=self.api_key, max_retries=0, timeout=60)

    def metrics(self, agent):
        return get(self.info["metrics"][agent])


class LocalStackTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = LocalStack()
        cls.client = cls.stack.client

    @classmethod
    def tearDownClass(cls):
        rc = cls.stack.stop()
        out = cls.stack.final_output
        assert rc == 0, f"tandem local exited {rc} on Ctrl-C:\n{out[-4000:]}"
        assert "OPENAI_BASE_URL=" in out and "OPENAI_API_KEY=" in out, out

    def chat(self, text, **kw):
        kw.setdefault("max_tokens", 12)
        return self.client.chat.completions.create(model=self.stack.model, messages=[{"role": "user", "content": text}],
                                                   **kw)

    def test_models(self):
        self.assertEqual([m.id for m in self.client.models.list().data], [self.stack.model])

    def test_chat_non_streaming(self):
        r = self.chat("What is the capital of France?", temperature=0.7, seed=3, top_p=0.9)
        self.assertEqual(r.object, "chat.completion")
        self.assertIn(r.choices[0].finish_reason, ("stop", "length"))
        self.assertIsInstance(r.choices[0].message.content, str)
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)

    def test_chat_streaming_with_tools_and_usage(self):
        stream = self.chat("What is the weather in Paris?", stream=True, tools=TOOLS, tool_choice="auto",
                           stream_options={"include_usage": True}, max_tokens=16)
        chunks = list(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        self.assertEqual(len(finishes), 1)
        self.assertIn(finishes[0], ("stop", "length", "tool_calls"))
        self.assertIsNotNone(chunks[-1].usage)
        self.assertEqual(chunks[-1].choices, [])
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertEqual(chunks[-1].usage.completion_tokens, 16 if finishes[0] == "length" else
                         chunks[-1].usage.completion_tokens)
        self.assertIsInstance(text, str)

    def test_tool_call_history(self):
        # The template path for a finished tool round trip: assistant tool_calls, then the tool's answer.
        r = self.client.chat.completions.create(model=self.stack.model, max_tokens=8, tools=TOOLS, messages=[
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                                                                  "function": {"name": "get_weather",
                                                                               "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "{\"temp_c\": 18}"}])
        self.assertIn(r.choices[0].finish_reason, ("stop", "length", "tool_calls"))

    def test_completions_text_and_tokens(self):
        r = self.client.completions.create(model=self.stack.model, prompt="Once upon a time", max_tokens=8,
                                           temperature=0)
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(r.usage.completion_tokens, 8) if r.choices[0].finish_reason == "length" else None
        r2 = self.client.completions.create(model=self.stack.model, prompt=[10, 20, 30, 40], max_tokens=4,
                                            temperature=0, logprobs=2)
        self.assertEqual(len(r2.choices[0].logprobs.tokens), r2.usage.completion_tokens)

    def test_greedy_is_deterministic_and_logprobs(self):
        a = self.chat("Count to five", temperature=0, logprobs=True, top_logprobs=2)
        b = self.chat("Count to five", temperature=0)
        self.assertEqual(a.choices[0].message.content, b.choices[0].message.content)
        self.assertEqual(len(a.choices[0].logprobs.content), a.usage.completion_tokens)
        self.assertEqual(len(a.choices[0].logprobs.content[0].top_logprobs), 2)

    def test_64_concurrent_streams_complete(self):
        async def run():
            client = openai.AsyncOpenAI(base_url=self.stack.info["base_url"], api_key=self.stack.info["api_key"],
                                        max_retries=0, timeout=120)

            async def one(i):
                stream = await client.chat.completions.create(
                    model=self.stack.model, messages=[{"role": "user", "content": f"request number {i}"}],
                    max_tokens=8, stream=True, temperature=0.5, seed=i)
                finish = None
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].finish_reason:
                        finish = chunk.choices[0].finish_reason
                return finish

            try:
                return await asyncio.gather(*(one(i) for i in range(64)))
            finally:
                await client.close()

        finishes = asyncio.run(run())
        self.assertEqual(len(finishes), 64)
        for f in finishes:
            self.assertIn(f, ("stop", "length"))

    def test_errors_use_openai_shapes(self):
        bad = openai.OpenAI(base_url=self.stack.info["base_url"], api_key="wrong", max_retries=0)
        with self.assertRaises(openai.AuthenticationError):
            bad.models.list()
        with self.assertRaises(openai.NotFoundError):
            self.client.chat.completions.create(model="gpt-none", messages=[{"role": "user", "content": "x"}])
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat("x", temperature=5)
        self.assertEqual(e.exception.body.get("param"), "temperature")
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(model=self.stack.model, messages=[{"role": "user", "content": "x"}],
                                                extra_body={"deep": json.loads("[" * 70 + "]" * 70)})
        # A body over the limit is refused from its Content-Length, before it is sent.
        host, port = self.stack.info["base_url"].split("//")[1].split("/")[0].split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Authorization: Bearer " + self.stack.info["api_key"].encode() +
                      b"\r\nContent-Length: 9437184\r\n\r\n{")
            head = s.recv(4096).decode()
        self.assertTrue(head.startswith("HTTP/1.1 413"), head)
        self.assertIn('"error"', head)

    def test_digest_fault_aborts_only_the_victim(self):
        before = metric(self.stack.metrics("decode-0"), "tandem_kv_transfer_failures_total",
                        'reason="digest_mismatch"')
        results = {}

        def normal(i):
            r = self.chat(f"bystander {i}", temperature=0, max_tokens=10)
            results[i] = r.choices[0].finish_reason

        threads = [threading.Thread(target=normal, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        with self.assertRaises(openai.InternalServerError):
            self.chat("the victim", extra_headers={"x-tandem-fault": "digest"})
        for t in threads:
            t.join()
        self.assertEqual(sorted(results), [0, 1, 2, 3])
        after = metric(self.stack.metrics("decode-0"), "tandem_kv_transfer_failures_total", 'reason="digest_mismatch"')
        self.assertEqual(after, before + 1)

    def test_metrics_promtool_and_real_prometheus(self):
        promtool, prometheus = shutil.which("promtool"), shutil.which("prometheus")
        self.assertIsNotNone(promtool, "promtool is required (Debian package prometheus)")
        self.assertIsNotNone(prometheus, "prometheus is required (Debian package prometheus)")
        self.chat("warm the histograms", max_tokens=4)
        for agent, url in self.stack.info["metrics"].items():
            text = get(url)
            lint = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
            self.assertEqual(lint.returncode, 0, f"{agent}: {lint.stdout}{lint.stderr}")
            self.assertEqual(lint.stdout + lint.stderr, "", agent)
        work = tempfile.mkdtemp(prefix="tandem_prom_")
        port = free_port()
        targets = [u.split("//")[1].split("/")[0] for u in self.stack.info["metrics"].values()]
        with open(os.path.join(work, "prometheus.yml"), "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                    "scrape_configs:\n- job_name: tandem\n  static_configs:\n  - targets: %s\n" % json.dumps(targets))
        prom = subprocess.Popen([prometheus, "--config.file=" + os.path.join(work, "prometheus.yml"),
                                 "--storage.tsdb.path=" + os.path.join(work, "data"),
                                 "--web.listen-address=127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            api = "http://127.0.0.1:%d/api/v1/" % port

            def query(q):
                try:
                    return json.loads(get(api + "query?query=" + urllib.parse.quote(q)))["data"]["result"]
                except Exception:
                    return None

            deadline = time.time() + 60
            up = None
            while time.time() < deadline:
                up = query("up")
                if up and len(up) == len(targets) and all(r["value"][1] == "1" for r in up):
                    break
                time.sleep(0.5)
            self.assertTrue(up and len(up) == len(targets), up)
            roles = {"router", "prefill", "decode"}
            for name in AGENT_SERIES:
                result = query(name)
                seen = {r["metric"].get("role") for r in result or []}
                self.assertEqual(seen, roles, name)
                for r in result:
                    self.assertEqual(r["metric"]["deployment"], "local", name)
                    self.assertIn("pool", r["metric"], name)
        finally:
            prom.terminate()
            prom.wait(timeout=30)
            shutil.rmtree(work, ignore_errors=True)


class KillDecodeTest(unittest.TestCase):
    def test_decode_killed_mid_transfer(self):
        stack = LocalStack("--no-prefix-cache")
        try:
            errors = {}
            long_prompt = " ".join(f"word{i}" for i in range(120))

            def victim():
                started = time.time()
                try:
                    stack.client.chat.completions.create(
                        model=stack.model, messages=[{"role": "user", "content": long_prompt}], max_tokens=4,
                        extra_headers={"x-tandem-fault": "slow_push"})
                except openai.APIError as e:
                    errors["error"] = e
                errors["done_at"] = time.time()
                errors["started"] = started

            t = threading.Thread(target=victim)
            t.start()
            # Wait until the prefill side holds the victim's pages (the slow push is under way).
            deadline = time.time() + 30
            while time.time() < deadline and "done_at" not in errors:
                used = metric(stack.metrics("prefill-0"), "tandem_kv_cache_used_tokens")
                if used and used > 0:
                    break
                time.sleep(0.05)
            self.assertNotIn("done_at", errors, errors.get("error"))
            self.assertGreater(used, 0)
            time.sleep(0.5)
            killed_at = time.time()
            os.kill(stack.info["pids"]["decode-0"], signal.SIGKILL)
            t.join(timeout=30)
            self.assertIn("error", errors, "the client got no error")
            self.assertLess(errors["done_at"] - killed_at, 5.0)
            # The prefill side's pages are freed within the transfer timeout (3 s).
            deadline = time.time() + 6
            while time.time() < deadline:
                used = metric(stack.metrics("prefill-0"), "tandem_kv_cache_used_tokens")
                if used == 0:
                    break
                time.sleep(0.1)
            self.assertEqual(used, 0)
        finally:
            stack.stop()


# HTTP/2's client connection preface and an empty SETTINGS frame: what a gRPC client sends first.
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


class TlsStackTest(unittest.TestCase):
    """`tandem local --tls`: every gRPC hop (router -> prefill -> decode) on mutual TLS from a CA made
    for the run, and a router that reaches a member again after it refused a connection (a router
    serves no gRPC of its own, so only its pending calls keep its sockets polled)."""

    def setUp(self):
        self.stack = LocalStack("--tls", "--restart-agents", "--no-prefix-cache")
        self.tls = self.stack.info["tls"]

    def tearDown(self):
        pki_dir = os.path.dirname(self.tls["ca"])
        self.assertEqual(self.stack.stop(), 0, self.stack.final_output[-4000:])
        self.assertFalse(os.path.exists(pki_dir), "the CA made for the run outlived it")

    def handshake(self, endpoint, cert=True):
        """The first bytes the gRPC server sends after a TLS handshake with the run's CA (and its
        certificate when `cert`) and the HTTP/2 preface: an HTTP/2 SETTINGS frame, or b"" / an SSL
        error when the server refuses the client."""
        host, port = endpoint.rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=self.tls["ca"])
        ctx.set_alpn_protocols(["h2"])
        if cert:
            ctx.load_cert_chain(self.tls["cert"], self.tls["key"])
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=self.tls["server_name"]) as s:
                s.sendall(H2_PREFACE)
                return s.recv(9)

    def plaintext(self, endpoint):
        host, port = endpoint.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(H2_PREFACE)
            try:
                return s.recv(9)
            except (ConnectionResetError, socket.timeout):
                return b""

    def chat_tokens(self):
        r = self.stack.client.chat.completions.create(model=self.stack.model, max_tokens=6, temperature=0,
                                                      messages=[{"role": "user", "content": "Hello over TLS"}],
                                                      extra_body={"ignore_eos": True})
        return r.usage.completion_tokens

    def test_mutual_tls_on_every_hop_and_a_refused_member_is_reached_again(self):
        self.assertEqual(self.tls["server_name"], "tandem-agent")
        self.assertEqual(self.chat_tokens(), 6)
        moved = metric(self.stack.metrics("decode-0"), "tandem_kv_transfer_bytes_total", 'direction="in"')
        self.assertGreater(moved, 0, "no KV pages reached the decode agent")
        for label, endpoint in self.stack.info["grpc"].items():
            frame = self.handshake(endpoint)
            self.assertEqual(len(frame), 9, label)
            self.assertEqual(frame[3], 4, "%s: the server's first frame is SETTINGS" % label)
            try:
                refused = self.handshake(endpoint, cert=False)
            except (ssl.SSLError, ConnectionResetError):
                refused = b""
            self.assertEqual(refused, b"", "%s served a client without a certificate" % label)
            self.assertEqual(self.plaintext(endpoint), b"", "%s answered plaintext HTTP/2" % label)

        # The decode agent dies; tandem local starts it again on the same port. Until it listens
        # the router's connection attempts are refused; it must then reach it over mTLS again.
        os.kill(self.stack.info["pids"]["decode-0"], signal.SIGKILL)
        deadline = time.time() + 90
        while self.stack.read_info()["restarts"]["decode-0"] < 1:
            self.assertLess(time.time(), deadline, "decode-0 was not restarted")
            time.sleep(0.2)
        # Requests fail (503) until the router has polled the new agent; then they are served.
        while True:
            try:
                self.assertEqual(self.chat_tokens(), 6)
                break
            except openai.APIStatusError as e:
                self.assertLess(time.time(), deadline, "the router never reached the restarted decode agent: %s\n%s"
                                % (e, self.stack.output()))
                time.sleep(0.5)
        self.assertEqual(metric(get(self.stack.metrics_url("router")), "tandem_router_members",
                                'state="ready",target_pool="decode"'), 1)


if __name__ == "__main__":
    if not TANDEM or not MODEL:
        sys.exit("usage: TANDEM_BIN=... test_local_stack.py MODEL_DIR")
    unittest.main(verbosity=2)
