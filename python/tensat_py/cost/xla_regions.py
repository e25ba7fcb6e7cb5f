"""The HLO modules the ``xla`` cost model measures, cut out of a program XLA compiled.

:meth:`tensat_py.cost.xla.XlaCostModel.program_seconds` prices a program from the
instructions of its optimised entry computation (its *regions*: loop and library
fusions, convolutions, copies). Each is measured as a module of its own:

* :func:`region_module`: one region alone, its operands made parameters;
* :func:`pair_module`: a region after the region that makes its operand, the
  producer's result a temporary, as in the program;
* :func:`replicated_module`: copies of a region side by side, each with weights of its
  own (its cold figure, read from memory);

keyed in the profile cache by :func:`region_signature`. :func:`region_dependencies`
and :func:`all_small` give the data edges between a program's regions and whether XLA
CPU's thunk executor runs them in order (:mod:`tensat_py.cost.executor`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tensat_py.cost.executor import SEQUENTIAL_BYTES

__all__ = [
    "FREE_OPCODES",
    "region_module",
    "region_kind",
    "pair_module",
    "replicated_module",
    "region_signature",
    "weight_parameters",
    "array_bytes",
    "region_dependencies",
    "all_small",
]

#: Entry instructions of an optimised module that run no kernel.
FREE_OPCODES = frozenset(
    {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all"}
)


def replicated_module(text: str, weights: set[int] | frozenset[int], count: int) -> str:
    """HLO text of a module that runs the entry computation of module ``text`` ``count``
    times side by side, each copy with weights of its own (a new entry parameter for each
    of the parameters numbered in ``weights``) and the other parameters shared, its
    results in one tuple: the copies read distinct weights, as a program's regions do,
    and are independent, as its dots of one operand are. XLA inlines the calls and fuses
    each copy as it fused the original.

    Raises:
        ValueError: ``count`` below 1 or ``text`` not a module (parser's message).
    """
    from tensat_py.frontends.hlo.ir import Instruction, Module, TupleShape, print_module
    from tensat_py.frontends.hlo.parser import parse_module

    if count < 1:
        raise ValueError(f"replicated_module: count must be at least 1, got {count}")
    module = parse_module(text)
    entry = module.entry
    body = dataclasses.replace(entry, name="replica", entry=False)
    params = entry.parameters()
    ins: list[Instruction] = []
    shared: dict[int, str] = {}
    for p in params:
        k = int(p.payload or 0)
        if k not in weights:
            shared[k] = f"shared_{k}"
            ins.append(Instruction(f"shared_{k}", p.shape, "parameter", [], payload=str(len(ins))))
    calls = []
    for r in range(count):
        args = []
        for p in params:
            k = int(p.payload or 0)
            if k in shared:
                args.append(shared[k])
            else:
                name = f"weight_{r}_{k}"
                ins.append(Instruction(name, p.shape, "parameter", [], payload=str(len(ins))))
                args.append(name)
        calls.append(
            Instruction(f"copy_{r}", entry.root.shape, "call", args, [("to_apply", "%replica")])
        )
    root = Instruction(
        "out", TupleShape(tuple(c.shape for c in calls)), "tuple", [c.name for c in calls]
    )
    root.root = True
    others = [c for c in module.computations if not c.entry]
    new_entry = type(entry)("main", [*ins, *calls, root], entry=True)
    return print_module(Module("copies", [*others, body, new_entry]))


def region_module(module: Any, ins: Any) -> str:
    """HLO text of a module that runs instruction ``ins`` of ``module``'s entry alone:
    its operands become parameters (their shapes and layouts kept), and the computations
    it calls (a fusion's body, a reducer) come along. A fusion is run as its body, so XLA
    compiles it into the same fusion again.

    Raises:
        ValueError: an operand of a tuple shape (names the instruction).
    """
    from tensat_py.frontends.hlo.ir import Computation, Module, print_module

    comps = {c.name: c for c in module.computations}
    if ins.opcode == "fusion":
        body = _reparsable(comps[str(ins.attr("calls")).lstrip("%")])
        entry = dataclasses.replace(body, name="region", entry=True)
    else:
        params = _Parameters(module, ins.name)
        root = dataclasses.replace(
            ins, operands=[params(o) for o in ins.operands], root=True, name="r"
        )
        entry = Computation("region", [*params.made, root], entry=True)
    return print_module(Module("region", [*_called(comps, entry), entry]))


class _Parameters:
    """The entry parameters of a module cut out of ``module``'s entry: calling it with the
    name of an entry value gives the parameter standing for it (``p0``, ``p1``... made on
    first use, shape and layout kept); :attr:`made` lists them by number.

    Raises (on a call):
        ValueError: the value has a tuple shape (names ``reader``, the instruction cut
            out).
    """

    def __init__(self, module: Any, reader: str) -> None:
        self.by = module.entry.by_name()
        self.reader = reader
        self.made: list[Any] = []
        self.names: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        from tensat_py.frontends.hlo.ir import ArrayShape, Instruction

        if value not in self.names:
            shape = self.by[value].shape
            if not isinstance(shape, ArrayShape):
                raise ValueError(f"xla: `{self.reader}` reads a tuple; it does not run alone")
            k = len(self.made)
            self.names[value] = f"p{k}"
            self.made.append(Instruction(f"p{k}", shape, "parameter", [], payload=str(k)))
        return self.names[value]


def _called(comps: Mapping[str, Any], entry: Any) -> list[Any]:
    """The computations ``entry`` calls, directly or not, in the order first reached,
    from ``comps`` (``{name: computation}``; XLA's parser takes them in any order): every
    attribute of :data:`~tensat_py.frontends.hlo.ir.COMPUTATION_ATTRS` (a custom call's
    ``called_computations`` too: XLA CPU's TopK calls its comparator so)."""
    from tensat_py.frontends.hlo.ir import COMPUTATION_ATTRS

    called: list[str] = []

    def visit(comp: Any) -> None:
        for i in comp.instructions:
            for key, value in i.attrs:
                if key in COMPUTATION_ATTRS:
                    for name in value.strip("{}").split(","):
                        name = name.strip().lstrip("%")
                        if name and name not in called:
                            called.append(name)
                            visit(comps[name])

    visit(entry)
    return [_reparsable(comps[n]) for n in called]


def _reparsable(comp: Any) -> Any:
    """``comp`` written so that XLA's parser and pipeline take it again, as XLA's
    optimised modules print some instructions in forms that only its own passes make:

    * a ``bitcast`` that changes the element type becomes ``bitcast-convert`` (the same
      bits, read as the other type): a sort comparator's total order on floats
      (``s32[] bitcast(f32[] x)``, as in the TopK call XLA CPU makes of a sort and slice),
      which XLA's parser rejects;
    * a ``bitcast`` whose result has a layout other than row-major but which only moves
      dimensions of size 1 (:func:`_moves_unit_dims`) becomes a ``reshape`` to the
      row-major layout, the same elements in the same order: XLA CPU writes
      ``f64[125,3,1]{1,0,2} bitcast(f64[125,3]{1,0})`` before a ``copy`` in the
      fusions of hloenv_BayesNewton_jit_matmul and hloenv_Toy-nn_loss_dot_scatter, and
      compiling them again fails in layout assignment ("layout minor_to_major field
      contains 3 elements, but shape has 2 dimensions").

    A bitcast that reorders dimensions of more than one element is kept as it is (where
    XLA rejects the module, :meth:`XlaCostModel.graph_cost` prices the program operator
    by operator, as it did these two).

    Example (the BayesNewton fusion's bitcast):
        >>> from tensat_py.frontends.hlo.parser import parse_module
        >>> m = parse_module('''HloModule m
        ... ENTRY e {
        ...   p = f64[125,3]{1,0} parameter(0)
        ...   b = f64[125,3,1]{1,0,2} bitcast(p)
        ...   ROOT c = f64[125,3,1]{2,1,0} copy(b)
        ... }''')
        >>> [(i.opcode, i.shape.layout) for i in _reparsable(m.entry).instructions]
        [('parameter', '1,0'), ('reshape', '2,1,0'), ('copy', '2,1,0')]
    """
    from tensat_py.frontends.hlo.ir import ArrayShape

    by = comp.by_name()
    out, changed = [], False
    for ins in comp.instructions:
        src = by.get(ins.operands[0]) if ins.opcode == "bitcast" and ins.operands else None
        if (
            src is not None
            and isinstance(src.shape, ArrayShape)
            and isinstance(ins.shape, ArrayShape)
        ):
            if src.shape.etype != ins.shape.etype:
                ins, changed = dataclasses.replace(ins, opcode="bitcast-convert"), True
            elif not ins.shape.default_layout() and _moves_unit_dims(src.shape, ins.shape):
                row_major = ",".join(str(d) for d in reversed(range(len(ins.shape.dims))))
                shape = dataclasses.replace(ins.shape, layout=row_major)
                ins, changed = dataclasses.replace(ins, opcode="reshape", shape=shape), True
        out.append(ins)
    return dataclasses.replace(comp, instructions=out) if changed else comp


def _moves_unit_dims(src: Any, dst: Any) -> bool:
    """Whether a bitcast of array shape ``src`` to ``dst`` is a row-major reshape: in
    both, the dimensions of more than one element lie in memory in the order they are
    written (their layouts differ from row-major only in where the size-1 dimensions go).

    >>> from tensat_py.frontends.hlo.ir import ArrayShape
    >>> _moves_unit_dims(ArrayShape("f32", (101, 10), "1,0"),
    ...                  ArrayShape("f32", (101, 1, 10), "2,0,1"))
    True
    >>> _moves_unit_dims(ArrayShape("f32", (4, 3), "1,0"), ArrayShape("f32", (3, 4), "0,1"))
    False
    """

    def in_memory(shape: Any) -> list[int] | None:
        if shape.layout is None:
            return [d for d in shape.dims if d != 1]
        try:
            minor_to_major = [int(x) for x in shape.layout.split(":")[0].split(",") if x.strip()]
        except ValueError:  # a layout with more than dimension numbers: not touched
            return None
        if sorted(minor_to_major) != list(range(len(shape.dims))):
            return None
        return [shape.dims[d] for d in reversed(minor_to_major) if shape.dims[d] != 1]

    order = [in_memory(src), in_memory(dst)]
    written = [[d for d in s.dims if d != 1] for s in (src, dst)]
    return order == written


def region_kind(ins: Any) -> tuple[str, str | None]:
    """What XLA runs for an entry instruction: its opcode and, for a fusion, its kind
    (``("fusion", "kLoop")``, ``("dot", None)``)."""
    return ins.opcode, ins.attr("kind") if ins.opcode == "fusion" else None


def pair_module(module: Any, producer: Any, consumer: Any) -> str:
    """HLO text of a module that runs entry instruction ``producer`` of ``module`` and
    then ``consumer``, which reads its result: the operands of both that neither computes
    become parameters (shapes and layouts kept), a fusion runs as a ``call`` of its body
    (XLA inlines it and fuses it again), and the consumer's result is the module's only
    output, so the producer's result is a temporary buffer, written and then read while
    still in the cache, as inside the program (:meth:`XlaCostModel.program_seconds`
    prices the consumer as this module's time less the producer's alone).

    Raises:
        ValueError: an operand of a tuple shape (names the instruction).

    Example (a dot, then the loop fusion that reads its result):
        >>> from tensat_py.frontends.hlo.parser import parse_module
        >>> from tensat_py.runtime.xla_exec import compile_text
        >>> text = '''HloModule m
        ... ENTRY main {
        ...   x = f32[32,64]{1,0} parameter(0)
        ...   w = f32[64,16]{1,0} parameter(1)
        ...   d = f32[32,16]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        ...   ROOT e = f32[32,16]{1,0} exponential(d)
        ... }'''
        >>> optimised = parse_module(compile_text(text).hlo_modules()[0].to_string())
        >>> dot, exp = [i for i in optimised.entry.instructions if i.opcode != "parameter"]
        >>> pair = parse_module(pair_module(optimised, dot, exp))
        >>> [(i.name, i.opcode) for i in pair.entry.instructions]
        [('p0', 'parameter'), ('p1', 'parameter'), ('prod', 'call'), ('cons', 'call')]
        >>> exe = compile_text(pair_module(optimised, dot, exp))
        >>> again = parse_module(exe.hlo_modules()[0].to_string()).entry.instructions
        >>> [region_kind(i) for i in again if i.opcode != "parameter"] == [
        ...     region_kind(dot), region_kind(exp)]
        True
    """
    from tensat_py.frontends.hlo.ir import Computation, Instruction, Module, print_module

    comps = {c.name: c for c in module.computations}
    params = _Parameters(module, f"{producer.name}` or `{consumer.name}")

    def run(ins: Any, name: str, root: bool) -> Any:
        ops_ = ["prod" if o == producer.name else params(o) for o in ins.operands]
        if ins.opcode == "fusion":
            return Instruction(
                name, ins.shape, "call", ops_, [("to_apply", ins.attr("calls"))], root=root
            )
        return dataclasses.replace(ins, name=name, operands=ops_, root=root)

    prod = run(producer, "prod", False)
    cons = run(consumer, "cons", True)
    entry = Computation("pair", [*params.made, prod, cons], entry=True)
    return print_module(Module("pair", [*_called(comps, entry), entry]))


def region_signature(text: str, tries: int | None = None) -> tuple[str, str]:
    """The cache signature of a region module (its text without metadata and with its
    names numbered in order of appearance, hashed; with ``tries``, the number of
    measurements its figure is the median of, :func:`tries_figure`) and that normal
    text."""
    import re

    body = re.sub(r",\s*metadata=\{[^{}]*\}", "", text)
    body = re.sub(r",\s*frontend_attributes=\{[^{}]*\}", "", body)
    names: dict[str, str] = {}

    def rename(m: Any) -> str:
        return names.setdefault(m.group(0), f"%n{len(names)}")

    body = re.sub(r"%[\w.\-]+", rename, body)
    digest = hashlib.sha256(body.encode()).hexdigest()[:24]
    key: dict[str, Any] = {"calibration": "xla region", "hash": digest}
    if tries is not None:
        key["tries"] = tries
    return json.dumps(key, sort_keys=True), body


def weight_parameters(module: Any, first_weight: int | None) -> dict[str, int]:
    """Bytes of each entry instruction of ``module`` that is a weight: a parameter whose
    number is ``first_weight`` or more, or a bitcast or copy of one; empty without
    ``first_weight``."""
    from tensat_py.frontends.hlo.ir import ArrayShape

    out: dict[str, int] = {}
    if first_weight is None:
        return out
    for ins in module.entry.instructions:
        shape = ins.shape
        if not isinstance(shape, ArrayShape):
            continue
        if ins.opcode == "parameter" and str(ins.payload).strip().isdigit():
            if int(str(ins.payload).strip()) >= first_weight:
                out[ins.name] = array_bytes(shape)
        elif ins.opcode in ("bitcast", "copy") and ins.operands and ins.operands[0] in out:
            out[ins.name] = array_bytes(shape)
    return out


def array_bytes(shape: Any) -> int:
    """Bytes of an HLO array shape, for every element type: its width is the number in
    its name (``c64``: 8 bytes, ``f8e4m3fn``: 1, ``s4``: half), ``pred`` a byte, ``token``
    and ``opaque`` none (XLA ``primitive_util::BitWidth``).

    >>> from tensat_py.frontends.hlo.ir import ArrayShape
    >>> [array_bytes(ArrayShape(t, (3, 4))) for t in ("f32", "c64", "pred", "s4", "token")]
    [48, 96, 12, 6, 0]
    """
    if shape.etype == "pred":
        bits = 8
    else:
        m = re.match(r"[a-z]+(\d+)", shape.etype)
        bits = int(m.group(1)) if m else 0
    return -(-math.prod(shape.dims) * bits // 8)


def region_dependencies(module: Any, regions: Sequence[Any]) -> list[tuple[int, ...]]:
    """For each of ``regions`` (entry instructions of the optimised ``module`` that run a
    kernel, in program order), the indices of the earlier regions whose results it reads,
    through instructions that run nothing (bitcasts, tuples, get-tuple-elements): the
    data edges of XLA CPU's thunk executor (:mod:`tensat_py.cost.executor`; it adds
    edges for buffers XLA reuses, which this leaves out)."""
    index = {ins.name: k for k, ins in enumerate(regions)}
    carries: dict[str, frozenset[int]] = {}
    out: list[tuple[int, ...]] = [() for _ in regions]
    for ins in module.entry.instructions:
        reads = frozenset().union(*(carries.get(o, frozenset()) for o in ins.operands))
        if ins.name in index:
            k = index[ins.name]
            out[k] = tuple(sorted(d for d in reads if d < k))
            carries[ins.name] = frozenset({k})
        else:
            carries[ins.name] = reads
    return out


def all_small(module: Any, regions: Sequence[Any]) -> bool:
    """Whether every buffer ``regions`` read or write holds at most
    :data:`~tensat_py.cost.executor.SEQUENTIAL_BYTES` (XLA then runs them in order)."""
    from tensat_py.frontends.hlo.ir import ArrayShape

    shapes = {ins.name: ins.shape for ins in module.entry.instructions}

    def small(shape: Any) -> bool:
        if isinstance(shape, ArrayShape):
            return array_bytes(shape) <= SEQUENTIAL_BYTES
        return all(small(s) for s in getattr(shape, "parts", ()))

    return all(
        small(ins.shape) and all(small(shapes.get(o)) for o in ins.operands if o in shapes)
        for ins in regions
    )
