"""A small Common Expression Language (CEL) evaluator for CRD `x-kubernetes-validations` rules.

Covers what tandem's CRDs use and the common rest of Kubernetes' CEL: int/uint/double/string/
bool/null/list/map literals; `self`, `oldSelf` and macro variables; field select, `has()`,
indexing; `size`, `in`, `! && ||` (with CEL's error-absorbing short circuit), comparisons,
arithmetic with CEL int semantics (int64 overflow is an error, division truncates, `%` takes the
dividend's sign, no int/double mixing), `?:`; the `all`, `exists`, `exists_one`, `map`, `filter`
macros; string `startsWith endsWith contains matches lowerAscii upperAscii trim`; `int()`,
`double()`, `string()` conversions, `type()`, `dyn()` and the type names (`type(self) == string`
for int-or-string fields). Not covered: bytes, timestamps, durations,
optional types, `quantity()` and other Kubernetes libraries; they are compile errors, so a CRD
using them is rejected when registered instead of crashing at admission.

    program = compile_rule("self.minReplicas <= self.maxReplicas")   # raises CelSyntaxError
    program.evaluate({"self": {...}})                                   # raises CelEvalError
    program.uses_old_self                                               # a transition rule?
"""
import math
import re

from cel_parse import (INT64_MAX, INT64_MIN, UINT64_MAX, CelEvalError, CelSyntaxError, CelType,
                       Parser, UInt)

__all__ = ["CelEvalError", "CelSyntaxError", "CelType", "Program", "UInt", "cel_equal",
           "compile_rule", "type_name"]


class Program:
    """A compiled rule. evaluate() takes {"self": value, "oldSelf": value} (CEL values made from
    JSON: dict, list, str, int, float, bool, None)."""

    def __init__(self, text):
        parser = Parser(text)
        self.text = text
        self.ast = parser.parse()
        self.uses_old_self = parser.uses_old_self

    def evaluate(self, activation):
        return _Evaluator(activation).eval(self.ast)


def compile_rule(text):
    if not isinstance(text, str) or not text.strip():
        raise CelSyntaxError("empty rule")
    return Program(text)


# ---------------------------------------------------------------- evaluator

def type_name(v):
    if v is None:
        return "null_type"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, UInt):
        return "uint"
    if isinstance(v, CelType):
        return "type"
    return {int: "int", float: "double", str: "string", list: "list", dict: "map"}.get(
        type(v), type(v).__name__)


def _numeric(v):
    return type(v) in (int, float, UInt)


