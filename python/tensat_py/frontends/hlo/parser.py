"""Parser of XLA's HLO text format into :class:`~tensat_py.frontends.hlo.ir.Module`.

Reads what ``HloModule::ToString`` prints, long form (``%name``, operand shapes before
operand names, layouts ``{1,0}``, ``metadata={...}``, ``/*index=5*/`` comments) and short
form (``name = f32[2] add(a, b)``): the ``HloModule`` header with its attributes, any number
of computations (``ENTRY`` marks the entry; the ``(params) -> shape`` signature is optional
and checked against nothing), and instructions with attributes. Attribute values are kept
as raw text (balanced ``{}``/``[]``/``()`` and quotes); the translator reads the ones it
needs.

Every error is an :class:`HloParseError` whose text is ``file:line:col: message``
(1-based): unknown element types, unbalanced brackets, a missing ``=`` or opcode, an
operand or a called computation that is not defined, two instructions with one name, no
``ENTRY``, ... Sources: XLA ``xla/hlo/parser/hlo_parser.cc`` and ``hlo_lexer.cc``.
"""

from __future__ import annotations

import re
from pathlib import Path

from tensat_py.frontends.hlo.ir import (
    COMPUTATION_ATTRS,
    ELEMENT_TYPES,
    ArrayShape,
    Computation,
    Instruction,
    Module,
    Shape,
    TupleShape,
)

__all__ = ["HloParseError", "parse_module", "parse_file"]

#: Opcodes whose parentheses hold a literal or a number, not operands.
PAYLOAD_OPCODES = frozenset({"constant", "parameter"})

_NAME = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
_COMMENT = re.compile(r"/\*.*?\*/", re.S)


class HloParseError(ValueError):
    """Malformed HLO text; the message is ``file:line:col: message``."""


class _Cursor:
    """Position in the text with line/column bookkeeping for messages."""

    def __init__(self, text: str, file: str) -> None:
        # Comments become spaces, so columns stay those of the file.
        self.text = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
        self.file = file
        self.pos = 0
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]

    def where(self, pos: int | None = None) -> tuple[int, int]:
        p = self.pos if pos is None else pos
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= p:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, p - self._line_starts[lo] + 1

    def error(self, message: str, pos: int | None = None) -> HloParseError:
        line, col = self.where(pos)
        return HloParseError(f"{self.file}:{line}:{col}: {message}")

    def skip_ws(self, newlines: bool = True) -> None:
        t = self.text
        while self.pos < len(t):
            c = t[self.pos]
            if c in " \t\r" or (newlines and c == "\n"):
                self.pos += 1
            elif c == "/" and t.startswith("//", self.pos):  # line comment
                while self.pos < len(t) and t[self.pos] != "\n":
                    self.pos += 1
            else:
                break

    def peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def accept(self, token: str, newlines: bool = True) -> bool:
        self.skip_ws(newlines)
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str, what: str = "") -> None:
        if not self.accept(token):
            found = self.text[self.pos : self.pos + 12].split("\n")[0] or "end of file"
            raise self.error(f"expected `{token}`{' ' + what if what else ''}, found `{found}`")

    def name(self, what: str) -> str:
        self.skip_ws()
        m = _NAME.match(self.text, self.pos)
        if not m:
            found = self.text[self.pos : self.pos + 12].split("\n")[0] or "end of file"
            raise self.error(f"expected {what}, found `{found}`")
        self.pos = m.end()
        return m.group(1)

    def balanced(self) -> str:
        """The text from an opening bracket to its match (both included)."""
        t = self.text
        start = self.pos
        pairs = {"{": "}", "[": "]", "(": ")"}
        stack: list[str] = []
        i = self.pos
        while i < len(t):
            c = t[i]
            if c == '"':
                j = i + 1
                while j < len(t) and t[j] != '"':
                    j += 2 if t[j] == "\\" else 1
                if j >= len(t):
                    raise self.error("unterminated string", i)
                i = j + 1
                continue
            if c in pairs:
                stack.append(pairs[c])
            elif c in ")]}":
                if not stack or stack[-1] != c:
                    raise self.error(f"unbalanced `{c}`", i)
                stack.pop()
                if not stack:
                    self.pos = i + 1
                    return t[start : i + 1]
            i += 1
        raise self.error(f"unclosed `{t[start]}`", start)

    def attr_value(self) -> str:
        """Raw text of an attribute value: up to the next top-level `,` or line end."""
        self.skip_ws(newlines=False)
        t = self.text
        start = self.pos
        while self.pos < len(t) and t[self.pos] not in ",\n":
            c = t[self.pos]
            if c in "{[(" or c == '"':
                if c == '"':
                    j = self.pos + 1
                    while j < len(t) and t[j] != '"':
                        j += 2 if t[j] == "\\" else 1
                    if j >= len(t):
                        raise self.error("unterminated string")
                    self.pos = j + 1
                else:
                    self.balanced()
            elif c in ")]}":
                raise self.error(f"unbalanced `{c}`")
            else:
                self.pos += 1
        value = t[start : self.pos].rstrip()
        if not value:
            raise self.error("attribute has no value")
        return value


