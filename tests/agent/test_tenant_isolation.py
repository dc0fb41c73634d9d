#!/usr/bin/env python3
"""Tenant isolation of the prefix cache, end to end: HTTP -> router -> prefill agents (#22 item 5).

`tandem local` with 2 prefill agents, 1 decode agent and 8 tenants (one API key each). A probe is
a prompt nobody has sent before (random words, several pages long) sent three times through the
router's OpenAI API: by tenant A (it fills the cache), by tenant B (the cross-tenant probe), and by
A again (the same-tenant probe). `usage.prompt_tokens_details.cached_tokens` says how many prompt
tokens came from cached KV. A cross-tenant hit is B's request reporting any cached token: B never
sent anything sharing a page with that prompt, so such a token could only be A's KV. The
same-tenant hit rate is the share of A's repeats with cached tokens.

Pass: 0 cross-tenant hits and a same-tenant hit rate > 90%; every request answered 200.

Usage: test_tenant_isolation.py MODEL_DIR [--probes N] [--clients N] [--seed N] [--report FILE]
(TANDEM_BIN: the `tandem` binary)
"""
import argparse
import json
import os
import random
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tandem_local import TandemLocal  # noqa: E402

TANDEM = os.environ.get("TANDEM_BIN", "")
TENANTS = 8
WORDS = ("amber basin cedar delta ember fjord garnet harbor iris jasper kestrel lagoon meadow nectar "
         "orchid prairie quartz river saffron tundra umber valley willow xenon yarrow zephyr anchor "
         "beacon canyon dune estuary forest glacier hollow island jungle knoll lantern mesa north "
         "ocean pebble quiet ridge summit timber upland vista wharf").split()


class Stack(TandemLocal):
    def __init__(self, model, keys):
        args = ["--prefill", "2", "--decode", "1", "--prefill-weights", "bf16", "--decode-weights", "bf16"]
        for key, tenant in keys:
            args += ["--tenant-key", f"{key}:{tenant}"]
        super().__init__(TANDEM, model, *args)

    def complete(self, key, prompt):
        """(status, cached prompt tokens, prompt tokens) of a 1-token greedy completion."""
        body = json.dumps({"model": self.model, "prompt": prompt, "max_tokens": 1,
                           "temperature": 0}).encode()
        request = urllib.request.Request(self.base_url + "/completions", data=body, headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {key}"})
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                usage = json.loads(r.read())["usage"]
                details = usage.get("prompt_tokens_details") or {}
                return 200, int(details.get("cached_tokens", 0)), int(usage["prompt_tokens"])
        except urllib.error.HTTPError as e:
            return e.code, None, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--probes", type=int, default=500)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--report", default="")
    args = parser.parse_args()
    if not TANDEM:
        print("TANDEM_BIN is not set", file=sys.stderr)
        return 2
    keys = [(f"tk-tenant-{i}-{random.Random(args.seed + i).getrandbits(64):016x}", f"tenant-{i}")
            for i in range(TENANTS)]
    stack = Stack(args.model, keys)
    lock = threading.Lock()
    counts = {"probes": 0, "cross_hits": 0, "same_hits": 0, "errors": 0, "cross_cached_tokens": 0,
              "same_cached_tokens": 0, "prompt_tokens": 0}
    errors = []
    next_probe = [0]

    def client(index):
        rng = random.Random(args.seed * 1000 + index)
        while True:
            with lock:
                if next_probe[0] >= args.probes:
                    return
                probe = next_probe[0]
                next_probe[0] += 1
            # Unique from its first word on: the probe number leads, then 60-90 random words.
            prompt = f"probe {probe} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(60, 90)))
            a, b = rng.sample(range(TENANTS), 2)
            first = stack.complete(keys[a][0], prompt)
            cross = stack.complete(keys[b][0], prompt)
            same = stack.complete(keys[a][0], prompt)
            with lock:
                counts["probes"] += 1
                for name, (status, _, _) in (("fill", first), ("cross", cross), ("same", same)):
                    if status != 200:
                        counts["errors"] += 1
                        errors.append(f"probe {probe} {name}: HTTP {status}")
                if cross[0] == 200 and cross[1] > 0:
                    counts["cross_hits"] += 1
                    counts["cross_cached_tokens"] += cross[1]
                    errors.append(f"probe {probe}: tenant-{b} got {cross[1]} cached tokens of tenant-{a}'s prompt")
                if same[0] == 200 and same[1] > 0:
                    counts["same_hits"] += 1
                    counts["same_cached_tokens"] += same[1]
                if first[0] == 200:
                    counts["prompt_tokens"] += first[2]

    started = time.time()
    try:
        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stack.stop()
    elapsed = time.time() - started
    probes = counts["probes"]
    report = dict(counts, tenants=TENANTS, seconds=round(elapsed, 1),
                  same_tenant_hit_rate=round(counts["same_hits"] / max(probes, 1), 4),
                  mean_prompt_tokens=round(counts["prompt_tokens"] / max(probes, 1), 1),
                  mean_same_cached_tokens=round(counts["same_cached_tokens"] / max(counts["same_hits"], 1), 1),
                  requests_per_second=round(3 * probes / max(elapsed, 1e-9), 1))
    print(json.dumps(report), flush=True)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    failures = []
    if probes != args.probes:
        failures.append(f"{probes} of {args.probes} probes ran")
    if counts["cross_hits"] != 0:
        failures.append(f"{counts['cross_hits']} cross-tenant hits")
    if counts["errors"] != 0:
        failures.append(f"{counts['errors']} requests not answered 200")
    if report["same_tenant_hit_rate"] <= 0.90:
        failures.append(f"same-tenant hit rate {report['same_tenant_hit_rate']} <= 0.90")
    if failures:
        print("FAILED: " + "; ".join(failures) + "\n  " + "\n  ".join(errors[:20]))
        return 1
    print(f"OK: {probes} cross-tenant probes, 0 hits; same-tenant hit rate {report['same_tenant_hit_rate']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