def cel_equal(a, b):
    if _numeric(a) and _numeric(b):
        return a == b  # CEL compares numbers across int/uint/double by value
    if type_name(a) != type_name(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(cel_equal(a[k], b[k]) for k in a)
    return a == b


def _check_int(v, kind):
    lo, hi = (0, UINT64_MAX) if kind == "uint" else (INT64_MIN, INT64_MAX)
    if not lo <= v <= hi:
        raise CelEvalError(f"{kind} overflow")
    return UInt(v) if kind == "uint" else v


def _arith(op, a, b):
    ta, tb = type_name(a), type_name(b)
    if op == "+" and ta == tb and ta in ("string", "list"):
        return a + b
    if ta != tb or ta not in ("int", "uint", "double"):
        raise CelEvalError(f"no such overload: {ta} {op} {tb}")
    if ta == "double":
        if op == "%":
            raise CelEvalError("no such overload: double % double")
        if op == "/":
            if b == 0:
                return float("nan") if a == 0 else (float("inf") if a > 0 else float("-inf"))
            return a / b
        return {"+": a + b, "-": a - b, "*": a * b}[op]
    if op in ("/", "%"):
        if b == 0:
            raise CelEvalError("division by zero" if op == "/" else "modulus by zero")
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # truncate toward zero
        _check_int(q, ta)  # INT64_MIN / -1 overflows, and so does INT64_MIN % -1
        return _check_int(q if op == "/" else a - q * b, ta)
    return _check_int({"+": a + b, "-": a - b, "*": a * b}[op], ta)


def _compare(op, a, b):
    ta, tb = type_name(a), type_name(b)
    if not ((_numeric(a) and _numeric(b)) or (ta == tb and ta in ("string", "bool"))):
        raise CelEvalError(f"no such overload: {ta} {op} {tb}")
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _select(target, field):
    if not isinstance(target, dict):
        raise CelEvalError(f"type '{type_name(target)}' does not support field selection")
    if field not in target:
        raise CelEvalError(f"no such key: {field}")
    return target[field]


def _index(target, key):
    if isinstance(target, list):
        if type(key) is float and key.is_integer():
            key = int(key)  # heterogeneous numbers: [a, b][1.0] is [a, b][1]
        if type(key) not in (int, UInt):
            raise CelEvalError(f"no such overload: list[{type_name(key)}]")
        if not 0 <= key < len(target):
            raise CelEvalError(f"index out of bounds: {key}")
        return target[int(key)]
    if isinstance(target, dict):
        if type_name(key) not in ("int", "uint", "double", "string", "bool"):
            raise CelEvalError(f"no such overload: map[{type_name(key)}]")
        for k, v in target.items():
            if cel_equal(k, key):
                return v
        raise CelEvalError(f"no such key: {key}")
    raise CelEvalError(f"no such overload: {type_name(target)}[{type_name(key)}]")


def _size(v):
    if isinstance(v, (str, list, dict)):
        return len(v)
    raise CelEvalError(f"no such overload: size({type_name(v)})")


def _string_method(name, target, args):
    if not isinstance(target, str) or any(not isinstance(a, str) for a in args):
        raise CelEvalError(f"no such overload: {type_name(target)}.{name}")
    want = 0 if name in ("lowerAscii", "upperAscii", "trim") else 1
    if len(args) != want:
        raise CelEvalError(f"{name} takes {want} argument(s)")
    if name == "startsWith":
        return target.startswith(args[0])
    if name == "endsWith":
        return target.endswith(args[0])
    if name == "contains":
        return args[0] in target
    if name == "matches":
        try:
            return re.search(args[0], target) is not None
        except re.error as e:
            raise CelEvalError(f"invalid regular expression {args[0]!r}: {e}") from None
    if name == "lowerAscii":
        return "".join(c.lower() if c.isascii() else c for c in target)
    if name == "upperAscii":
        return "".join(c.upper() if c.isascii() else c for c in target)
    return target.strip()


INT_TEXT = re.compile(r"^[+-]?[0-9]+$")
DOUBLE_TEXT = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$|^[+-]?(inf|infinity|nan)$",
                         re.IGNORECASE)


def _format_double(v):
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    if v.is_integer() and abs(v) < 1e16:
        return ("-" if math.copysign(1, v) < 0 else "") + str(int(abs(v)))
    return repr(v)


def _to_integer(name, v):
    if isinstance(v, str):
        if not INT_TEXT.match(v):
            raise CelEvalError(f"{name}() cannot convert string {v!r}")
        v = int(v)
    elif isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise CelEvalError(f"{name}() of a non-finite double")
        v = int(v)  # truncates toward zero
    elif not (_numeric(v) or (isinstance(v, bool) and name == "int")):  # int(true) is 1
        raise CelEvalError(f"no such overload: {name}({type_name(v)})")
    return _check_int(int(v), name)


def _convert(name, v):
    if name in ("int", "uint"):
        return _to_integer(name, v)
    if name == "double":
        if isinstance(v, str):
            if not DOUBLE_TEXT.match(v):
                raise CelEvalError(f"double() cannot convert string {v!r}")
            return float(v)
        if isinstance(v, bool) or not _numeric(v):
            raise CelEvalError(f"no such overload: double({type_name(v)})")
        return float(v)
    if name == "bool":
        if isinstance(v, bool):
            return v
        if v in ("true", "True", "TRUE", "t", "1"):
            return True
        if v in ("false", "False", "FALSE", "f", "0"):
            return False
        raise CelEvalError(f"bool() cannot convert {v!r}")
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _format_double(v)
    if isinstance(v, (str, int)):
        return str(v)
    raise CelEvalError(f"no such overload: string({type_name(v)})")


def _bool(v, op):
    if not isinstance(v, bool):
        raise CelEvalError(f"no such overload: {op} on {type_name(v)}")
    return v


