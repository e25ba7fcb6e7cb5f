"""Fuzzing the front ends: hypothesis mutates valid inputs (truncate, flip bytes, drop nodes,
wrong shapes) of each format the `tensat` command reads — ONNX models, TASO `.model` files,
rule files, egraph-serialize JSON — and every case must end in a clear one-line error naming
the file (exit status 2) or a verified result (exit status 0), never a traceback, a hang or
a partial output file.

Cases per front end: ``TENSAT_FUZZ_EXAMPLES`` (default 15); the outcome counts are printed
at the end of the module (``python -m pytest tests/test_fuzz_frontends.py -s``) and written
to ``$TENSAT_FUZZ_REPORT`` (JSON) when set.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from tensat_py.cli import main

EXAMPLES = int(os.environ.get("TENSAT_FUZZ_EXAMPLES", "15"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=60_000,  # ms: a case that runs longer is a hang
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
OUTCOMES: dict[str, Counter] = defaultdict(Counter)
FAST = ["--extractor", "greedy-dag", "--node-limit", "400", "--time-limit", "20", "--json"]


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    summary = {fe: dict(c) for fe, c in sorted(OUTCOMES.items())}
    print(f"\nfuzz outcomes ({EXAMPLES} cases per front end): {json.dumps(summary)}")
    if os.environ.get("TENSAT_FUZZ_REPORT"):
        Path(os.environ["TENSAT_FUZZ_REPORT"]).write_text(json.dumps(summary, indent=1))


# ----------------------------------------------------------------------------- seeds
def _onnx_seed() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["a"]),
        helper.make_node("MatMul", ["x", "w2"], ["b"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Add", ["r", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "fuzz",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9  # what onnxruntime reads (newer onnx packages write 11+)
    return model


TASO_SEED = "100\n0\n10:0\n1,3,8,8\n101\n1\n11:0\n4,3,3,3\n102\n3\n100:0,101:0\n" + (
    "1,3,8,8,4,3,3,3,2,2,0,2,1,1\n103\n8\n102:0\n1,4,4,4\n"
)

RULES_SEED = """\
ewadd-comm: (ewadd ?a ?b) => (ewadd ?b ?a)
ewadd-assoc: (ewadd ?a (ewadd ?b ?c)) <=> (ewadd (ewadd ?a ?b) ?c)
relu-idem: (relu (relu ?x)) => (relu ?x)
matmul-linear: (ewadd (matmul 0 ?a ?b) (matmul 0 ?a ?c)) => (matmul 0 ?a (ewadd ?b ?c))
matmul-merge:
    (matmul 0 ?a ?b),
    (matmul 0 ?a ?c)
  => (split_0 (split 1 (matmul 0 ?a (concat 1 2 ?b ?c)))),
     (split_1 (split 1 (matmul 0 ?a (concat 1 2 ?b ?c))))
  if dim(?b, 0) == dim(?c, 0)
