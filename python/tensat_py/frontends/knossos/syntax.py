"""Knossos ``.ks`` programs: s-expression reader, typed syntax tree, parser and printer.

The grammar is the informal one of knossos-ksc's ``SYNTAX.md`` (shared data
``knossos/SYNTAX.md.txt``): top-level ``def``, ``edef``, ``gdef`` and ``rule`` forms;
expressions are literals (``Integer`` ``42``, ``Float`` ``1.5`` / ``1e38``, ``Bool``
``true``/``false``, ``String`` ``"..."``), variables, ``(let BINDINGS BODY)`` with one
binding ``(x e)``, several ``((x e) (y f))`` or a tuple binding ``((a b) e)``,
``(lam (x : T) e)``, ``(if c t e)``, ``(assert c e)`` and calls ``(f a ...)`` of user
functions or prelude primitives (``build``, ``sumbuild``, ``index``, ``size``, ``tuple``,
``get$i$n``, ``add``, ...). Types: ``Integer Float Bool String``, ``(Vec T)``,
``(Tensor N T)``, ``(Tuple T ...)``, ``(Lam S T)``, ``(LM S T)``. Function names may be
structured (``[fwd [f Float]]``). Comments: ``;`` to end of line and nestable ``#| |#``
blocks; comments between top-level forms are kept and printed back.

Every syntax error is a :class:`KsSyntaxError` reading ``file:line:col: message``.

>>> prog = parse_text("(def f Float ((x : Float)) (mul x 2.0))", "f.ks")
>>> print(print_program(prog).strip())
(def f Float ((x : Float))
  (mul x 2.0))
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = [
    "KsSyntaxError",
    "Atom",
    "SList",
    "read",
    "KsType",
    "Const",
    "Var",
    "Call",
    "Let",
    "Lam",
    "If",
    "Assert",
    "Expr",
    "Def",
    "Edef",
    "Gdef",
    "RuleDecl",
    "Comment",
    "Program",
    "parse_text",
    "parse_file",
    "parse_type",
    "parse_expr",
    "print_program",
    "print_expr",
    "print_type",
]


class KsSyntaxError(ValueError):
    """A malformed ``.ks`` program; ``str()`` is ``file:line:col: message``."""

    def __init__(self, file: str, line: int, col: int, message: str) -> None:
        super().__init__(f"{file}:{line}:{col}: {message}")
        self.file, self.line, self.col, self.message = file, line, col, message


# --- s-expressions -------------------------------------------------------------------


@dataclass(frozen=True)
class Atom:
    """A token: ``text`` as written; ``string`` for ``"..."`` literals (unquoted text)."""

    text: str
    line: int
    col: int
    string: bool = False


@dataclass(frozen=True)
class SList:
    """``( ... )`` or ``[ ... ]`` (``bracket``) with its items."""

    items: tuple[Atom | SList, ...]
    line: int
    col: int
    bracket: bool = False


SExp = Atom | SList
_DELIMS = set('()[]; \t\r\n"')


def read(text: str, file: str) -> list[SExp | str]:
    """Top-level s-expressions of ``text``, with the comments between them as strings
    (their source text: ``; ...`` lines, ``#| ... |#`` blocks).

    Raises:
        KsSyntaxError: unbalanced brackets, an unterminated string or block comment.
    """
    out: list[SExp | str] = []
    stack: list[tuple[list[SExp], int, int, str]] = []
    i, line, col, n = 0, 1, 1, len(text)

    def adv(k: int) -> None:
        nonlocal i, line, col
        for ch in text[i : i + k]:
            if ch == "\n":
                line, col = line + 1, 1
            else:
                col += 1
        i += k

    while i < n:
        ch = text[i]
        if ch in " \t\r\n":
            adv(1)
        elif ch == ";":
            j = text.find("\n", i)
            j = n if j < 0 else j
            if not stack:
                out.append(text[i:j].rstrip())
            adv(j - i)
        elif text.startswith("#|", i):
            sl, sc, depth, j = line, col, 0, i
            while j < n:
                if text.startswith("#|", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("|#", j):
                    depth, j = depth - 1, j + 2
                    if depth == 0:
                        break
                else:
                    j += 1
            if depth:
                raise KsSyntaxError(file, sl, sc, "unterminated `#|` comment")
            if not stack:
                out.append(text[i:j])
            adv(j - i)
        elif ch in "([":
            stack.append(([], line, col, ch))
            adv(1)
        elif ch in ")]":
            if not stack:
                raise KsSyntaxError(file, line, col, f"unmatched `{ch}`")
            items, sl, sc, opener = stack.pop()
            if {"(": ")", "[": "]"}[opener] != ch:
                raise KsSyntaxError(file, line, col, f"`{ch}` closes `{opener}` of {sl}:{sc}")
            node = SList(tuple(items), sl, sc, opener == "[")
            adv(1)
            (stack[-1][0] if stack else out).append(node)
        elif ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise KsSyntaxError(file, line, col, "unterminated string")
            atom = Atom(text[i + 1 : j], line, col, True)
            adv(j + 1 - i)
            (stack[-1][0] if stack else out).append(atom)
        else:
            j = i
            while j < n and text[j] not in _DELIMS:
                j += 1
            atom = Atom(text[i:j], line, col)
            adv(j - i)
            (stack[-1][0] if stack else out).append(atom)
    if stack:
        _, sl, sc, opener = stack[-1]
        raise KsSyntaxError(file, sl, sc, f"unclosed `{opener}`")
    return out


# --- types ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KsType:
    """A Knossos type.

    ``kind`` is ``Integer``, ``Float``, ``Bool``, ``String``, ``Unit`` (written ``()``),
    ``Tensor`` (``rank`` >= 1, ``args = (element,)``; ``Vec T`` is ``Tensor 1 T``),
    ``Tuple`` (``args`` the elements), ``Lam`` / ``LM`` (``args = (argument, result)``)
    or ``Any`` (an unknown type, never written).
    """

    kind: str
    args: tuple[KsType, ...] = ()
    rank: int = 0

    def __str__(self) -> str:
        return print_type(self)

    @property
    def is_scalar(self) -> bool:
        """Integer, Float or Bool."""
        return self.kind in ("Integer", "Float", "Bool")


INTEGER, FLOAT, BOOL, STRING = KsType("Integer"), KsType("Float"), KsType("Bool"), KsType("String")
UNIT, ANY = KsType("Unit"), KsType("Any")


def vec(t: KsType, rank: int = 1) -> KsType:
    """``Vec t`` (``Tensor rank t``)."""
    return KsType("Tensor", (t,), rank)


def tup(*ts: KsType) -> KsType:
    """``Tuple ts...``."""
    return KsType("Tuple", tuple(ts))


_SIMPLE = {"Integer": INTEGER, "Float": FLOAT, "Bool": BOOL, "String": STRING}


def parse_type(items: list[SExp] | SExp, file: str) -> KsType:
    """A type from one s-expression or from the items of an unparenthesised type
    (``Vec Float`` as in ``(x : Vec Float)``).

    Raises:
        KsSyntaxError: not a type.
    """
    if not isinstance(items, list):
        items = list(items.items) if isinstance(items, SList) and not items.bracket else [items]
    if not items:
        return UNIT
    head = items[0]
    if isinstance(head, SList):
        if len(items) != 1:
            raise KsSyntaxError(file, head.line, head.col, "expected one type")
        return parse_type(head, file)
    name = head.text
    rest = items[1:]
    if name in _SIMPLE and not rest:
        return _SIMPLE[name]
    if name == "Vec" and len(rest) >= 1:
        return vec(parse_type(rest, file))
    if name == "Tensor" and len(rest) >= 2 and isinstance(rest[0], Atom):
        if not rest[0].text.isdigit() or int(rest[0].text) < 1:
            raise KsSyntaxError(file, rest[0].line, rest[0].col, "Tensor rank must be >= 1")
        return vec(parse_type(rest[1:], file), int(rest[0].text))
    if name == "Tuple":
        # `(Tuple)` is the empty tuple, `()` (SYNTAX.md writes both).
        return tup(*(parse_type(t, file) for t in rest)) if rest else UNIT
    if name in ("Lam", "LM") and len(rest) == 2:
        return KsType(name, (parse_type(rest[0], file), parse_type(rest[1], file)))
    raise KsSyntaxError(file, head.line, head.col, f"unknown type `{name}`")


def print_type(t: KsType, top: bool = True) -> str:
    """The ``.ks`` text of a type (``(Vec Float)``; parenthesised unless a scalar)."""
    if t.kind == "Unit":
        return "()"
    if t.kind in _SIMPLE or t.kind == "Any":
        return t.kind
    if t.kind == "Tensor":
        inner = print_type(t.args[0], False)
        return f"(Vec {inner})" if t.rank == 1 else f"(Tensor {t.rank} {inner})"
    return "(" + " ".join([t.kind, *(print_type(a, False) for a in t.args)]) + ")"


# --- expressions ---------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    """A literal: ``int`` (Integer), ``float`` (Float), ``bool`` (Bool) or ``str`` (String)."""

    value: int | float | bool | str
    pos: tuple[int, int] = field(default=(0, 0), compare=False)

    @property
    def type(self) -> KsType:
        """Its Knossos type."""
        v = self.value
        if isinstance(v, bool):
            return BOOL
        if isinstance(v, int):
            return INTEGER
        if isinstance(v, float):
            return FLOAT
        return STRING


@dataclass(frozen=True)
class Var:
    """A variable reference."""

    name: str
    pos: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Call:
    """``(f args...)``: a user function or a prelude primitive (``build``, ``index``,
    ``get$1$2``, ``add`` ...)."""

    name: str
    args: tuple[Expr, ...]
    pos: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Let:
    """``(let (x rhs) body)``; ``vars`` has several names for a tuple binding
    ``(let ((a b) rhs) body)`` (``tupled``)."""

    vars: tuple[str, ...]
    rhs: Expr
    body: Expr
    tupled: bool = False
    pos: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Lam:
    """``(lam (x : T) body)``."""

    var: str
    type: KsType
    body: Expr
    pos: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class If:
    """``(if cond then else)``."""

    cond: Expr
    then: Expr
    other: Expr
    pos: tuple[int, int] = field(default=(0, 0), compare=False)


@dataclass(frozen=True)
class Assert:
    """``(assert cond body)``."""

    cond: Expr
    body: Expr
    pos: tuple[int, int] = field(default=(0, 0), compare=False)


Expr = Const | Var | Call | Let | Lam | If | Assert


# --- top level -----------------------------------------------------------------------


@dataclass(frozen=True)
class Def:
    """``(def name RetType ((x : T) ...) body)``."""

    name: str
    ret: KsType
    params: tuple[tuple[str, KsType], ...]
    body: Expr
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Edef:
    """``(edef name RetType (ArgTypes...))``: a declared, externally implemented function."""

    name: str
    ret: KsType
    arg_types: tuple[KsType, ...]
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Gdef:
    """``(gdef derivation [f ArgType])``: a request for a derived function."""

    derivation: str
    function: str
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class RuleDecl:
    """``(rule "name" (params) lhs rhs)``: a rewrite rule written in Knossos itself."""

    name: str
    params: tuple[tuple[str, KsType], ...]
    lhs: Expr
    rhs: Expr
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Comment:
    """A comment between top-level forms, as written (``; ...`` or ``#| ... |#``)."""

    text: str


TopLevel = Def | Edef | Gdef | RuleDecl | Comment


@dataclass
class Program:
    """A parsed ``.ks`` file: its top-level items in order."""

    items: list[TopLevel]
    file: str = "<ks>"

    @property
    def defs(self) -> list[Def]:
        """The ``def`` items."""
        return [d for d in self.items if isinstance(d, Def)]

    @property
    def edefs(self) -> list[Edef]:
        """The ``edef`` items."""
        return [d for d in self.items if isinstance(d, Edef)]

    def code(self) -> list[TopLevel]:
        """Every item but comments (what ``parse -> print -> parse`` must preserve)."""
        return [d for d in self.items if not isinstance(d, Comment)]


_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")


def _name(s: SExp) -> str:
    """A (possibly structured) function name as text: ``f``, ``[fwd [f Float]]``."""
    if isinstance(s, Atom):
        return s.text
    inner = " ".join(
        _name(x) if isinstance(x, SList) and x.bracket else _sexp_text(x) for x in s.items
    )
    return f"[{inner}]" if s.bracket else f"({inner})"


def _sexp_text(s: SExp) -> str:
    if isinstance(s, Atom):
        return f'"{s.text}"' if s.string else s.text
    o, c = ("[", "]") if s.bracket else ("(", ")")
    return o + " ".join(_sexp_text(x) for x in s.items) + c


class _Parser:
    def __init__(self, file: str) -> None:
        self.file = file

    def err(self, s: SExp, msg: str) -> KsSyntaxError:
        return KsSyntaxError(self.file, s.line, s.col, msg)

    def atom(self, s: SExp, what: str) -> str:
        if not isinstance(s, Atom) or s.string:
            raise self.err(s, f"expected {what}")
        return s.text

    def param(self, s: SExp) -> tuple[str, KsType]:
        """``(x : T)`` or ``x : T`` items."""
        items = list(s.items) if isinstance(s, SList) else [s]
        if len(items) < 3 or not isinstance(items[1], Atom) or items[1].text != ":":
            raise self.err(s, "expected a parameter `(name : Type)`")
        return self.atom(items[0], "a parameter name"), parse_type(items[2:], self.file)

    def params(self, s: SExp) -> tuple[tuple[str, KsType], ...]:
        if not isinstance(s, SList):
            raise self.err(s, "expected parameters `((x : T) ...)`")
        items = s.items
        if len(items) >= 3 and isinstance(items[1], Atom) and items[1].text == ":":
            return (self.param(s),)  # a single parameter without the outer list
        return tuple(self.param(p) for p in items)

    def top(self, s: SExp | str) -> TopLevel:
        if isinstance(s, str):
            return Comment(s)
        if isinstance(s, Atom) or not s.items or not isinstance(s.items[0], Atom):
            raise self.err(s, "expected a top-level form (def, edef, gdef, rule)")
        head, rest = s.items[0].text, s.items[1:]
        if head == "def":
            if len(rest) != 4:
                raise self.err(s, "`def` takes a name, a return type, parameters and a body")
            return Def(
                _name(rest[0]),
                parse_type(rest[1], self.file),
                self.params(rest[2]),
                self.expr(rest[3]),
                s.line,
            )
        if head == "edef":
            if len(rest) != 3:
                raise self.err(s, "`edef` takes a name, a return type and argument types")
            args = rest[2]
            if isinstance(args, SList) and (
                not args.items or isinstance(args.items[0], SList) or not _is_type_head(args)
            ):
                arg_types = tuple(parse_type(a, self.file) for a in args.items)
            else:
                arg_types = (parse_type(args, self.file),)
            return Edef(_name(rest[0]), parse_type(rest[1], self.file), arg_types, s.line)
        if head == "gdef":
            if len(rest) != 2:
                raise self.err(s, "`gdef` takes a derivation and a function")
            return Gdef(self.atom(rest[0], "a derivation name"), _name(rest[1]), s.line)
        if head == "rule":
            if len(rest) != 4 or not isinstance(rest[0], Atom) or not rest[0].string:
                raise self.err(s, '`rule` takes a "name", parameters and two expressions')
            ps = () if isinstance(rest[1], SList) and not rest[1].items else self.params(rest[1])
            return RuleDecl(rest[0].text, ps, self.expr(rest[2]), self.expr(rest[3]), s.line)
        raise self.err(s.items[0], f"unsupported top-level form `{head}`")

    def expr(self, s: SExp) -> Expr:
        pos = (s.line, s.col)
        if isinstance(s, Atom):
            t = s.text
            if s.string:
                return Const(t, pos)
            if t in ("true", "false"):
                return Const(t == "true", pos)
            if _INT.fullmatch(t):
                return Const(int(t), pos)
            if _FLOAT.fullmatch(t):
                return Const(float(t), pos)
            return Var(t, pos)
        if s.bracket:
            raise self.err(s, "a structured name `[...]` must be called: `([f T] args...)`")
        if not s.items:
            raise self.err(s, "empty expression `()`")
        head = s.items[0]
        rest = s.items[1:]
        if isinstance(head, Atom) and not head.string:
            h = head.text
            if h == "let":
                if len(rest) == 3 and isinstance(rest[0], Atom):  # RLO's (let x e body)
                    v = self.atom(rest[0], "a variable")
                    return Let((v,), self.expr(rest[1]), self.expr(rest[2]), False, pos)
                if len(rest) != 2:
                    raise self.err(s, "`let` takes bindings and a body")
                return self.let(rest[0], self.expr(rest[1]), s)
            if h == "lam":
                if len(rest) != 2:
                    raise self.err(s, "`lam` takes `(x : T)` and a body")
                name, ty = self.param(rest[0])
                return Lam(name, ty, self.expr(rest[1]), pos)
            if h == "if":
                if len(rest) != 3:
                    raise self.err(s, "`if` takes a condition and two branches")
                c, a, b = (self.expr(x) for x in rest)
                return If(c, a, b, pos)
            if h == "assert":
                if len(rest) != 2:
                    raise self.err(s, "`assert` takes a condition and a body")
                return Assert(self.expr(rest[0]), self.expr(rest[1]), pos)
            if h in ("def", "edef", "gdef", "rule", "fold_left"):
                raise self.err(head, f"`{h}` is not an expression")
            return Call(h, tuple(self.expr(x) for x in rest), pos)
        if isinstance(head, SList) and head.bracket:
            return Call(_name(head), tuple(self.expr(x) for x in rest), pos)
        raise self.err(head, "expected a function name")

    def let(self, binds: SExp, body: Expr, s: SList) -> Expr:
        if not isinstance(binds, SList) or not binds.items:
            raise self.err(binds, "expected `(x e)` or `((x e) ...)` bindings")
        first = binds.items[0]
        # (let (x e) body) and (let ((a b) e) body) bind once: some item is an atom.
        if isinstance(first, Atom) or any(isinstance(b, Atom) for b in binds.items):
            return self.binding(binds, body, s)
        # ((a b) e): one tuple binding when there are two items and the first is a list
        # of identifiers, as ksc's parser reads it (Parse.hs `pLet` tries one binding
        # first); so ((M N) (size x)) binds M and N.
        if (
            len(binds.items) == 2
            and isinstance(first, SList)
            and not first.bracket
            and first.items
            and all(_is_ident(x) for x in first.items)
        ):
            return self.binding(binds, body, s)
        out = body
        for b in reversed(binds.items):
            out = self.binding(b, out, s)
        return out

    def binding(self, b: SExp, body: Expr, s: SList) -> Let:
        if not isinstance(b, SList) or len(b.items) != 2:
            raise self.err(b, "a binding is `(x e)` or `((a b) e)`")
        lhs, rhs = b.items
        if isinstance(lhs, SList):
            names = tuple(self.atom(x, "a variable") for x in lhs.items)
            return Let(names, self.expr(rhs), body, True, (s.line, s.col))
        return Let((self.atom(lhs, "a variable"),), self.expr(rhs), body, False, (s.line, s.col))


def _is_ident(s: SExp) -> bool:
    return (
        isinstance(s, Atom)
        and not s.string
        and not _FLOAT.fullmatch(s.text)
        and s.text not in ("true", "false")
    )


def _is_type_head(s: SList) -> bool:
    h = s.items[0]
    return isinstance(h, Atom) and h.text in ("Vec", "Tensor", "Tuple", "Lam", "LM")


def parse_text(text: str, file: str = "<ks>") -> Program:
    """Parse a ``.ks`` program.

    Raises:
        KsSyntaxError: ``file:line:col: message`` on malformed or unsupported input.
    """
    p = _Parser(file)
    return Program([p.top(s) for s in read(text, file)], file)


def parse_file(path: str) -> Program:
    """Parse the ``.ks`` file at ``path`` (see :func:`parse_text`)."""
    with open(path, encoding="utf-8") as f:
        return parse_text(f.read(), str(path))


def parse_expr(text: str, file: str = "<expr>") -> Expr:
    """Parse one expression (``"(mul x 2.0)"``)."""
    items = [s for s in read(text, file) if not isinstance(s, str)]
    if len(items) != 1:
        raise KsSyntaxError(file, 1, 1, f"expected one expression, got {len(items)}")
    return _Parser(file).expr(items[0])


# --- printing ------------------------------------------------------------------------


def _const_text(v: int | float | bool | str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        r = repr(v)
        return r if ("." in r or "e" in r or "inf" in r or "nan" in r) else r + ".0"
    return '"' + v + '"'


def print_expr(e: Expr, indent: int = 0, width: int = 88) -> str:
    """The ``.ks`` text of an expression, broken over lines when longer than ``width``."""
    flat = _flat(e)
    if len(flat) + indent <= width:
        return flat
    pad = " " * (indent + 2)
    if isinstance(e, Let):
        lhs = "(" + " ".join(e.vars) + ")" if e.tupled else e.vars[0]
        rhs = print_expr(e.rhs, indent + 8 + len(lhs), width)
        b = f"(({lhs} {rhs}))" if e.tupled else f"({lhs} {rhs})"
        return f"(let {b}\n{pad}{print_expr(e.body, indent + 2, width)})"
    if isinstance(e, Lam):
        return (
            f"(lam ({e.var} : {print_type(e.type)})\n{pad}{print_expr(e.body, indent + 2, width)})"
        )
    if isinstance(e, If):
        parts = [print_expr(x, indent + 2, width) for x in (e.cond, e.then, e.other)]
        return "(if " + f"\n{pad}".join(parts) + ")"
    if isinstance(e, Assert):
        parts = [print_expr(x, indent + 2, width) for x in (e.cond, e.body)]
        return "(assert " + f"\n{pad}".join(parts) + ")"
    if isinstance(e, Call):
        parts = [print_expr(a, indent + 2, width) for a in e.args]
        return f"({e.name}" + "".join(f"\n{pad}{p}" for p in parts) + ")"
    return flat


def _flat(e: Expr) -> str:
    if isinstance(e, Const):
        return _const_text(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Let):
        if e.tupled:
            return f"(let ((({' '.join(e.vars)}) {_flat(e.rhs)})) {_flat(e.body)})"
        return f"(let ({e.vars[0]} {_flat(e.rhs)}) {_flat(e.body)})"
    if isinstance(e, Lam):
        return f"(lam ({e.var} : {print_type(e.type)}) {_flat(e.body)})"
    if isinstance(e, If):
        return f"(if {_flat(e.cond)} {_flat(e.then)} {_flat(e.other)})"
    if isinstance(e, Assert):
        return f"(assert {_flat(e.cond)} {_flat(e.body)})"
    return "(" + " ".join([e.name, *(_flat(a) for a in e.args)]) + ")"


def _params_text(ps: tuple[tuple[str, KsType], ...]) -> str:
    return "(" + " ".join(f"({n} : {print_type(t)})" for n, t in ps) + ")"


def print_item(item: TopLevel) -> str:
    """The ``.ks`` text of one top-level item."""
    if isinstance(item, Comment):
        return item.text
    if isinstance(item, Def):
        head = f"(def {item.name} {print_type(item.ret)} {_params_text(item.params)}"
        return f"{head}\n  {print_expr(item.body, 2)})"
    if isinstance(item, Edef):
        args = " ".join(print_type(t) for t in item.arg_types)
        return f"(edef {item.name} {print_type(item.ret)} ({args}))"
    if isinstance(item, Gdef):
        return f"(gdef {item.derivation} {item.function})"
    ps = _params_text(item.params)
    return f'(rule "{item.name}" {ps}\n  {print_expr(item.lhs, 2)}\n  {print_expr(item.rhs, 2)})'


def print_program(prog: Program) -> str:
    """The ``.ks`` text of a program: items in order, comments as written."""
    return "\n\n".join(print_item(i) for i in prog.items) + "\n"
