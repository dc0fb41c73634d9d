#!/usr/bin/env python3
"""cel.py, the CEL subset kube-sim evaluates x-kubernetes-validations rules with: literals, CEL's
int semantics, error-absorbing logic, fields and macros, string functions, oldSelf, and syntax
refused at compile time. Run alone or through test_crd_schema.py (ctest -R kube_sim.crd_schema).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cel  # noqa: E402


class CelTest(unittest.TestCase):
    def ev(self, text, self_value=None, old=None):
        act = {"self": self_value}
        if old is not None:
            act["oldSelf"] = old
        return cel.compile_rule(text).evaluate(act)

    def eval_error(self, text, self_value=None):
        with self.assertRaises(cel.CelEvalError):
            self.ev(text, self_value)

    def test_literals_and_strings(self):
        self.assertEqual(self.ev("0x10 + 1"), 17)
        self.assertEqual(self.ev("1.5e1"), 15.0)
        self.assertEqual(self.ev(r"'a\tb' + " + '"\\u00e9"'), "a\tb\u00e9")
        self.assertEqual(self.ev(r"r'\d+'"), r"\d+")
        self.assertEqual(self.ev("'''multi\nline'''"), "multi\nline")
        self.assertIsNone(self.ev("null"))
        self.assertEqual(self.ev("[1, 'a', true, [null]]"), [1, "a", True, [None]])
        self.assertEqual(self.ev("{'a': 1, 2: 'b'}[2]"), "b")
        self.assertEqual(self.ev("5u + 1u"), 6)
        self.assertEqual(self.ev("-9223372036854775808"), -(2**63))

    def test_unary_runs(self):
        # CEL's grammar: runs of one unary operator; pairs cancel without a type check.
        self.assertEqual(self.ev("--3"), 3)
        self.assertEqual(self.ev("!!'x'"), "x")
        self.assertFalse(self.ev("!!!true"))
        self.assertEqual(self.ev("[-1, - 2][1]"), -2)  # `-` then a number is a literal
        self.eval_error("!-1")  # parses (! of the literal -1), but ! wants a bool
        for bad in ["!-true", "-!true", "!-self"]:
            with self.assertRaises(cel.CelSyntaxError, msg=bad):
                cel.compile_rule(bad)
        self.eval_error("-3u")  # no negative uint literal: negation of a uint
        self.eval_error("-'a'")

    def test_int_semantics(self):
        self.assertEqual(self.ev("7 / 2"), 3)
        self.assertEqual(self.ev("-7 / 2"), -3)  # truncation, not floor
        self.assertEqual(self.ev("-7 % 3"), -1)  # the dividend's sign
        self.assertEqual(self.ev("7 % -3"), 1)
        self.assertEqual(self.ev("2 * 3 + 4 * 5 - 6 / 2"), 23)
        self.assertEqual(self.ev("(1 + 2) * 3"), 9)
        self.eval_error("9223372036854775807 + 1")
        self.eval_error("-9223372036854775807 - 2")
        self.eval_error("1 / 0")
        self.eval_error("1 % 0")
        self.eval_error("0u - 1u")
        self.eval_error("1 + 1.0")  # no implicit int/double arithmetic
        self.eval_error("1 + 1u")
        self.eval_error("'a' + 1")
        self.assertEqual(self.ev("1.0 / 0.0"), float("inf"))
        self.assertTrue(self.ev("1 == 1.0"))  # equality compares numbers by value
        self.assertTrue(self.ev("1 < 1.5"))
        self.assertFalse(self.ev("1 == true"))

    def test_logic_and_error_absorption(self):
        self.assertTrue(self.ev("true || self.missing", {}))
        self.assertTrue(self.ev("self.missing || true", {}))  # commutative, like CEL
        self.assertFalse(self.ev("self.missing && false", {}))
        self.eval_error("self.missing && true", {})
        self.eval_error("self.missing || false", {})
        self.assertFalse(self.ev("!true"))
        self.eval_error("!1")
        self.assertEqual(self.ev("self > 2 ? 'big' : 'small'", 3), "big")
        self.assertEqual(self.ev("true ? (false ? 1 : 2) : 3"), 2)
        self.assertEqual(self.ev("false ? 1 : true ? 2 : 3"), 2)  # right-associative
        with self.assertRaises(cel.CelSyntaxError):  # CEL: `or ? or : expr`
            cel.compile_rule("true ? false ? 1 : 2 : 3")
        self.eval_error("1 ? 2 : 3")

    def test_fields_has_index_size_in(self):
        obj = {"a": {"b": [10, 20]}, "m": {"k": "v"}}
        self.assertEqual(self.ev("self.a.b[1]", obj), 20)
        self.assertTrue(self.ev("has(self.a.b)", obj))
        self.assertFalse(self.ev("has(self.a.c)", obj))
        self.assertEqual(self.ev("size(self.a.b) + self.a.b.size() + size('héllo')", obj), 9)
        self.assertTrue(self.ev("'k' in self.m && 20 in self.a.b && !(3 in [1, 2])", obj))
        self.assertEqual(self.ev("self.m['k']", obj), "v")
        self.eval_error("self.a.b[2]", obj)
        self.eval_error("self.m['x']", obj)
        self.eval_error("self.a.b.c", obj)

    def test_macros(self):
        self.assertTrue(self.ev("self.all(x, x > 0)", [1, 2, 3]))
        self.assertFalse(self.ev("self.all(x, x > 1)", [1, 2, 3]))
        self.assertTrue(self.ev("self.exists(x, x == 2)", [1, 2, 3]))
        self.assertTrue(self.ev("self.exists_one(x, x > 2)", [1, 2, 3]))
        self.assertFalse(self.ev("self.exists_one(x, x > 1)", [1, 2, 3]))
        self.assertEqual(self.ev("self.map(x, x * 10)", [1, 2]), [10, 20])
        self.assertEqual(self.ev("self.map(x, x > 1, x * 10)", [1, 2]), [20])
        self.assertEqual(self.ev("self.filter(x, x % 2 == 1)", [1, 2, 3]), [1, 3])
        self.assertTrue(self.ev("self.all(k, k.startsWith('a'))", {"ab": 1, "ac": 2}))
        # A false element decides `all` even when another element errors.
        self.assertFalse(self.ev("self.all(x, x.v > 0)", [{}, {"v": 0}]))
        self.eval_error("self.all(x, x.v > 0)", [{}, {"v": 1}])
        self.assertTrue(self.ev("self.all(x, x.all(y, y > 0))", [[1], [2, 3]]))

    def test_string_functions(self):
        self.assertTrue(self.ev("self.startsWith('/models') && self.endsWith('k2')", "/models/k2"))
        self.assertTrue(self.ev("self.contains('del')", "/models"))
        self.assertTrue(self.ev("self.matches('^[a-z]+-[0-9]$')", "abc-1"))
        self.assertTrue(self.ev("matches(self, 'b')", "abc"))  # partial match, like RE2's
        self.assertEqual(self.ev("self.lowerAscii() + self.upperAscii()", "Ab"), "abAB")
        self.assertEqual(self.ev("int('42') + int(2.9)"), 44)
        self.assertEqual(self.ev("string(12) + string(true)"), "12true")
        self.assertEqual(self.ev("double(1)"), 1.0)
        self.eval_error("self.startsWith(1)", "x")
        self.eval_error("int('x')")
        self.eval_error("self.matches('(')", "x")

    def test_types(self):
        self.assertTrue(self.ev("type(self) == string ? self.endsWith('Gi') : self > 0", "40Gi"))
        self.assertTrue(self.ev("type(self) == string ? self.endsWith('Gi') : self > 0", 3))
        self.assertTrue(self.ev("type(1u) == uint && type(int) == type && int != string"))
        self.assertEqual(self.ev("dyn(2) * 2"), 4)
        self.assertEqual(self.ev("self.map(int, int + 1)", [1]), [2])  # a variable shadows it

    def test_old_self(self):
        self.assertTrue(cel.compile_rule("self == oldSelf").uses_old_self)
        self.assertFalse(cel.compile_rule("self.x == 1").uses_old_self)
        self.assertTrue(self.ev("self == oldSelf", {"a": [1]}, {"a": [1]}))
        self.assertFalse(self.ev("self == oldSelf", {"a": [1]}, {"a": [2]}))

    def test_syntax_errors_at_compile_time(self):
        for bad in ["", "self.", "1 +", "(1", "[1, 2", "{1: }", "self..a", "foo", "oldself",
                    "self.a(", "has(self)", "has(1)", "self.nosuch()", "quantity('1')",
                    "1 = 1", "self.all(1, true)", "'unterminated", "@", "'\\q'", "if",
                    "99999999999999999999", "self.map(x)", "x.all(y, true)"]:
            with self.assertRaises(cel.CelSyntaxError, msg=bad):
                cel.compile_rule(bad)

    def test_deep_nesting_is_a_syntax_error_not_a_crash(self):
        with self.assertRaises(cel.CelSyntaxError):
            cel.compile_rule("(" * 500 + "1" + ")" * 500)


if __name__ == "__main__":
    unittest.main(verbosity=1)
