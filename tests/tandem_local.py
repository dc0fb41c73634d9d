"""`tandem local` as a child process for the Python tests: start it, wait for its ready file, read
what it wrote there, stop it.

The ready file (`--ready-file`) is written once every agent answers /readyz and the router is up;
it holds base_url, api_key, model, the metrics URL of each process ("router", "prefill-0", ...),
their pids and, with --restart-agents, restart counts (rewritten on each restart).

    stack = TandemLocal(tandem_bin, model_dir, "--prefill", "2")
    client = openai.OpenAI(base_url=stack.base_url, api_key=stack.api_key)
    ...
    rc = stack.stop()
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time


class NotReady(RuntimeError):
    """tandem local exited, or did not write its ready file in time; the message ends with its log."""


class TandemLocal:
    def __init__(self, tandem, model, *args, timeout=180, work_dir=None, log_tail=6000, **popen):
        """Starts `tandem local --model MODEL --port 0 --ready-file ... ARGS` and waits for it.

        work_dir: where the ready file and local.log go (a new temporary directory, removed by
        stop(), when None). popen: further subprocess.Popen arguments (preexec_fn,
        start_new_session, env). Raises NotReady, the process killed, when it exits first or is
        not ready within `timeout` seconds."""
        if not tandem:
            raise NotReady("no tandem binary given (TANDEM_BIN)")
        self.owns_dir = work_dir is None
        self.dir = work_dir or tempfile.mkdtemp(prefix="tandem_local_")
        self.ready_path = os.path.join(self.dir, "ready.json")
        self.log_tail = log_tail
        self.final_output = ""
        self.log = open(os.path.join(self.dir, "local.log"), "w+")
        self.own_group = bool(popen.get("start_new_session"))
        self.proc = subprocess.Popen([tandem, "local", "--model", model, "--port", "0", "--ready-file", self.ready_path,
                                      *args], stdout=self.log, stderr=subprocess.STDOUT, **popen)
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.ready_path):
            if self.proc.poll() is not None:
                self._fail("tandem local exited with %s before it was ready" % self.proc.returncode)
            if time.monotonic() > deadline:
                self._fail("tandem local was not ready within %d s" % timeout)
            time.sleep(0.1)
        self.info = self.read_info()
        self.base_url = self.info["base_url"]
        self.api_key = self.info["api_key"]
        self.model = self.info["model"]

    def _fail(self, why):
        self.kill()
        log = self.output()
        self._cleanup()
        raise NotReady("%s; its log:\n%s" % (why, log))

    def read_info(self):
        """The ready file, read again (tandem local rewrites it when it restarts an agent)."""
        error = None
        for _ in range(50):
            try:
                with open(self.ready_path) as f:
                    return json.load(f)
            except (OSError, ValueError) as e:  # caught between truncate and write
                error = e
                time.sleep(0.05)
        raise NotReady("cannot read %s: %s" % (self.ready_path, error))

    def metrics_url(self, label):
        return self.info["metrics"][label]

    def output(self):
        """The last log_tail characters of everything tandem local and its agents printed."""
        if self.log.closed:
            return ""
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            text = f.read()
        return text[-self.log_tail:] if self.log_tail else text

    def kill(self):
        """SIGKILL, to the whole process group when it was started in a session of its own (agents
        included), else to tandem local alone."""
        if self.proc.poll() is None:
            if self.own_group:
                os.killpg(self.proc.pid, signal.SIGKILL)
            else:
                self.proc.kill()
        self.proc.wait()

    def stop(self, sig=signal.SIGINT, timeout=60):
        """Sends `sig` (Ctrl-C by default: the agents drain), waits up to `timeout` s, then kills.
        Returns the exit status (negative: killed by that signal). The output stays readable through
        `final_output` after the work directory is gone."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._cleanup()
        return self.proc.returncode

    def _cleanup(self):
        if not self.log.closed:
            self.log.flush()
            with open(self.log.name, errors="replace") as f:
                self.final_output = f.read()
            self.log.close()
        if self.owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
