"""What the observability tests share: the dashboards' panels and queries with their template
variables substituted, the rules file, and the metric names an expression reads."""

import glob
import json
import os
import re

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DASHBOARDS = sorted(glob.glob(os.path.join(REPO, "deploy", "grafana", "*.json")))
RULES = os.path.join(REPO, "deploy", "prometheus", "tandem-rules.yaml")
RULE_TESTS = sorted(glob.glob(os.path.join(HERE, "rules_*_test.yaml")))
RUNBOOKS = os.path.join(REPO, "docs", "runbooks")
RUNBOOK_BASE = "https://github.com/tandem-dev/tandem/blob/main/docs/runbooks/"

# Grafana's own variables, as a short test scrape wants them: Prometheus scrapes every second,
# so a 10 s rate window holds ten samples.
BUILTINS = {"__rate_interval": "10s", "__interval": "1s", "__range": "1m"}

# Series that the code declares but never emits yet, with the reason. A panel reading only these
# must return no data (and the test fails once it does, so the entry is removed with the gap).
NOT_EMITTED = {
    "tandem_autoscaler_decisions_total":
        "counted only when the built-in autoscaler changes a pool's replicas; the live test "
        "drives no load that would make it",
}


def load_dashboards():
    """[(file name, dashboard JSON)] of deploy/grafana/."""
    out = []
    for path in DASHBOARDS:
        with open(path) as f:
            out.append((os.path.basename(path), json.load(f)))
    return out


def panels(dashboard):
    """Every panel, those nested in collapsed rows included, rows left out."""
    out = []
    for p in dashboard.get("panels", []):
        if p.get("type") == "row":
            out.extend(p.get("panels", []))
        else:
            out.append(p)
    return out


def variables(dashboard):
    return dashboard.get("templating", {}).get("list", [])


def all_values(dashboard):
    """{variable: the value its "All" option stands for} of the dashboard's query variables."""
    return {v["name"]: v.get("allValue") for v in variables(dashboard) if v.get("type") == "query"}


_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")


def substitute(expr, values):
    """expr with $var, ${var} and [[var]] replaced from `values` and BUILTINS; KeyError names an
    unknown variable."""
    table = dict(BUILTINS, **values)

    def one(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name not in table or table[name] is None:
            raise KeyError(name)
        return table[name]

    return _VAR.sub(one, expr)


def queries(dashboard):
    """[(panel title, refId, expression with the All values substituted)]."""
    values = all_values(dashboard)
    out = []
    for p in panels(dashboard):
        for t in p.get("targets", []):
            out.append((p.get("title", ""), t.get("refId", ""), substitute(t.get("expr", ""), values)))
    return out


def variable_queries(dashboard):
    """[(variable, label, series selector)] of `label_values(selector, label)` variables, the
    selector's variables substituted."""
    values = all_values(dashboard)
    out = []
    for v in variables(dashboard):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v.get("query"), dict) else v.get("query", "")
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q)
        if not m:
            raise ValueError("variable %s: not label_values(selector, label): %r" % (v["name"], q))
        out.append((v["name"], m.group(2), substitute(m.group(1), values)))
    return out


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAME = re.compile(r"(?<![\w:])(tandem[_:][\w:]*)")


def metric_names(expr):
    """The tandem_* (and tandem:* recorded) series names an expression reads."""
    return set(_NAME.findall(_STRING.sub('""', expr)))


def autoscaling_example_queries():
    """[(where, PromQL)] of deploy/examples/autoscaling/: the KEDA triggers' queries and the
    prometheus-adapter rules' series queries, which read what the agents export."""
    d = os.path.join(REPO, "deploy", "examples", "autoscaling")
    out = []
    with open(os.path.join(d, "keda.yaml")) as f:
        for doc in yaml.safe_load_all(f):
            if doc and doc["kind"] == "ScaledObject":
                for t in doc["spec"]["triggers"]:
                    out.append(("keda.yaml " + doc["metadata"]["name"], t["metadata"]["query"]))
    with open(os.path.join(d, "prometheus-adapter-values.yaml")) as f:
        for rule in yaml.safe_load(f)["rules"]["custom"]:
            out.append(("prometheus-adapter-values.yaml", rule["seriesQuery"]))
    return out


def load_rules():
    """[(group name, rule)] of the rules file."""
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    return [(g["name"], r) for g in doc["groups"] for r in g["rules"]]


def recorded_names():
    return {r["record"] for _, r in load_rules() if "record" in r}


def exposition_names(text):
    """Sample names and metric family names (# TYPE) in a Prometheus text exposition."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.match(r"[\w:]+", line).group(0))
    return names
