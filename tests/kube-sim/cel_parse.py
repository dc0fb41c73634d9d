"""CEL tokenizer and Pratt parser for cel.py (which has the overview and the evaluator).

Compile time is where unknown syntax, functions and variables are refused: a rule that parses
here only meets run-time errors (CelEvalError) in the evaluator.
"""
import re

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1
MACROS = {"all", "exists", "exists_one", "map", "filter"}
METHODS = {"size", "startsWith", "endsWith", "contains", "matches", "lowerAscii", "upperAscii",
           "trim"}
GLOBALS = {"size", "has", "int", "uint", "double", "string", "bool", "matches", "type", "dyn"}
TYPE_NAMES = {"int", "uint", "double", "string", "bool", "list", "map", "null_type", "type"}
VARIABLES = {"self", "oldSelf"}
RESERVED = {"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
            "loop", "package", "namespace", "return", "var", "void", "while"}


class CelSyntaxError(ValueError):
    """The rule does not parse or names something this evaluator does not know."""


class CelEvalError(ValueError):
    """Evaluation failed: no such key, no such overload, overflow, division by zero, ..."""


class UInt(int):
    """A CEL uint (a distinct type: 1u + 1 is an error)."""


class CelType:
    """A type value: what type() returns and what `int`, `string`, ... name."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self):
        return hash(("CelType", self.name))

    def __repr__(self):
        return self.name


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


class Parser:
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
            a = self.binary(1)  # CEL: `or ? or : expr`, so a nested `?:` in the middle needs ()
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
        # CEL's grammar: `'!'+ member | '-'+ member | member`. A run of one operator is
        # parsed, pairs cancel (`!!x` is x, unchecked, as in cel-cpp), and `!-x` / `-!x` are
        # syntax errors unless `-` starts a negative number literal (`!-1`).
        if not (self.peek("!") or self.peek("-")) or self._negative_number():
            return self.member()
        _, op, pos = self.take()
        count = 1
        while self.peek(op) and not (op == "-" and self._negative_number()):
            self.take()
            count += 1
        if (self.peek("!") or self.peek("-")) and not self._negative_number():
            raise CelSyntaxError(f"unexpected {self.tokens[self.i][1]!r} after {op!r} at {pos}")
        operand = self.member()
        return ("unary", op, operand) if count % 2 else operand

    def _negative_number(self):
        kind, v, _ = self.tokens[self.i]
        if kind == "end":
            return False
        nxt = self.tokens[self.i + 1]
        return kind == "op" and v == "-" and nxt[0] == "lit" and type(nxt[1]) in (int, float)

    def member(self):
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
        if self._negative_number():
            self.take("-")
            _, v, pos = self.take()
            if type(v) is int and -v < INT64_MIN:
                raise CelSyntaxError(f"integer literal -{v} out of range")
            return ("lit", -v)
        kind, v, pos = self.take()
        if kind == "lit":
            if type(v) is int and v > INT64_MAX:
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
            in_scope = any(v == s for s in self.scopes)
            if v in TYPE_NAMES and not in_scope:
                return ("lit", CelType(v))
            if v not in VARIABLES and not in_scope:
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