def _shape(cur: _Cursor) -> Shape:
    cur.skip_ws()
    if cur.accept("("):
        parts: list[Shape] = []
        if not cur.accept(")"):
            while True:
                parts.append(_shape(cur))
                if cur.accept(")"):
                    break
                cur.expect(",", "between tuple elements")
        return TupleShape(tuple(parts))
    start = cur.pos
    m = re.compile(r"([a-z][a-z0-9]*)\[").match(cur.text, cur.pos)
    if not m:
        found = cur.text[cur.pos : cur.pos + 12].split("\n")[0] or "end of file"
        raise cur.error(f"expected a shape like f32[2,3], found `{found}`")
    etype = m.group(1)
    if etype not in ELEMENT_TYPES:
        raise cur.error(f"unknown element type `{etype}`", start)
    cur.pos = m.end() - 1
    dims_text = cur.balanced()[1:-1]
    dims: list[int] = []
    for d in [s.strip() for s in dims_text.split(",") if s.strip()]:
        if not d.isdigit():
            raise cur.error(
                f"dimension `{d}` is not a non-negative integer (dynamic shapes are not supported)",
                start,
            )
        dims.append(int(d))
    layout = None
    if cur.pos < len(cur.text) and cur.text[cur.pos] == "{":
        layout = cur.balanced()[1:-1]
    return ArrayShape(etype, tuple(dims), layout)


def _operands(cur: _Cursor) -> tuple[list[str], list[int]]:
    """Operand names (shapes before them are skipped) and their positions."""
    names: list[str] = []
    where: list[int] = []
    cur.skip_ws()
    open_at = cur.pos
    cur.expect("(")
    if cur.accept(")"):
        return names, where
    while True:
        cur.skip_ws()
        # Long form: a shape before the name (`f32[2]{0} %x`, `(f32[], s32[]) %t`).
        save = cur.pos
        if cur.peek() == "(" or re.compile(r"[a-z][a-z0-9]*\[").match(cur.text, cur.pos):
            try:
                _shape(cur)
            except HloParseError:
                cur.pos = save
        cur.skip_ws()
        where.append(cur.pos)
        names.append(cur.name("an operand name"))
        if cur.accept(")"):
            return names, where
        if cur.peek() != ",":
            raise cur.error("unclosed `(`: expected `,` or `)` after an operand", open_at)
        cur.expect(",")


def _instruction(cur: _Cursor) -> tuple[Instruction, list[int]]:
    cur.skip_ws()
    line, col = cur.where()
    root = False
    m = re.compile(r"ROOT[ \t]+").match(cur.text, cur.pos)
    if m:
        cur.pos = m.end()
        root = True
    name = cur.name("an instruction name")
    cur.expect("=", f"after instruction name `{name}`")
    shape = _shape(cur)
    cur.skip_ws()
    m = re.compile(r"[a-z][a-z0-9\-_]*").match(cur.text, cur.pos)
    if not m:
        raise cur.error(f"instruction `{name}` has no opcode")
    opcode = m.group(0)
    cur.pos = m.end()
    payload = None
    operands: list[str] = []
    where: list[int] = []
    if cur.peek() != "(":
        raise cur.error(f"expected `(` after opcode `{opcode}`")
    if opcode in PAYLOAD_OPCODES:
        payload = cur.balanced()[1:-1].strip()
        if opcode == "parameter" and not payload.isdigit():
            raise cur.error(f"parameter number `{payload}` is not an integer")
    else:
        operands, where = _operands(cur)
    attrs: list[tuple[str, str]] = []
    while True:
        if not cur.accept(",", newlines=False):
            break
        cur.skip_ws(newlines=False)
        key_pos = cur.pos
        key = cur.name("an attribute name")
        if not cur.accept("="):
            raise cur.error(f"attribute `{key}` has no `=`", key_pos)
        attrs.append((key, cur.attr_value()))
    cur.skip_ws(newlines=False)
    if cur.pos < len(cur.text) and cur.text[cur.pos] not in "\n}":
        raise cur.error(f"unexpected `{cur.text[cur.pos]}` after instruction `{name}`")
    ins = Instruction(name, shape, opcode, operands, attrs, payload, root, line, col)
    return ins, where


