#!/usr/bin/env python3
"""cel.py against Google's CEL (cel-cpp, via PyPI `cel-expr-python`, pinned in
scripts/requirements-test.txt) on the expressions the CRDs use, a hand-written corpus of edge
cases, and seeded random expressions: the same value (and CEL type), or an error on both sides.

The oracle runs unchecked (disable_check), which is how Kubernetes' rules meet `self` as dynamic
data; its strings extension supplies lowerAscii/upperAscii/trim as Kubernetes enables it. Where
cel.py refuses something at compile time (a syntax error, or a function it lacks), the oracle must
fail too (parse error or no matching overload).

Run: .venv/bin/python tests/kube-sim/test_cel_oracle.py [--count N] [--seed S]
(ctest -R kube_sim.cel_oracle)
"""
import argparse
import math
import os
import random
import sys
import unittest

from cel_expr_python import cel as google_cel
from cel_expr_python.ext import ext_strings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cel  # noqa: E402
import crd_schema  # noqa: E402
import yaml  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DYN = google_cel.Type.DYN
ENV = google_cel.NewEnv(variables={"self": DYN, "oldSelf": DYN},
                        extensions=[ext_strings.ExtStrings()])

DATA = {"self": {"i": 7, "n": -3, "z": 0, "big": 2**62, "d": 2.5, "s": "Ab/c", "e": "",
                 "t": True, "l": [1, 2, 4], "ls": ["a", "bc"], "m": {"k": 1, "j": 2},
                 "o": {"p": {"q": 5}}, "nul": None},
        "oldSelf": {"i": 7, "s": "x"}}

CORPUS = [
    # literals and arithmetic
    "1", "-1", "0x1F", "7u", "1.5", "-0.5", "1e3", ".5", "'a\\tb'", '"\\u00e9"', "r'\\d'",
    "true", "null", "[]", "[1, 'a']", "{}", "{'a': 1}", "'''x\ny'''",
    "7 / 2", "-7 / 2", "7 / -2", "-7 % 3", "7 % -3", "-7 % -3", "1 / 0", "1 % 0",
    "9223372036854775807 + 1", "-9223372036854775807 - 2", "9223372036854775807 * 2",
    "-9223372036854775807 - 1", "(-9223372036854775807 - 1) / -1",
    "(-9223372036854775807 - 1) % -1", "-(-9223372036854775807 - 1)",
    "0u - 1u", "18446744073709551615u + 1u", "5u / 2u", "5u % 2u", "5u * 3u",
    "1 + 1.0", "1 + 1u", "1.0 / 0.0", "-1.0 / 0.0", "0.5 * 4.0", "1.0 % 2.0", "2.0 - 0.5",
    "'a' + 'b'", "[1] + [2, 3]", "'a' + 1", "[1] + 'a'", "-'a'", "-(1u)", "--1",
    # comparisons and equality
    "1 == 1.0", "1 == 1u", "1u == 1.0", "1 == true", "'1' == 1", "null == null", "[1] == [1.0]",
    "{'a': 1} == {'a': 1.0}", "[1, 2] == [1]", "{'a': 1} == {'b': 1}", "1 != 2", "[] != []",
    "1 < 1.5", "2u > 1", "1.5 >= 1", "'a' < 'b'", "'b' <= 'a'", "true > false", "1 < 'a'",
    "[1] < [2]", "null < null",
    # logic
    "true && false", "true || false", "!true", "!!false", "!1", "1 && true", "true ? 1 : 'a'",
    "false ? 1 : 2", "1 ? 2 : 3", "true ? false ? 1 : 2 : 3",
    "self.missing || true", "true || self.missing", "self.missing && false",
    "false && self.missing", "self.missing || false", "self.missing && true",
    "self.missing && self.other", "(1 / 0 > 1) || true",
    # fields, has, index, size, in
    "self.i", "self.o.p.q", "self.missing", "self.i.x", "has(self.i)", "has(self.missing)",
    "has(self.o.p)", "has(self.o.p.x)", "has(self.i.x)", "self.l[0]", "self.l[3]", "self.l[-1]",
    "self.l[1u]", "self.m['k']", "self.m['x']", "self.m.k", "self['i']", "self.nul",
    "self.nul == null", "has(self.nul)", "size(self.l)", "self.l.size()", "size(self.s)",
    "size('héllo')", "size(self.m)", "size(1)", "size(self)", "2 in self.l", "3 in self.l",
    "'k' in self.m", "1 in self.m", "1.0 in [1]", "'a' in 'abc'", "self.e.size() == 0",
    # macros
    "self.l.all(x, x > 0)", "self.l.all(x, x > 1)", "self.l.exists(x, x == 4)",
    "self.l.exists(x, x == 3)", "self.l.exists_one(x, x > 3)", "self.l.exists_one(x, x > 1)",
    "self.l.map(x, x * 2)", "self.l.map(x, x > 1, x * 10)", "self.l.filter(x, x % 2 == 0)",
    "self.m.all(k, k.size() == 1)", "self.m.map(k, k + 'x').size()", "self.ls.all(s, s.size() > 0)",
    "[0, 'a'].all(x, x > 0)", "['a', 0].all(x, x > 0)", "['a', 1].all(x, x > 0)",
    "['a', 1].exists(x, x > 0)", "[1, 'a'].exists(x, x > 0)", "['a', 0].exists(x, x > 0)",
    "['a', 0].exists_one(x, x > 0)", "self.l.all(x, self.l.exists(y, y == x))",
    "self.i.all(x, true)", "[[1], [2, 3]].all(l, l.all(x, x > 0))",
    # strings
    "self.s.startsWith('Ab')", "self.s.endsWith('/c')", "self.s.contains('b/')",
    "self.s.matches('^[A-Z]')", "self.s.matches('x')", "matches(self.s, 'b')",
    "self.s.lowerAscii()", "self.s.upperAscii()", "'  a b  '.trim()", "self.s.startsWith(1)",
    "self.i.startsWith('a')", "'abc'.matches('a.c')", "'a1b2'.matches('^[a-z0-9]+$')",
    # conversions
    "int('42')", "int('-7')", "int('x')", "int(2.9)", "int(-2.9)", "int(1e19)", "int(7u)",
    "int(true)", "uint(3)", "uint(-1)", "uint('5')", "double(1)", "double('1e3')", "double('x')",
    "string(12)", "string(-3)", "string(true)", "string(1.5)", "string(1.0)", "string(1e20)",
    "string(0.1)", "string(7u)", "string('s')", "bool('true')", "bool('false')", "bool('x')",
    "bool(true)", "string([1])",
    # types (int-or-string rules ask which one they got)
    "type(1) == int", "type(self.s) == string", "type(self.i) == string", "type(1u) == uint",
    "type(1.5) == double", "type(null) == null_type", "type([]) == list", "type({}) == map",
    "type(true) == bool", "type(int) == type", "type(type(1)) == type", "int == int",
    "int != string", "dyn(1) + 1", "type(self.l) == list ? size(self.l) : 0",
    "self.l.all(x, type(x) == int)",
    # transition-rule shapes
    "self == oldSelf", "self.i == oldSelf.i", "self.s == oldSelf.s",
    "has(self.i) == has(oldSelf.i)",
]