class _Evaluator:
    def __init__(self, activation):
        self.vars = dict(activation)

    def eval(self, node):
        return getattr(self, "_" + node[0])(*node[1:])

    def _lit(self, v):
        return v

    def _ident(self, name):
        if name not in self.vars:
            raise CelEvalError(f"no such attribute: {name}")
        return self.vars[name]

    def _select(self, operand, field):
        return _select(self.eval(operand), field)

    def _has(self, operand, field):
        target = self.eval(operand)
        if not isinstance(target, dict):
            raise CelEvalError(f"has() on a {type_name(target)}")
        return field in target

    def _index(self, operand, key):
        return _index(self.eval(operand), self.eval(key))

    def _list(self, items):
        return [self.eval(i) for i in items]

    def _map(self, entries):
        out = {}
        for k, v in entries:
            key = self.eval(k)
            if type_name(key) not in ("string", "int", "uint", "bool"):
                raise CelEvalError(f"unsupported map key type {type_name(key)}")
            out[key] = self.eval(v)
        return out

    def _unary(self, op, operand):
        v = self.eval(operand)
        if op == "!":
            return not _bool(v, "!")
        if type_name(v) == "int":
            return _check_int(-v, "int")
        if type_name(v) == "double":
            return -v
        raise CelEvalError(f"no such overload: -{type_name(v)}")

    def _logic(self, op, left, right):
        # CEL's commutative && / ||: a definite result on either side wins over an error.
        decisive = op == "||"
        try:
            a = _bool(self.eval(left), op)
        except CelEvalError as e:
            b = _bool(self.eval(right), op)
            if b == decisive:
                return b
            raise e
        if a == decisive:
            return a
        return _bool(self.eval(right), op)

    def _binary(self, op, left, right):
        if op in ("&&", "||"):
            return self._logic(op, left, right)
        a, b = self.eval(left), self.eval(right)
        if op == "==":
            return cel_equal(a, b)
        if op == "!=":
            return not cel_equal(a, b)
        if op == "in":
            if isinstance(b, list):
                return any(cel_equal(a, x) for x in b)
            if isinstance(b, dict):
                if type_name(a) not in ("int", "uint", "double", "string", "bool"):
                    raise CelEvalError(f"no such overload: {type_name(a)} in map")
                return any(cel_equal(a, k) for k in b)
            raise CelEvalError(f"no such overload: {type_name(a)} in {type_name(b)}")
        if op in ("<", "<=", ">", ">="):
            return _compare(op, a, b)
        return _arith(op, a, b)

    def _cond(self, c, a, b):
        return self.eval(a) if _bool(self.eval(c), "?:") else self.eval(b)

    def _call(self, name, target, args):
        values = [self.eval(a) for a in args]
        if target is not None:
            t = self.eval(target)
            if name == "size":
                if values:
                    raise CelEvalError("size() takes no arguments as a method")
                return _size(t)
            return _string_method(name, t, values)
        if len(values) != (2 if name == "matches" else 1):
            raise CelEvalError(f"wrong number of arguments to {name}()")
        if name == "size":
            return _size(values[0])
        if name == "matches":
            return _string_method("matches", values[0], values[1:])
        if name == "type":
            return CelType(type_name(values[0]))
        if name == "dyn":
            return values[0]
        return _convert(name, values[0])

    def _macro(self, name, target, var, body, transform):
        collection = self.eval(target)
        if isinstance(collection, dict):
            elements = list(collection.keys())
        elif isinstance(collection, list):
            elements = collection
        else:
            raise CelEvalError(f"{name}() on a {type_name(collection)}")
        saved = self.vars.get(var, _MISSING)
        try:
            return self._run_macro(name, elements, var, body, transform)
        finally:
            if saved is _MISSING:
                self.vars.pop(var, None)
            else:
                self.vars[var] = saved

    def _run_macro(self, name, elements, var, body, transform):
        results, error = [], None
        for e in elements:
            self.vars[var] = e
            if name == "map":
                if transform is None:
                    results.append(self.eval(body))
                elif _bool(self.eval(body), "map"):
                    results.append(self.eval(transform))
                continue
            try:
                ok = _bool(self.eval(body), name)
            except CelEvalError as err:  # all/exists absorb errors when another element decides
                if name in ("all", "exists"):
                    error = error or err
                    continue
                raise
            if name == "all" and not ok:
                return False
            if name == "exists" and ok:
                return True
            if ok:
                results.append(e)
        if error is not None:
            raise error
        if name == "all":
            return True
        if name == "exists":
            return False
        if name == "exists_one":
            return len(results) == 1
        return results


_MISSING = object()
