"""The layers of the open language agree: Rust declarations, Python declarations, docs.

Every operator is declared once per layer (docs/language.md, "Adding an operator"): an
``OpDecl`` in ``rust/src/lang/<dialect>.rs`` (reached through ``_core.operators()``), an
``OpDef`` in ``tensat_py/ops/<dialect>.py``, and a row in docs/language.md. These tests
fail when one of them is missing or when they disagree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tensat_py import ops
from tensat_py.graph import operators

DOC = Path(__file__).resolve().parents[1] / "docs" / "language.md"
KINDS = {
    "T": "tensor",
    "pair": "pair",
    "int": "int",
    "float": "float",
    "list": "list",
    "sym": "sym",
}
#: Operators that never reach an ONNX file on their own (handled by the exporter's frame:
#: graph inputs, initializers, the output chain).
NO_ONNX_EXPORT = {"noop", "input", "weight"}
#: Operators no ONNX operator imports into (TASO-internal or the exporter's frame).
NO_ONNX_IMPORT = {
    "noop",
    "split_0",
    "split_1",
    "enlarge",
    "merge",
    "opaque",
    "input",
    "weight",
    "rsqrt",  # Reciprocal(Sqrt(x)): a rule (rsqrt-is-reciprocal-sqrt) finds it
    "scalar",  # rank-0 constants import as weights
}


def doc_rows(text: str) -> dict[str, tuple[str, tuple[tuple[str, str], ...], tuple | None]]:
    """``{op: (section, operands, variadic)}`` from the operator tables of the page."""
    rows: dict[str, tuple[str, tuple[tuple[str, str], ...], tuple | None]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        m = re.match(r"\| `([a-z0-9_]+)` \| ([^|]*) \|", line)
        if not m or not section.startswith("Operators"):
            continue
        name, cell = m.group(1), m.group(2).strip()
        assert name not in rows, f"docs/language.md lists `{name}` twice"
        fixed: list[tuple[str, str]] = []
        variadic = None
        for part in [p.strip() for p in cell.split(",") if p.strip()]:
            pm = re.fullmatch(r"(\S+) \*(\w+)\*(\.\.\.)?", part)
            assert pm, f"docs/language.md: `{name}`: cannot read operand `{part}`"
            entry = (pm.group(1), KINDS[pm.group(2)])
            if pm.group(3):
                variadic = entry
            else:
                fixed.append(entry)
        rows[name] = (section, tuple(fixed), variadic)
    return rows


def test_docs_list_every_declared_operator_with_its_operands() -> None:
    rows = doc_rows(DOC.read_text())
    decls = operators()
    assert sorted(set(decls) - set(rows)) == [], "declared but not documented"
    assert sorted(set(rows) - set(decls)) == [], "documented but not declared"
    for name, d in decls.items():
        section, fixed, variadic = rows[name]
        assert section.lower().endswith(f"the {d['dialect']} dialect"), (name, section)
        assert fixed == tuple((str(n), str(k)) for n, k in d["operands"]), name
        assert variadic == (tuple(d["variadic"]) if d["variadic"] else None), name


def test_every_declared_operator_has_a_python_declaration() -> None:
    decls = operators()
    py = ops.all_ops()
    assert sorted(set(decls) - set(py)) == [], "declared in Rust, missing in tensat_py.ops"
    assert sorted(set(py) - set(decls)) == [], "in tensat_py.ops but not declared in Rust"
    for name, d in decls.items():
        op = py[name]
        assert op.dialect == d["dialect"], (name, op.dialect, d["dialect"])
        assert callable(op.evaluate), name
        assert callable(op.cost), name
        if d["dialect"] == "knossos":  # binders: no ONNX form (docs/knossos.md)
            continue
        if d["dialect"] == "hlo":  # HLO-only operators: printed as HLO, never ONNX
            assert callable(op.to_hlo), f"`{name}` has no HLO export"
            continue
        if name not in NO_ONNX_EXPORT:
            assert callable(op.to_onnx), f"`{name}` has no ONNX export"
        if name not in NO_ONNX_IMPORT:
            assert op.onnx_types, f"no ONNX operator imports into `{name}`"


def test_every_listed_onnx_type_has_an_importer_and_vice_versa() -> None:
    importers = ops.onnx_importers()
    listed = {t for op in ops.all_ops().values() for t in op.onnx_types}
    assert sorted(listed - set(importers)) == [], "listed in onnx_types without an importer"
    assert sorted(set(importers) - listed - {"Identity", "Constant"}) == [], (
        "importers whose ONNX type no operator lists"
    )


def test_doc_reader_notices_a_missing_row() -> None:
    text = DOC.read_text()
    rows = doc_rows(text)
    assert "softmax" in rows
    broken = "\n".join(ln for ln in text.splitlines() if not ln.startswith("| `softmax` |"))
    assert "softmax" not in doc_rows(broken)


@pytest.mark.parametrize("op", ["add", "reduce_sum", "transpose", "conv2d"])
def test_lookup_is_by_name(op: str) -> None:
    assert ops.get(op).name == op
    with pytest.raises(KeyError, match="frobnicate"):
        ops.get("frobnicate")


def test_every_dtype_is_known_to_the_analysis_numpy_and_onnx() -> None:
    """One list of dtypes: the Rust analysis types a leaf of each, NumPy and the ONNX
    tables agree with :data:`tensat_py.graph.DTYPE_BYTES`."""
    from tensat_py import _core
    from tensat_py.frontends.onnx.common import DTYPE_TO_ELEM
    from tensat_py.graph import DTYPE_BYTES
    from tensat_py.ops.tensor import DTYPES

    assert set(DTYPES) == set(DTYPE_BYTES) == set(DTYPE_TO_ELEM)
    for name, size in DTYPE_BYTES.items():
        assert DTYPES[name].itemsize == size, name
        tc = _core.TypeChecker()
        x = tc.add("input", {"name@shape": f"x@2_3:{name}"}, [])
        assert (tc.dtype(x), tc.shape(x)) == (name, [2, 3])
