"""A subset of CEL (the Common Expression Language) for ValidatingAdmissionPolicy (vap.py).

What the subset holds, with CEL's meaning: literals (strings in '' or "", integers, true,
false, null, lists [a, b]), the variables the caller gives, field selection `a.b` and indexing
`a[k]` (a missing key is an error, "no such key"), the macro `has(a.b)` (presence of a field),
`k in map` / `x in list`, == != < <= > >=, ! and unary -, + (numbers, strings, lists), && and
|| with CEL's error absorption (`false && error` is false, `true || error` is true), `c ? a :
b`, and the functions size(x) / x.size(), x.startsWith(s), x.endsWith(s), x.contains(s),
x.matches(re). Anything else fails to parse or evaluate with a CelError naming it, so a
policy using more of CEL is refused as a failed expression, never silently passed.
"""
import re


class CelError(Exception):
    pass


_TOKEN = re.compile(r"""\s*(?:
    (?P<num>\d+)
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<op>&&|\|\||==|!=|<=|>=|[-+!<>?:.,()\[\]])
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
)""", re.X)


def _tokens(src):
    out, pos = [], 0
    src = src.rstrip()
    while pos < len(src):
        while src[pos].isspace():
            pos += 1
        m = _TOKEN.match(src, pos)
        if not m or m.end() == pos:
            raise CelError("Syntax error: unexpected character %r at %d" % (src[pos:pos + 1] or src[pos:], pos))
        pos = m.end()
        kind = m.lastgroup
        val = m.group(kind)
        if kind == "str":
            val = re.sub(r"\\(.)", lambda e: {"n": "\n", "t": "\t"}.get(e.group(1), e.group(1)), val[1:-1])
        elif kind == "num":
            val = int(val)
        out.append((kind, val))
    out.append(("end", None))
    return out


class _Parser(object):
    """Recursive descent into tuples: ("lit", v) ("var", name) ("sel", e, f) ("idx", e, k)
    ("has", e, f) ("call", name, target|None, [args]) ("un", op, e) ("bin", op, a, b)
    ("and", a, b) ("or", a, b) ("cond", c, a, b) ("list", [e])."""

    def __init__(self, src):
        self.t, self.i = _tokens(src), 0

    def peek(self, v=None):
        k, val = self.t[self.i]
        return val if v is None else (k == "op" and val == v) or (k == "id" and val == v)

    def take(self, v=None):
        k, val = self.t[self.i]
        if v is not None and not ((k in ("op", "id")) and val == v):
            raise CelError("Syntax error: expected %r, found %r" % (v, val))
        self.i += 1
        return k, val

    def parse(self):
        e = self.cond()
        if self.t[self.i][0] != "end":
            raise CelError("Syntax error: unexpected %r" % (self.t[self.i][1],))
        return e

    def cond(self):
        c = self.or_()
        if self.peek("?"):
            self.take("?")
            a = self.cond()
            self.take(":")
            return ("cond", c, a, self.cond())
        return c

    def or_(self):
        e = self.and_()
        while self.peek("||"):
            self.take()
            e = ("or", e, self.and_())
        return e

    def and_(self):
        e = self.rel()
        while self.peek("&&"):
            self.take()
            e = ("and", e, self.rel())
        return e

    def rel(self):
        e = self.add()
        for op in ("==", "!=", "<=", ">=", "<", ">", "in"):
            if self.peek(op):
                self.take()
                return ("bin", op, e, self.add())
        return e

    def add(self):
        e = self.unary()
        while self.peek("+") or self.peek("-"):
            _, op = self.take()
            e = ("bin", op, e, self.unary())
        return e

    def unary(self):
        if self.peek("!") or self.peek("-"):
            _, op = self.take()
            return ("un", op, self.unary())
        return self.member()

    def args(self):
        self.take("(")
        out = []
        while not self.peek(")"):
            out.append(self.cond())
            if not self.peek(")"):
                self.take(",")
        self.take(")")
        return out

    def member(self):
        e = self.primary()
        while True:
            if self.peek("."):
                self.take()
                k, name = self.take()
                if k != "id":
                    raise CelError("Syntax error: a field name after '.', found %r" % (name,))
                e = ("call", name, e, self.args()) if self.peek("(") else ("sel", e, name)
            elif self.peek("["):
                self.take()
                k = self.cond()
                self.take("]")
                e = ("idx", e, k)
            else:
                return e

    def primary(self):
        k, v = self.take()
        if k in ("num", "str"):
            return ("lit", v)
        if k == "op" and v == "(":
            e = self.cond()
            self.take(")")
            return e
        if k == "op" and v == "[":
            items = []
            while not self.peek("]"):
                items.append(self.cond())
                if not self.peek("]"):
                    self.take(",")
            self.take("]")
            return ("list", items)
        if k == "id":
            if v in ("true", "false", "null"):
                return ("lit", {"true": True, "false": False, "null": None}[v])
            if self.peek("("):
                if v == "has":
                    self.take("(")
                    arg = self.member()
                    self.take(")")
                    if arg[0] != "sel":
                        raise CelError("has() needs a field selection: has(a.b)")
                    return ("has", arg[1], arg[2])
                return ("call", v, None, self.args())
            return ("var", v)
        raise CelError("Syntax error: unexpected %r" % (v,))