"""


def _egraph_seed(tmp: Path) -> dict:
    dump = tmp / "seed.json"
    res = CliRunner().invoke(
        main, ["optimize", "nasrnn", *FAST, "--node-limit", "150", "--dump-egraph", str(dump)]
    )
    assert res.exit_code == 0, res.output
    return json.loads(dump.read_text())


# ----------------------------------------------------------------------------- mutations
MUTATIONS = ["truncate", "flip", "drop", "shape"]


def _bytes_mutation(data: bytes, kind: str, r: random.Random) -> bytes:
    if kind == "truncate":
        return data[: r.randrange(len(data))]
    out = bytearray(data)
    for _ in range(r.randint(1, 8)):
        out[r.randrange(len(out))] ^= 1 << r.randrange(8)
    return bytes(out)


def _mutate_onnx(kind: str, r: random.Random) -> bytes:
    model = _onnx_seed()
    if kind in ("truncate", "flip"):
        return _bytes_mutation(model.SerializeToString(), kind, r)
    if kind == "drop":
        del model.graph.node[r.randrange(len(model.graph.node))]
    else:  # a wrong shape on the input, the output or a weight
        where = r.choice(["input", "output", "init"])
        if where == "init":
            t = model.graph.initializer[r.randrange(2)]
            arr = numpy_helper.to_array(t)
            shape = list(arr.shape)
            shape[r.randrange(len(shape))] = r.randint(1, 9)
            arr = np.resize(arr, shape)
            t.CopyFrom(numpy_helper.from_array(arr, t.name))
        else:
            vi = (model.graph.input if where == "input" else model.graph.output)[0]
            dims = vi.type.tensor_type.shape.dim
            dims[r.randrange(len(dims))].dim_value = r.choice([0, 1, 3, 5, 7])
    return model.SerializeToString()


def _mutate_text(text: str, kind: str, r: random.Random, record_lines: int = 1) -> bytes:
    data = text.encode()
    if kind in ("truncate", "flip"):
        return _bytes_mutation(data, kind, r)
    lines = text.splitlines()
    if kind == "drop":  # one record (a rule line, or a .model operator's four lines)
        start = r.randrange(0, len(lines), record_lines)
        del lines[start : start + record_lines]
    else:  # a wrong number: a shape, a parameter, an axis
        numbered = [i for i, line in enumerate(lines) if any(c.isdigit() for c in line)]
        i = r.choice(numbered)
        digits = [k for k, c in enumerate(lines[i]) if c.isdigit()]
        k = r.choice(digits)
        lines[i] = lines[i][:k] + str(r.choice([0, 2, 5, 9, 17])) + lines[i][k + 1 :]
    return ("\n".join(lines) + "\n").encode()


def _mutate_egraph(seed: dict, kind: str, r: random.Random) -> bytes:
    data = json.dumps(seed).encode()
    if kind in ("truncate", "flip"):
        return _bytes_mutation(data, kind, r)
    doc = json.loads(data)
    names = list(doc["nodes"])
    victim = r.choice(names)
    if kind == "drop":
        del doc["nodes"][victim]
    else:  # wrong structure: a child that is not a node, a bad cost, a bad root
        node = doc["nodes"][victim]
        choice = r.randrange(3)
        if choice == 0:
            node["children"] = [*node.get("children", []), "no-such-node"]
        elif choice == 1:
            node["cost"] = r.choice([-1.0, "x", None, float("inf")])
        else:
            doc["root_eclasses"] = [r.choice(["missing", 10**9])]
    return json.dumps(doc).encode()


def _fresh(folder: Path, name: str) -> Path:
    """``folder/name`` with nothing there (hypothesis reuses one tmp_path for all cases)."""
    path = folder / name
    path.unlink(missing_ok=True)
    return path


# ----------------------------------------------------------------------------- the oracle
def _judge(frontend: str, res, path: Path, out: Path | None) -> None:
    """One case's outcome: a clear error naming the file, or a verified result."""
    assert res.exception is None or isinstance(res.exception, SystemExit), (
        f"traceback on {path.name}: {res.exception!r}"
    )
    assert "Traceback" not in res.output
    if res.exit_code == 2:
        lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1, res.output
        assert path.name in lines[0], f"error does not name {path.name}: {lines[0]}"
        assert out is None or not out.exists(), "partial output after an error"
        OUTCOMES[frontend]["error"] += 1
        return
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    if "verify" in obj and obj["verify"] is not None:
        # the returned program is the verified candidate or the input itself
        kept = obj["extraction_status"] != "fallback-unverified"
        assert obj["verify"]["passed"] == kept, obj
        OUTCOMES[frontend]["verified" if kept else "fallback-unverified"] += 1
    else:
        OUTCOMES[frontend]["extracted"] += 1
    if out is not None:
        onnx.checker.check_model(onnx.load(str(out)))  # the output is whole


@FUZZ
@given(kind=st.sampled_from(MUTATIONS), seed=st.integers(0, 2**32 - 1))
def test_fuzzed_onnx_models_fail_clearly_or_verify(tmp_path: Path, kind: str, seed: int) -> None:
    path, out = _fresh(tmp_path, f"case-{kind}-{seed}.onnx"), _fresh(tmp_path, "out.onnx")
    path.write_bytes(_mutate_onnx(kind, random.Random(seed)))
    res = CliRunner().invoke(main, ["optimize", str(path), *FAST, "-o", str(out)])
    _judge("onnx", res, path, out)


@FUZZ
@given(kind=st.sampled_from(MUTATIONS), seed=st.integers(0, 2**32 - 1))
def test_fuzzed_taso_models_fail_clearly_or_verify(tmp_path: Path, kind: str, seed: int) -> None:
    path, out = _fresh(tmp_path, f"case-{kind}-{seed}.model"), _fresh(tmp_path, "out.onnx")
    path.write_bytes(_mutate_text(TASO_SEED, kind, random.Random(seed), record_lines=4))
    res = CliRunner().invoke(main, ["optimize", str(path), *FAST, "-o", str(out)])
    _judge("taso .model", res, path, out)


@FUZZ
@given(kind=st.sampled_from(MUTATIONS), seed=st.integers(0, 2**32 - 1))
def test_fuzzed_rule_files_fail_clearly_or_verify(tmp_path: Path, kind: str, seed: int) -> None:
    path = _fresh(tmp_path, f"case-{kind}-{seed}.rules")
    path.write_bytes(_mutate_text(RULES_SEED, kind, random.Random(seed)))
    res = CliRunner().invoke(main, ["optimize", "nasrnn", *FAST, "--rules", str(path)])
    _judge("rule files", res, path, None)


@pytest.fixture(scope="module")
def egraph_seed(tmp_path_factory) -> dict:
    return _egraph_seed(tmp_path_factory.mktemp("seed"))


@FUZZ
@given(kind=st.sampled_from(MUTATIONS), seed=st.integers(0, 2**32 - 1))
def test_fuzzed_egraph_json_fails_clearly_or_extracts(
    tmp_path: Path, egraph_seed: dict, kind: str, seed: int
) -> None:
    path = _fresh(tmp_path, f"case-{kind}-{seed}.json")
    path.write_bytes(_mutate_egraph(egraph_seed, kind, random.Random(seed)))
    res = CliRunner().invoke(main, ["extract", str(path), "--extractor", "greedy-dag", "--json"])
    _judge("egraph JSON", res, path, None)
    if res.exit_code == 0:
        assert json.loads(res.stdout)["choices"]
