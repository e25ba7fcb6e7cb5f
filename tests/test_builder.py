"""Graph building, type errors, flat form and rebuilding from an e-graph export."""

import json
import re

import pytest
from tensat_py import _core
from tensat_py.builder import GraphBuilder, act_code, pad_code
from tensat_py.graph import PARAM_KINDS, Graph, GraphError, TensorType


def fake_export(flat):
    """An export where every flat node is its own e-class (what EGraph.export gives
    for a program before saturation), built without the Rust e-graph."""
    g_classes = []
    tc = _core.TypeChecker()
    tid = {}
    sigs = _core.signatures()
    for i, (op, ch) in enumerate(flat):
        if not ch and op not in sigs:
            if re.fullmatch(r"-?[0-9]+", op):
                g_classes.append({"kind": "int", "value": int(op)})
            elif op.startswith("["):
                g_classes.append({"kind": "list", "value": json.loads(op)})
            elif re.fullmatch(r"-?[0-9.]+(e-?[0-9]+)?|-?inf", op):
                g_classes.append({"kind": "float", "value": float(op)})
            else:
                g_classes.append({"kind": "sym", "value": op})
            continue
        params, inputs = {}, []
        for (name, kind), c in zip(sigs[op], ch, strict=True):
            if kind in PARAM_KINDS:
                params[name] = g_classes[c]["value"]
            else:
                inputs.append(tid[c])
        if op == "noop":
            g_classes.append({"kind": "tensor", "shape": [], "constant": False})
            continue
        tid[i] = tc.add(op, params, inputs)
        kind = tc.kind(tid[i])
        g_classes.append(
            {
                "kind": kind,
                "shape": tc.shape(tid[i]) if kind == "tensor" else None,
                "constant": tc.constant(tid[i]),
            }
        )
    return {
        "root": len(flat) - 1,
        "num_classes": len(flat),
        "node_op": [op for op, _ in flat],
        "node_eclass": list(range(len(flat))),
        "node_children": [list(ch) for _, ch in flat],
        "filtered": [],
        "classes": g_classes,
    }


def small_graph() -> Graph:
    b = GraphBuilder()
    x = b.input((1, 4, 8, 8), name="x")
    y = b.conv2d(x, b.weight((8, 4, 3, 3), name="w"), stride=2, padding="same", act="relu")
    z = b.poolmax(y, 2, 2, padding="valid")
    m = b.matmul(b.reshape(z, (1, 32)), b.weight((32, 5)), act="tanh")
    return b.finish([m, y])


def test_codes():
    assert [act_code(a) for a in ("none", "sigmoid", "relu", "tanh")] == [0, 1, 2, 3]
    assert pad_code("same") == 0 and pad_code("VALID") == 1
    with pytest.raises(ValueError):
        act_code("gelu")
    with pytest.raises(ValueError):
        pad_code("full")


def test_shapes_come_from_the_rust_analysis():
    g = small_graph()
    conv = next(n for n in g if n.op == "conv2d")
    assert conv.type == TensorType((1, 8, 4, 4))
    assert conv.params == {"stride_h": 2, "stride_w": 2, "pad": 0, "act": 2}
    assert g.output_types() == [TensorType((1, 5)), TensorType((1, 8, 4, 4))]
    assert g.op_counts()["weight"] == 2
    assert [g[i].name for i in g.inputs()] == ["x"]
    assert [g[i].name for i in g.weights()] == ["w", "w_0"]
    assert g[g.weights()[0]].constant and not conv.constant


def test_valid_conv_and_grouped_conv():
    b = GraphBuilder()
    x = b.input((1, 8, 9, 9))
    assert b.conv2d(x, (4, 8, 3, 3), stride=(2, 2), padding="valid").shape == (1, 4, 4, 4)
    assert b.conv2d(x, (8, 2, 3, 3)).shape == (1, 8, 9, 9)  # 4 groups


def test_type_error_names_node_operator_and_shapes():
    b = GraphBuilder()
    a = b.input((2, 3), name="a")
    c = b.input((4, 5), name="c")
    with pytest.raises(GraphError) as e:
        b.matmul(a, c)
    msg = str(e.value)
    assert "matmul" in msg and "[2, 3]" in msg and "node 'matmul_2'" in msg
    assert isinstance(e.value, ValueError)


def test_bad_nodes_rejected():
    g = Graph()
    x = g.add_input("x", (2, 3))
    with pytest.raises(GraphError, match="unknown operator"):
        g.add_node("frobnicate", {}, [x])
    with pytest.raises(GraphError, match="no parameter"):
        g.add_node("relu", {"act": 1}, [x])
    with pytest.raises(GraphError, match="earlier node"):
        g.add_node("relu", {}, [5])
    with pytest.raises(GraphError, match="duplicate"):
        g.add_input("x", (2, 3))
    with pytest.raises(GraphError):
        g.add_input("bad name", (2,))


def test_concat_variants_and_split():
    b = GraphBuilder()
    ts = [b.input((2, k + 1)) for k in range(7)]
    for n, op in [(2, "concat"), (3, "concat3"), (4, "concat4"), (5, "concat5")]:
        c = b.concat(1, ts[:n])
        assert b.graph[c.id].op == op
        assert c.shape == (2, sum(range(1, n + 1)))
    big = b.concat(1, ts)
    assert big.shape == (2, 28)
    c = b.concat(1, ts[:2])
    p0, p1 = b.split(c, 1, sizes=(1, 2))
    assert p0.shape == (2, 1) and p1.shape == (2, 2)
    with pytest.raises(GraphError, match="differ"):
        b.split(c, 1, sizes=(2, 1))
    with pytest.raises(GraphError, match="split"):
        b.split(ts[0], 1)


