#!/usr/bin/env python3
"""Copies the files the Helm chart ships from their sources of truth into the chart (Helm reads
nothing outside a chart's directory):

    crds/tandem.dev_*.yaml           -> deploy/helm/tandem/crds/
    deploy/grafana/*.json            -> deploy/helm/tandem/files/grafana/     (dashboard ConfigMaps)
    deploy/prometheus/*rules.yaml    -> deploy/helm/tandem/files/prometheus/  (PrometheusRules)

Copies are byte-for-byte; a copy whose source is gone is removed. Never edit the copies.

    python3 deploy/helm/sync_chart_files.py           # copy
    python3 deploy/helm/sync_chart_files.py --check   # exit 1 listing every stale, missing or extra copy

An empty source set (e.g. no dashboards yet) is fine: the chart then renders no such objects.
tests/deploy/test_chart.py runs --check and compares the bytes itself.
"""

import argparse
import glob
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(REPO, "deploy", "helm", "tandem")

# (source glob relative to the repo, destination directory relative to the chart, copy glob there)
MAPPINGS = [
    ("crds/tandem.dev_*.yaml", "crds", "*.yaml"),
    ("deploy/grafana/*.json", "files/grafana", "*.json"),
    ("deploy/prometheus/*rules.yaml", "files/prometheus", "*.yaml"),
]


def plan():
    """[(source or None, destination)] for every copy that should exist or should go."""
    out = []
    for source_glob, dest_dir, dest_glob in MAPPINGS:
        sources = sorted(glob.glob(os.path.join(REPO, source_glob)))
        wanted = {os.path.join(CHART, dest_dir, os.path.basename(s)): s for s in sources}
        for dest, source in sorted(wanted.items()):
            out.append((source, dest))
        for dest in sorted(glob.glob(os.path.join(CHART, dest_dir, dest_glob))):
            if dest not in wanted:
                out.append((None, dest))
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read()


def problems():
    """Human-readable differences between the sources and the chart's copies."""
    out = []
    for source, dest in plan():
        rel = os.path.relpath(dest, REPO)
        if source is None:
            out.append("%s: no source any more" % rel)
        elif not os.path.exists(dest):
            out.append("%s: missing (copy of %s)" % (rel, os.path.relpath(source, REPO)))
        elif read(source) != read(dest):
            out.append("%s: differs from %s" % (rel, os.path.relpath(source, REPO)))
    return out


def sync():
    for source, dest in plan():
        if source is None:
            os.remove(dest)
            print("removed %s" % os.path.relpath(dest, REPO))
        elif not os.path.exists(dest) or read(source) != read(dest):
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(source, dest)
            print("copied %s -> %s" % (os.path.relpath(source, REPO), os.path.relpath(dest, REPO)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report differences, change nothing")
    args = parser.parse_args()
    if args.check:
        found = problems()
        for p in found:
            print(p)
        if found:
            print("run: python3 deploy/helm/sync_chart_files.py", file=sys.stderr)
        return 1 if found else 0
    sync()
    return 0


if __name__ == "__main__":
    sys.exit(main())