def compile_expr(src):
    """The parsed expression, or CelError (what the API server reports at policy creation)."""
    return _Parser(src).parse()


def _type(v):
    return {bool: "bool", int: "int", str: "string", list: "list", dict: "map", type(None): "null_type"}.get(
        type(v), type(v).__name__)


def evaluate(ast, env):
    """The value of a compiled expression with the variables `env`; CelError on an error."""
    op = ast[0]
    if op == "lit":
        return ast[1]
    if op == "list":
        return [evaluate(e, env) for e in ast[1]]
    if op == "var":
        if ast[1] not in env:
            raise CelError("undeclared reference to '%s'" % ast[1])
        return env[ast[1]]
    if op in ("sel", "has"):
        base = evaluate(ast[1], env)
        if not isinstance(base, dict):
            raise CelError("no such key: %s" % ast[2] if base is None else
                           "type '%s' does not support field selection" % _type(base))
        if op == "has":
            return ast[2] in base
        if ast[2] not in base:
            raise CelError("no such key: %s" % ast[2])
        return base[ast[2]]
    if op == "idx":
        base, key = evaluate(ast[1], env), evaluate(ast[2], env)
        if isinstance(base, dict):
            if key not in base:
                raise CelError("no such key: %s" % key)
            return base[key]
        if isinstance(base, list) and isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(base):
                raise CelError("index out of bounds: %d" % key)
            return base[key]
        raise CelError("no such overload: %s[%s]" % (_type(base), _type(key)))
    if op in ("and", "or"):
        stop = op == "or"  # the value that decides: true for ||, false for &&
        err = None
        for side in (ast[1], ast[2]):
            try:
                v = evaluate(side, env)
            except CelError as e:
                err = err or e
                continue
            if not isinstance(v, bool):
                err = err or CelError("no such overload: %s %s" % (_type(v), "||" if stop else "&&"))
                continue
            if v is stop:
                return stop
        if err:
            raise err
        return not stop
    if op == "cond":
        c = evaluate(ast[1], env)
        if not isinstance(c, bool):
            raise CelError("no such overload: %s ? _ : _" % _type(c))
        return evaluate(ast[2] if c else ast[3], env)
    if op == "un":
        v = evaluate(ast[2], env)
        if ast[1] == "!" and isinstance(v, bool):
            return not v
        if ast[1] == "-" and isinstance(v, int) and not isinstance(v, bool):
            return -v
        raise CelError("no such overload: %s%s" % (ast[1], _type(v)))
    if op == "bin":
        a, b = evaluate(ast[2], env), evaluate(ast[3], env)
        o = ast[1]
        if o == "in":
            if isinstance(b, (dict, list)):
                return a in b
            raise CelError("no such overload: %s in %s" % (_type(a), _type(b)))
        if o in ("==", "!="):
            same = _type(a) == _type(b) and a == b
            return same if o == "==" else not same
        if _type(a) != _type(b) or _type(a) not in ("int", "string", "list") or \
                (o != "+" and _type(a) == "list") or (o == "-" and _type(a) != "int"):
            raise CelError("no such overload: %s %s %s" % (_type(a), o, _type(b)))
        return {"<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
                "+": lambda: a + b, "-": lambda: a - b}[o]()
    if op == "call":
        name, target = ast[1], ast[2]
        args = [evaluate(e, env) for e in ast[3]]
        if target is not None:
            args.insert(0, evaluate(target, env))
        if name == "size" and len(args) == 1 and isinstance(args[0], (str, list, dict)):
            return len(args[0])
        if name in ("startsWith", "endsWith", "contains", "matches") and len(args) == 2 and \
                target is not None and all(isinstance(x, str) for x in args):
            s, x = args
            if name == "matches":
                return re.search(x, s) is not None
            return {"startsWith": s.startswith, "endsWith": s.endswith, "contains": s.__contains__}[name](x)
        if name == "split" and len(args) == 2 and target is not None and \
                all(isinstance(x, str) for x in args):  # Kubernetes' strings extension
            return args[0].split(args[1]) if args[1] else list(args[0])
        raise CelError("found no matching overload for '%s' applied to '(%s)'"
                       % (name, ", ".join(_type(x) for x in args)))
    raise CelError("cannot evaluate %r" % (op,))
