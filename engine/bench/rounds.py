#!/usr/bin/env python3
"""Alternating rounds of a Google Benchmark binary against its in-run read-bandwidth probe.

These machines are shared: memory bandwidth moves by 10-30% from minute to minute. Each round runs
every configuration once, one after the other (A B C, A B C, ...), each run with the probe
`mem/read_bandwidth/threads:2/streams:4/huge_pages:0` in the same process; the table is the
median over rounds of each row's time, rate and rate / that run's probe.

  engine/bench/rounds.py --filter 'gemv/(bf16|fp8|int4)/4096x14336/batch:1/' --rounds 3 \\
      build/engine/matmul_bench
  engine/bench/rounds.py --filter 'gemv/fp8/' --env TANDEM_ISA=avx2 --env TANDEM_ISA=avx512 \\
      build/engine/matmul_bench                        # one binary, several environments
  engine/bench/rounds.py --filter 'gemv/int4/' old/matmul_bench build/engine/matmul_bench   # A/B

Rates: `weight_GB/s` where the row reports it, else GFLOP/s or tok/s (as the row names them).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

PROBE = "mem/read_bandwidth/threads:2/streams:4/huge_pages:0"


def run_once(binary, flt, env, min_time):
    full_env = dict(os.environ)
    full_env.update(env)
    out = subprocess.run(
        [binary, f"--benchmark_filter={PROBE}|{flt}", f"--benchmark_min_time={min_time}",
         "--benchmark_format=json"],
        capture_output=True, text=True, env=full_env, check=True).stdout
    return json.loads(out[out.index("{"):])["benchmarks"]


def rate(row):
    for key, unit in (("weight_GB/s", "GB/s"), ("GFLOP/s", "GFLOP/s"), ("tok/s", "tok/s")):
        if key in row:
            value = row[key]
            return (value / 1e9 if value > 1e6 and unit != "tok/s" else value), unit
    if "bytes_per_second" in row:
        return row["bytes_per_second"] / 1e9, "GB/s"
    return None, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--filter", required=True, help="benchmark regex (the probe is added)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--env", action="append", default=[],
                    help="K=V[,K=V]: one configuration per --env (default: the environment as is)")
    ap.add_argument("--min-time", default="0.3")
    args = ap.parse_args()
    envs = [dict(kv.split("=", 1) for kv in e.split(",")) for e in args.env] or [{}]
    configs = [(b, e) for b in args.binaries for e in envs]
    rows = {}
    for _ in range(args.rounds):
        for binary, env in configs:
            bench = run_once(binary, args.filter, env, args.min_time)
            probe = next((b["bytes_per_second"] / 1e9 for b in bench if b["name"].startswith(PROBE)), None)
            for b in bench:
                value, unit = rate(b)
                key = (b["name"], binary, ",".join(f"{k}={v}" for k, v in env.items()))
                rows.setdefault(key, []).append((b["real_time"], b["time_unit"], value, unit, probe,
                                                 b.get("label", "")))
    multi = len(configs) > 1
    for (name, binary, env), runs in sorted(rows.items()):
        t = statistics.median(r[0] for r in runs)
        line = f"{name[:72]:72s}"
        if multi:
            line += f" {os.path.basename(os.path.dirname(binary)) + '/' + os.path.basename(binary):28s} {env:18s}"
        line += f" {t:9.3f} {runs[0][1]}"
        if runs[0][2] is not None:
            line += f" {statistics.median(r[2] for r in runs):8.2f} {runs[0][3]}"
            if runs[0][3] == "GB/s" and runs[0][4] and not name.startswith(PROBE):
                line += f"  probe-ratio {statistics.median(r[2] / r[4] for r in runs):.2f}"
        print(line + ("  " + runs[0][5] if runs[0][5] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