def oracle(expr):
    """('syntax', None) | ('error', message) | ('value', (type name, plain value))."""
    try:
        program = ENV.compile(expr, disable_check=True)
    except Exception as e:  # the binding raises RuntimeError for parse errors
        return "syntax", str(e)
    value = program.eval(data=DATA)
    kind = value.type().name()
    if kind == "ERROR":
        return "error", value.plain_value()
    if kind == "TYPE":  # a type value: its name, as cel.py's mine() gives it
        return "value", (kind, value.plain_value().name().split("<")[0])
    return "value", (kind, value.plain_value())


TYPE_NAMES = {"int": "INT", "uint": "UINT", "double": "DOUBLE", "string": "STRING",
              "bool": "BOOL", "null_type": "NULL", "list": "LIST", "map": "MAP", "type": "TYPE"}


def mine(expr):
    try:
        program = cel.compile_rule(expr)
    except cel.CelSyntaxError as e:
        return "syntax", str(e)
    try:
        value = program.evaluate(DATA)
    except cel.CelEvalError as e:
        return "error", str(e)
    if isinstance(value, cel.CelType):
        return "value", ("TYPE", TYPE_NAMES[value.name])
    return "value", (TYPE_NAMES[cel.type_name(value)], value)


def same_value(a, b):
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, float) and isinstance(b, float)):
            return False
        return (math.isnan(a) and math.isnan(b)) or (a == b and
                                                      math.copysign(1, a) == math.copysign(1, b))
    if type(a) is not type(b) and not (isinstance(a, int) and isinstance(b, int) and
                                       not isinstance(a, bool) and not isinstance(b, bool)):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return a == b


def agree(expr):
    """None when cel.py and the oracle agree on `expr`, else a description."""
    theirs, ours = oracle(expr), mine(expr)
    if ours[0] == "syntax":
        # Refused at compile time: the oracle must fail as well (on unchecked expressions an
        # unknown function is its run-time "no matching overload").
        if theirs[0] == "syntax" or (theirs[0] == "error" and "overload" in str(theirs[1])):
            return None
    elif theirs[0] == ours[0] == "error":
        return None
    elif theirs[0] == ours[0] == "value":
        if theirs[1][0].startswith(ours[1][0]) and same_value(theirs[1][1], ours[1][1]):
            return None
    return f"{expr!r}: oracle {theirs}, cel.py {ours}"


