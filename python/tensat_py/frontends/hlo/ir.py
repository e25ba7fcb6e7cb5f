"""The HLO module as text structure: shapes, instructions, computations, and the printer.

This is XLA's HLO text format (``HloModule::ToString``, parsed by XLA's ``HloParser``)
held as data with nothing interpreted beyond what printing needs: every instruction keeps
its opcode, its operand names, its literal or parameter number (the text in the
parentheses of ``constant(...)``/``parameter(...)``) and its attributes as raw text in
their order. :func:`print_module` writes a module back in XLA's short form (``name =
shape opcode(operands), attrs``), which XLA's parser reads as it reads the long form;
``parse_module(print_module(m)) == m`` for every parsed module ``m`` (comments and
``/*index=5*/`` markers are not kept).

Sources: XLA ``xla/hlo/parser/hlo_parser.cc`` (grammar), ``xla/shape_util.cc`` (shape
text), the "HLO text" examples of https://openxla.org/xla/operation_semantics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "ArrayShape",
    "TupleShape",
    "Shape",
    "Instruction",
    "Computation",
    "Module",
    "print_shape",
    "print_instruction",
    "print_computation",
    "print_module",
    "leaf_shapes",
    "ELEMENT_TYPES",
]

#: HLO element type -> the language's dtype (None: no counterpart in the language).
ELEMENT_TYPES: dict[str, str | None] = {
    "pred": "bool",
    "s8": "int8",
    "s16": "int16",
    "s32": "int32",
    "s64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f16": "float16",
    "bf16": "bfloat16",
    "f32": "float32",
    "f64": "float64",
    "c64": None,
    "c128": None,
    "token": None,
    "opaque": None,
    "s1": None,
    "u1": None,
    "s2": None,
    "u2": None,
    "s4": None,
    "u4": None,
    "f4e2m1fn": None,
    "f8e3m4": None,
    "f8e4m3": None,
    "f8e4m3fn": None,
    "f8e4m3fnuz": None,
    "f8e4m3b11fnuz": None,
    "f8e5m2": None,
    "f8e5m2fnuz": None,
    "f8e8m0fnu": None,
}


@dataclass(frozen=True)
class ArrayShape:
    """An array shape: ``f32[2,3]{1,0}``.

    Attributes:
        etype: element type (``"f32"``, ``"pred"``, ``"s32"``, ...).
        dims: dimensions, outermost first.
        layout: the layout text between the braces (``"1,0"``), None when not printed.
    """

    etype: str
    dims: tuple[int, ...]
    layout: str | None = None

    @property
    def dtype(self) -> str | None:
        """The language's dtype (``"float32"``), None for element types it lacks."""
        return ELEMENT_TYPES.get(self.etype)

    def default_layout(self) -> bool:
        """True when the layout is absent or row-major (``{n-1,...,1,0}``)."""
        if self.layout is None:
            return True
        want = ",".join(str(i) for i in reversed(range(len(self.dims))))
        return self.layout.replace(" ", "") == want


@dataclass(frozen=True)
class TupleShape:
    """A tuple shape: ``(f32[2], s32[])``."""

    parts: tuple[Shape, ...]


Shape = ArrayShape | TupleShape


def leaf_shapes(shape: Shape) -> list[tuple[tuple[int, ...], ArrayShape]]:
    """``[(path, array shape)]`` of every array leaf of ``shape``, depth first."""
    if isinstance(shape, ArrayShape):
        return [((), shape)]
    out: list[tuple[tuple[int, ...], ArrayShape]] = []
    for i, p in enumerate(shape.parts):
        out.extend(((i, *path), s) for path, s in leaf_shapes(p))
    return out


@dataclass
class Instruction:
    """One HLO instruction.

    Attributes:
        name: its name without ``%`` (``"add.5"``).
        shape: its result shape.
        opcode: ``"add"``, ``"get-tuple-element"``, ...
        operands: operand names (without ``%``), in order.
        attrs: ``[(key, raw value text)]`` in their order (``("dimensions", "{1,0}")``).
        payload: for ``constant``/``parameter``/other opcodes whose parentheses hold a
            literal or number instead of operands: that text; None otherwise.
        root: marked ``ROOT``.
        line, col: where it starts in its file (1-based; 0 when made, not parsed).
    """

    name: str
    shape: Shape
    opcode: str
    operands: list[str]
    attrs: list[tuple[str, str]] = field(default_factory=list)
    payload: str | None = None
    root: bool = False
    line: int = field(default=0, compare=False)
    col: int = field(default=0, compare=False)

    def attr(self, key: str) -> str | None:
        """The raw text of attribute ``key``, None when absent."""
        for k, v in self.attrs:
            if k == key:
                return v
        return None


