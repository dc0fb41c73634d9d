"""A small Common Expression Language (CEL) evaluator for CRD `x-kubernetes-validations` rules.

Covers what tandem's CRDs use and the common rest of Kubernetes' CEL: int/uint/double/string/
bool/null/list/map literals; `self`, `oldSelf` and macro variables; field select, `has()`,
indexing; `size`, `in`, `! && ||` (with CEL's error-absorbing short circuit), comparisons,
arithmetic with CEL int semantics (int64 overflow is an error, division truncates, `%` takes the
dividend's sign, no int/double mixing), `?:`; the `all`, `exists`, `exists_one`, `map`, `filter`
macros; string `startsWith endsWith contains matches lowerAscii upperAscii trim`; `int()`,
`double()`, `string()`, `type()`-free conversions. Not covered: bytes, timestamps, durations,
optional types, `quantity()` and other Kubernetes libraries; they are compile errors, so a CRD
using them is rejected when registered instead of crashing at admission.

    program = compile_rule("self.minReplicas <= self.maxReplicas")   # raises CelSyntaxError
    program.evaluate({"self": {...}})                                   # raises CelEvalError
    program.uses_old_self                                               # a transition rule?
"""
import re

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1
MACROS = {"all", "exists", "exists_one", "map", "filter"}
METHODS = {"size", "startsWith", "endsWith", "contains", "matches", "lowerAscii", "upperAscii",
           "trim"}
GLOBALS = {"size", "has", "int", "uint", "double", "string", "bool", "matches"}
VARIABLES = {"self", "oldSelf"}
RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
            "loop", "package", "namespace", "return", "var", "void", "while"}


class CelSyntaxError(ValueError):
    """The rule does not parse or names something this evaluator does not know."""


class CelEvalError(ValueError):
    """Evaluation failed: no such key, no such overload, overflow, division by zero, ..."""


class UInt(int):
    """A CEL uint (a distinct type: 1u + 1 is an error)."""


# ---------------------------------------------------------------- tokenizer

TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<double>(?:\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?))
  | (?P<int>0[xX][0-9a-fA-F]+[uU]?|\d+[uU]?)
  | (?P<string>[rR]?(?:'''(?:.|\n)*?'''|\"\"\"(?:.|\n)*?\"\"\"|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|[<>!+\-*/%?:.,\[\](){}])
""", re.VERBOSE)

ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?",
           "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def _unescape(body, pos):
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1:i + 2]
        if nxt in ESCAPES:
            out.append(ESCAPES[nxt])
            i += 2
        elif nxt in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2:i + 2 + width]
            if len(digits) != width or not re.fullmatch(r"[0-9a-fA-F]+", digits):
                raise CelSyntaxError(f"bad escape \\{nxt} at {pos}")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            raise CelSyntaxError(f"bad escape \\{nxt} at {pos}")
    return "".join(out)


def tokenize(text):
    tokens, pos = [], 0
    while pos < len(text):
        m = TOKEN_RE.match(text, pos)
        if not m:
            raise CelSyntaxError(f"unexpected character {text[pos]!r} at {pos}")
        kind, value = m.lastgroup, m.group()
        if kind == "int":
            unsigned = value[-1] in "uU"
            digits = value[:-1] if unsigned else value
            number = int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
            limit = UINT64_MAX if unsigned else INT64_MAX + 1  # -9223372036854775808 parses
            if number > limit:
                raise CelSyntaxError(f"integer literal {value} out of range")
            tokens.append(("lit", UInt(number) if unsigned else number, pos))
        elif kind == "double":
            tokens.append(("lit", float(value), pos))
        elif kind == "string":
            raw = value[0] in "rR"
            quoted = value[1:] if raw else value
            q = 3 if quoted[:3] in ("'''", '"""') else 1
            body = quoted[q:-q]
            tokens.append(("lit", body if raw else _unescape(body, pos), pos))
        elif kind == "ident":
            if value in ("true", "false"):
                tokens.append(("lit", value == "true", pos))
            elif value == "null":
                tokens.append(("lit", None, pos))
            elif value == "in":
                tokens.append(("op", "in", pos))
            elif value in RESERVED:
                raise CelSyntaxError(f"reserved identifier {value!r} at {pos}")
            else:
                tokens.append(("ident", value, pos))
        elif kind == "op":
            tokens.append(("op", value, pos))
        pos = m.end()
    tokens.append(("end", None, pos))
    return tokens


# ---------------------------------------------------------------- parser (Pratt)
# AST nodes are tuples: ("lit", v) ("ident", name) ("select", operand, field) ("has", operand,
# field) ("index", operand, key) ("call", name, target_or_None, [args]) ("list", [items])
# ("map", [(k, v)]) ("unary", op, operand) ("binary", op, left, right) ("cond", c, a, b)
# ("macro", name, target, var, body, transform_or_None)

BINARY_POWER = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "in": 3,
                "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}
MAX_DEPTH = 64


class _Parser:
    def __init__(self, text):
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0
        self.scopes = []  # macro variables in scope
        self.uses_old_self = False

    def peek(self, value=None):
        kind, v, _ = self.tokens[self.i]
        return kind == "op" and v == value if value is not None else (kind, v)

    def take(self, value=None):
        kind, v, pos = self.tokens[self.i]
        if value is not None and not (kind == "op" and v == value):
            shown = "end of input" if kind == "end" else repr(v)
            raise CelSyntaxError(f"expected {value!r} at {pos}, found {shown}")
        self.i += 1
        return kind, v, pos

    def parse(self):
        node = self.expr()
        kind, v, pos = self.tokens[self.i]
        if kind != "end":
            raise CelSyntaxError(f"unexpected {v!r} at {pos}")
        return node

    def expr(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise CelSyntaxError("expression nested too deeply")
        cond = self.binary(1)
        if self.peek("?"):
            self.take("?")
            a = self.expr()
            self.take(":")
            b = self.expr()
            cond = ("cond", cond, a, b)
        self.depth -= 1
        return cond

    def binary(self, min_power):
        left = self.unary()
        while True:
            kind, op = self.peek()
            power = BINARY_POWER.get(op) if kind == "op" else None
            if power is None or power < min_power:
                return left
            self.take()
            right = self.binary(power + 1)
            left = ("binary", op, left, right)

    def unary(self):
        if self.peek("!") or self.peek("-"):
            _, op, _ = self.take()
            operand = self.unary()
            if op == "-" and operand[0] == "lit" and type(operand[1]) in (int, float):
                if -operand[1] < INT64_MIN:
                    raise CelSyntaxError(f"integer literal -{operand[1]} out of range")
                return ("lit", -operand[1])
            return ("unary", op, operand)
        return self.postfix(self.primary())

    def args(self, closer):
        items = []
        while not self.peek(closer):
            items.append(self.expr())
            if not self.peek(closer):
                self.take(",")
        self.take(closer)
        return items

    def primary(self):
        kind, v, pos = self.take()
        if kind == "lit":
            negated = self.i >= 2 and self.tokens[self.i - 2][:2] == ("op", "-")
            if type(v) is int and v > INT64_MAX and not negated:
                raise CelSyntaxError(f"integer literal {v} out of range")
            return ("lit", v)
        if kind == "ident":
            if self.peek("("):
                self.take("(")
                if v == "has":
                    arg = self.expr()
                    self.take(")")
                    if arg[0] != "select":
                        raise CelSyntaxError("has() needs a field selection, e.g. has(self.x)")
                    return ("has", arg[1], arg[2])
                if v not in GLOBALS:
                    raise CelSyntaxError(f"undeclared reference to {v!r} (in container '')")
                return ("call", v, None, self.args(")"))
            if v not in VARIABLES and not any(v == s for s in self.scopes):
                raise CelSyntaxError(f"undeclared reference to {v!r} at {pos}")
            if v == "oldSelf":
                self.uses_old_self = True
            return ("ident", v)
        if v == "(":
            node = self.expr()
            self.take(")")
            return node
        if v == "[":
            return ("list", self.args("]"))
        if v == "{":
            entries = []
            while not self.peek("}"):
                key = self.expr()
                self.take(":")
                entries.append((key, self.expr()))
                if not self.peek("}"):
                    self.take(",")
            self.take("}")
            return ("map", entries)
        shown = "end of input" if kind == "end" else repr(v)
        raise CelSyntaxError(f"unexpected {shown} at {pos}")

    def postfix(self, node):
        while True:
            if self.peek("."):
                self.take(".")
                kind, name, pos = self.take()
                if kind != "ident":
                    raise CelSyntaxError(f"expected a field name at {pos}")
                if self.peek("("):
                    self.take("(")
                    node = self.method(node, name, pos)
                else:
                    node = ("select", node, name)
            elif self.peek("["):
                self.take("[")
                key = self.expr()
                self.take("]")
                node = ("index", node, key)
            else:
                return node

    def method(self, target, name, pos):
        if name in MACROS:
            kind, var, vpos = self.take()
            if kind != "ident":
                raise CelSyntaxError(f"{name}() needs a variable name first, at {vpos}")
            self.take(",")
            self.scopes.append(var)
            first = self.expr()
            transform = None
            if name in ("map",) and self.peek(","):
                self.take(",")
                transform = self.expr()
            self.scopes.pop()
            self.take(")")
            return ("macro", name, target, var, first, transform)
        if name not in METHODS:
            raise CelSyntaxError(f"undeclared reference to {name!r} at {pos}")
        return ("call", name, target, self.args(")"))


class Program:
    """A compiled rule. evaluate() takes {"self": value, "oldSelf": value} (CEL values made from
    JSON: dict, list, str, int, float, bool, None)."""

    def __init__(self, text):
        parser = _Parser(text)
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
        if type(key) not in (int, UInt):
            raise CelEvalError(f"no such overload: list[{type_name(key)}]")
        if not 0 <= key < len(target):
            raise CelEvalError(f"index out of bounds: {key}")
        return target[int(key)]
    if isinstance(target, dict):
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


def _convert(name, v):
    try:
        if name == "int":
            if isinstance(v, bool) or not (_numeric(v) or isinstance(v, str)):
                raise CelEvalError(f"no such overload: int({type_name(v)})")
            if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
                raise CelEvalError("int() of a non-finite double")
            return _check_int(int(v), "int")
        if name == "uint":
            if isinstance(v, bool) or not (_numeric(v) or isinstance(v, str)):
                raise CelEvalError(f"no such overload: uint({type_name(v)})")
            return _check_int(int(v), "uint")
        if name == "double":
            if isinstance(v, bool) or not (_numeric(v) or isinstance(v, str)):
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
    except (ValueError, OverflowError):
        raise CelEvalError(f"{name}() cannot convert {v!r}") from None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int, float)):
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