# ---------------------------------------------------------------- random expressions

LEAVES = ["0", "1", "2", "-3", "7", "9223372036854775807", "-9223372036854775807", "3u", "0u",
          "1.5", "0.0", "-2.5", "'a'", "'bc'", "''", "true", "false", "null", "self.i",
          "self.n", "self.z", "self.big", "self.d", "self.s", "self.e", "self.t", "self.l",
          "self.ls", "self.m", "self.missing", "self.nul", "self.o.p.q", "[1, 2]", "{'k': 1}",
          "int", "string", "null_type"]
BINARY = ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "in"]


def random_expr(rng, depth=0):
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(LEAVES)
    r = rng.random()
    sub = lambda: random_expr(rng, depth + 1)  # noqa: E731
    if r < 0.40:
        return f"({sub()} {rng.choice(BINARY)} {sub()})"
    if r < 0.48:
        return f"{rng.choice(['!', '-'])}{sub()}"
    if r < 0.55:
        return f"({sub()} ? {sub()} : {sub()})"
    if r < 0.62:
        return f"size({sub()})"
    if r < 0.68:
        return f"{rng.choice(['int', 'uint', 'double', 'string', 'type', 'dyn'])}({sub()})"
    if r < 0.74:
        field = rng.choice(["i", "s", "l", "missing", "o", "nul"])
        return f"has(self.{field})"
    if r < 0.80:
        return f"{sub()}[{sub()}]"
    if r < 0.88:
        macro = rng.choice(["all", "exists", "exists_one", "filter", "map"])
        # Map iteration order is unspecified: map/filter over maps only under size().
        target = rng.choice(["self.l", "self.ls", "self.m", "[0, 1, 2]", sub()])
        out = f"{target}.{macro}(x, {random_expr(rng, depth + 1).replace('self.i', 'x')})"
        return f"size({out})" if macro in ("map", "filter") else out
    method = rng.choice(["startsWith", "endsWith", "contains"])
    return f"{sub()}.{method}({sub()})"


class CelOracleTest(unittest.TestCase):
    count = 3000
    seed = 1

    def test_crd_rules(self):
        rules = []

        def walk(node):
            if isinstance(node, dict):
                rules.extend(r["rule"] for r in node.get("x-kubernetes-validations", []))
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        for name in ("modeldeployments", "modelpools"):
            with open(os.path.join(ROOT, f"crds/tandem.dev_{name}.yaml")) as f:
                walk(yaml.safe_load(f))
        self.assertGreater(len(rules), 10)
        for rule in rules:
            theirs = oracle(rule)
            self.assertNotEqual(theirs[0], "syntax", rule)  # Google's CEL parses every rule
            cel.compile_rule(rule)

    def test_crd_rules_on_admitted_examples(self):
        # Every rule of the ModelDeployment CRD, evaluated on each admitted example by both.
        with open(os.path.join(ROOT, "crds/tandem.dev_modeldeployments.yaml")) as f:
            crd = yaml.safe_load(f)
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        spec_schema = schema["properties"]["spec"]
        for name in ("kimi-k2.6", "glm-5.2", "tiny-cpu"):
            with open(os.path.join(ROOT, f"deploy/examples/{name}.yaml")) as f:
                obj = yaml.safe_load(f)
            self.assertEqual(crd_schema.admit(schema, obj), [])
            spec = obj["spec"]
            for rule in [r["rule"] for r in spec_schema.get("x-kubernetes-validations", [])]:
                theirs = ENV.compile(rule, disable_check=True).eval(data={"self": spec})
                self.assertEqual(theirs.plain_value(), True, rule)
                self.assertIs(cel.compile_rule(rule).evaluate({"self": spec}), True)

    def test_corpus(self):
        problems = [p for p in map(agree, CORPUS) if p]
        self.assertEqual(problems, [], "\n".join(problems))

    def test_random_expressions(self):
        rng = random.Random(self.seed)
        problems, kinds = [], {"syntax": 0, "error": 0, "value": 0}
        for _ in range(self.count):
            expr = random_expr(rng)
            kinds[mine(expr)[0]] += 1
            p = agree(expr)
            if p:
                problems.append(p)
        print(f"random expressions: {self.count}, outcomes {kinds}", file=sys.stderr)
        self.assertGreater(kinds["value"], self.count // 5)  # not all errors
        self.assertEqual(problems[:20], [], f"{len(problems)} disagreements")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=CelOracleTest.count)
    parser.add_argument("--seed", type=int, default=CelOracleTest.seed)
    args, rest = parser.parse_known_args()
    CelOracleTest.count, CelOracleTest.seed = args.count, args.seed
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=1)