@dataclass
class Computation:
    """A named computation: instructions in text order, one of them ``ROOT``.

    Attributes:
        name: its name without ``%``.
        instructions: in text order.
        entry: marked ``ENTRY``.
    """

    name: str
    instructions: list[Instruction]
    entry: bool = False
    line: int = field(default=0, compare=False)

    @property
    def root(self) -> Instruction:
        """The ``ROOT`` instruction (the last one when none is marked)."""
        for ins in self.instructions:
            if ins.root:
                return ins
        return self.instructions[-1]

    def by_name(self) -> dict[str, Instruction]:
        """``{name: instruction}``."""
        return {i.name: i for i in self.instructions}

    def parameters(self) -> list[Instruction]:
        """Its ``parameter`` instructions by parameter number."""
        ps = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(ps, key=lambda i: int(i.payload or 0))


@dataclass
class Module:
    """An HLO module: ``HloModule name, attrs`` and its computations (entry last, as XLA
    prints them; callees before callers).

    Attributes:
        name: the module name.
        attrs: header attributes ``[(key, raw text)]`` (``entry_computation_layout``...).
        computations: in text order.
    """

    name: str
    computations: list[Computation]
    attrs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def entry(self) -> Computation:
        """The ``ENTRY`` computation (the last one when none is marked)."""
        for c in self.computations:
            if c.entry:
                return c
        return self.computations[-1]

    def computation(self, name: str) -> Computation:
        """The computation called ``name``. Raises ``KeyError``."""
        for c in self.computations:
            if c.name == name:
                return c
        raise KeyError(name)


def print_shape(shape: Shape, layouts: bool = True) -> str:
    """``f32[2,3]{1,0}`` / ``(f32[2], s32[])``; ``layouts=False`` leaves layouts out."""
    if isinstance(shape, TupleShape):
        return "(" + ", ".join(print_shape(p, layouts) for p in shape.parts) + ")"
    text = f"{shape.etype}[{','.join(str(d) for d in shape.dims)}]"
    if layouts and shape.layout is not None:
        text += "{" + shape.layout + "}"
    return text


#: Attribute values naming computations (``AttrTy::kHloComputation`` and
#: ``kBracedHloComputationList`` in XLA's ``hlo_parser.cc``): reductions, sort, scatter,
#: call and fusion, while, both forms of conditional, select-and-scatter, custom-call.
COMPUTATION_ATTRS = frozenset(
    {
        "to_apply",
        "calls",
        "condition",
        "body",
        "branch_computations",
        "true_computation",
        "false_computation",
        "select",
        "scatter",
        "called_computations",
    }
)


def print_instruction(ins: Instruction) -> str:
    """One instruction line (without indentation)."""
    inner = ins.payload if ins.payload is not None else ", ".join(f"%{o}" for o in ins.operands)
    text = f"{'ROOT ' if ins.root else ''}%{ins.name} = {print_shape(ins.shape)} "
    text += f"{ins.opcode}({inner})"
    for k, v in ins.attrs:
        text += f", {k}={v}"
    return text


def print_computation(comp: Computation) -> str:
    """A computation block ``[ENTRY ]%name {`` ... ``}``."""
    lines = [f"{'ENTRY ' if comp.entry else ''}%{comp.name} {{"]
    lines += [f"  {print_instruction(i)}" for i in comp.instructions]
    lines.append("}")
    return "\n".join(lines)


def print_module(module: Module) -> str:
    """The module as HLO text XLA's parser reads (see the module docstring)."""
    head = f"HloModule {module.name}"
    for k, v in module.attrs:
        head += f", {k}={v}"
    parts = [head] + [print_computation(c) for c in module.computations]
    return "\n\n".join(parts) + "\n"