def _computation(cur: _Cursor) -> tuple[Computation, dict[str, list[int]]]:
    line, _ = cur.where()
    entry = cur.accept("ENTRY")
    name = cur.name("a computation name")
    if cur.peek() == "(":
        cur.balanced()  # the signature: parameters are declared by instructions
    if cur.accept("->"):
        _shape(cur)
    cur.expect("{", f"to open computation `{name}`")
    instructions: list[Instruction] = []
    positions: dict[str, list[int]] = {}
    seen: dict[str, Instruction] = {}
    while True:
        c = cur.peek()
        if c == "}":
            cur.pos += 1
            break
        if not c:
            raise cur.error(f"computation `{name}` is not closed with `}}`")
        ins_pos = cur.pos
        ins, where = _instruction(cur)
        if ins.name in seen:
            raise cur.error(
                f"instruction `{ins.name}` is defined twice (first at line {seen[ins.name].line})",
                ins_pos,
            )
        seen[ins.name] = ins
        instructions.append(ins)
        positions[ins.name] = where
    if not instructions:
        raise cur.error(f"computation `{name}` has no instructions")
    roots = [i for i in instructions if i.root]
    if len(roots) > 1:
        raise cur.error(f"computation `{name}` has {len(roots)} ROOT instructions")
    for ins in instructions:
        for o, p in zip(ins.operands, positions[ins.name], strict=True):
            if o not in seen:
                raise cur.error(f"operand `{o}` of `{ins.name}` is not defined in `{name}`", p)
    return Computation(name, instructions, entry, line), positions


def _called(value: str) -> list[str]:
    return [s.strip().lstrip("%") for s in value.strip("{}").split(",") if s.strip()]


def parse_module(text: str, file: str = "<hlo>") -> Module:
    """Parse HLO text. Raises :class:`HloParseError` (``file:line:col: message``)."""
    cur = _Cursor(text, file)
    cur.skip_ws()
    if not cur.accept("HloModule"):
        raise cur.error("expected `HloModule name` at the start")
    name = cur.name("a module name")
    attrs: list[tuple[str, str]] = []
    while True:
        if not cur.accept(",", newlines=False):
            break
        key = cur.name("a module attribute name")
        cur.expect("=", f"after module attribute `{key}`")
        attrs.append((key, cur.attr_value()))
    comps: list[Computation] = []
    where: dict[str, int] = {}
    while cur.peek():
        pos = cur.pos
        comp, _ = _computation(cur)
        if comp.name in where:
            raise cur.error(f"computation `{comp.name}` is defined twice", pos)
        where[comp.name] = pos
        comps.append(comp)
    if not comps:
        raise cur.error("the module has no computations")
    entries = [c for c in comps if c.entry]
    if len(entries) > 1:
        raise cur.error("the module has more than one ENTRY computation")
    if not entries:
        comps[-1].entry = True
    for comp in comps:
        for ins in comp.instructions:
            for k, v in ins.attrs:
                if k in COMPUTATION_ATTRS:
                    for c in _called(v):
                        if c not in where:
                            raise HloParseError(
                                f"{file}:{ins.line}:{ins.col}: `{ins.name}` calls computation "
                                f"`{c}`, which is not defined"
                            )
    return Module(name, comps, attrs)


def parse_file(path: str | Path) -> Module:
    """Parse the HLO text file ``path`` (messages name it)."""
    p = Path(path)
    return parse_module(p.read_text(), str(p))