def test_other_builders():
    b = GraphBuilder()
    x = b.input((1, 4, 6, 6))
    assert b.transpose(x, (0, 2, 3, 1)).shape == (1, 6, 6, 4)
    assert b.batchnorm(x).shape == x.shape
    assert b.dropout(b.sigmoid(b.tanh(x))).shape == x.shape
    w = b.weight((8, 2, 1, 1))
    assert b.enlarge(w, b.weight((8, 2, 3, 3))).shape == (8, 2, 3, 3)
    assert b.merge(w, 2).shape == (8, 4, 1, 1)
    assert b.poolavg(x, (3, 3), (2, 2), "same", "relu").shape == (1, 4, 3, 3)
    with pytest.raises(GraphError):
        b.finish([])


def test_to_flat_shares_leaves_and_chains_outputs():
    g = small_graph()
    flat = g.to_flat()
    assert flat[-1][0] == "noop"
    ops = [op for op, _ in flat]
    assert ops.count("1") <= 1 and ops.count("0") == 1  # shared integer leaves
    for i, (_, ch) in enumerate(flat):
        assert all(c < i for c in ch)
    assert g.to_sexpr().startswith("(noop (matmul 3 (reshape (poolmax (conv2d 2 2 0 2")
    b = GraphBuilder()
    x = b.input((2,), name="x")
    assert b.finish([b.relu(x)]).to_flat() == [("x@2", []), ("input", [0]), ("relu", [1])]


def test_from_choices_round_trip():
    g = small_graph()
    ex = fake_export(g.to_flat())
    h = Graph.from_choices(ex, {c: c for c in range(ex["num_classes"])})
    assert h.op_counts() == g.op_counts()
    assert "noop" not in h.op_counts()
    assert h.output_types() == g.output_types()
    assert h.to_flat() == g.to_flat()
    # list form of choices
    h2 = Graph.from_choices(ex, list(range(ex["num_classes"])))
    assert h2.to_flat() == g.to_flat()


def test_from_choices_with_the_rust_export():
    if not hasattr(_core, "EGraph"):
        pytest.skip("_core.EGraph not built")
    g = small_graph()
    ex = _core.EGraph(g.to_flat()).export()
    choices = {c: -1 for c in range(ex["num_classes"])}
    for n, c in enumerate(ex["node_eclass"]):
        choices[c] = n
    h = Graph.from_choices(ex, choices)
    assert h.op_counts() == g.op_counts()
    assert h.output_types() == g.output_types()


def test_from_choices_errors():
    g = small_graph()
    ex = fake_export(g.to_flat())
    with pytest.raises(GraphError, match="no chosen"):
        Graph.from_choices(ex, {})
    # A cycle: make the relu-free conv's class choose a node whose child is the root's chain.
    flat = [("x@2", []), ("input", [0]), ("relu", [1]), ("tanh", [2])]
    ex2 = fake_export(flat)
    ex2["node_op"].append("relu")
    ex2["node_eclass"].append(2)
    ex2["node_children"].append([3])  # relu(tanh(relu(...))) in the same class
    with pytest.raises(GraphError, match="cycle"):
        Graph.from_choices(ex2, {0: 0, 1: 1, 2: 4, 3: 3})
    with pytest.raises(GraphError, match="belongs"):
        Graph.from_choices(ex2, {0: 0, 1: 1, 2: 3, 3: 3})


def test_rank1_reshape_and_transpose_enter_the_flat_form_and_come_back():
    b = GraphBuilder()
    x = b.input((4, 2), name="x")
    y = b.transpose(b.reshape(x, (8,)), (0,))
    g = b.finish([y])
    flat = g.to_flat()
    assert ("[8]", []) in flat and ("[0]", []) in flat
    back = Graph.from_choices(fake_export(flat), list(range(len(flat))))
    assert [n.op for n in back] == ["input", "reshape", "transpose"]
    assert back[1].params == {"shape": (8,)} and back.type_of(back.outputs[0]).shape == (8,)


def test_general_operators_build_with_dtypes_and_float_and_list_params():
    b = GraphBuilder()
    x = b.input((2, 3), name="x", dtype="float16")
    c = b.op("clip", x, lo=0, hi=6.0)
    r = b.op("reduce_mean", c, axes=[1], keepdims=1)
    m = b.op("less", r, b.input((1,), name="t", dtype="float16"))
    g = b.finish([m])
    assert g.type_of(c.id) == TensorType((2, 3), "float16")
    assert g[c.id].params == {"lo": 0.0, "hi": 6.0}
    assert g.type_of(m.id) == TensorType((2, 1), "bool")
    flat = g.to_flat()
    assert ("x@2_3:float16", []) in flat and ("0.0", []) in flat and ("[1]", []) in flat
    back = Graph.from_choices(fake_export(flat), list(range(len(flat))))
    assert back.type_of(back.outputs[0]) == TensorType((2, 1), "bool")
    assert back[1].type == TensorType((2, 3), "float16")


def test_dtype_and_param_errors_name_the_node():
    b = GraphBuilder()
    x = b.input((2, 3), name="x")
    h = b.input((2, 3), name="h", dtype="float16")
    with pytest.raises(GraphError, match="dtypes differ"):
        b.op("add", x, h)
    with pytest.raises(GraphError, match="`axes` must be a sequence of ints"):
        b.op("reduce_sum", x, axes="1", keepdims=0)
    with pytest.raises(GraphError, match="unknown dtype"):
        b.input((2,), name="q", dtype="float8")
    with pytest.raises(ValueError, match="unknown dtype"):
        TensorType((2,), "complex64")
