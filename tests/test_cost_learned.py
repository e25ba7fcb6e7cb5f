"""The learned cost model: trained on a profile database (synthetic figures here, so the
tests do not depend on this machine's speed), held-out Spearman stored, unseen shapes
predicted, trained on first use or a one-line error."""

import pytest
from click.testing import CliRunner
from tensat_py.cli import main
from tensat_py.cost.base import make_context
from tensat_py.cost.database import ProfileDatabase, Record
from tensat_py.cost.profile import OrtBackend, fingerprint, signature
from tensat_py.cost.roofline import op_flops_bytes
from tensat_py.graph import TensorType

try:
    import lightgbm  # noqa: F401

    HAVE_LGB = True
except ImportError:
    HAVE_LGB = False

needs_lgb = pytest.mark.skipif(not HAVE_LGB, reason="the 'learn' extra (LightGBM) is not installed")


def _ctx(n, k, m):
    return make_context(
        "matmul", {"act": 0}, [(n, k), (k, m)], (n, m), operand_constant=(False, True)
    )


def _fill(db, fp, sizes):
    """Synthetic figures: a launch cost plus FLOPs at 10 GFLOP/s (a roofline stand-in)."""
    recs = []
    for n, k, m in sizes:
        c = _ctx(n, k, m)
        t = 5e-6 + op_flops_bytes(c)[0] / 1e10
        recs.append(Record(signature(c), "matmul", t, 0.0, 7, t))
    db.put(fp, recs)


SIZES = [(n, k, m) for n in (1, 4, 16, 64) for k in (8, 32, 128, 512) for m in (8, 64, 256)]


def _cpu_fp():
    return fingerprint(OrtBackend().info())


@needs_lgb
def test_training_stores_the_model_with_its_held_out_spearman(cache):
    from tensat_py.cost import learned

    db = ProfileDatabase()
    fp = _cpu_fp()
    _fill(db, fp, SIZES)
    _, report = learned.train(db, fp)
    assert report.n_train + report.n_test == len(SIZES) and report.n_test > 0
    assert report.spearman >= 0.9
    stored = db.load_model(fp, learned.KIND)
    assert stored["spearman"] == report.spearman
    assert stored["meta"]["objective"] == "rank"


@needs_lgb
def test_first_use_trains_from_the_cache_and_ranks_unseen_shapes(cache):
    from tensat_py.cost import get_cost_model

    db = ProfileDatabase()
    _fill(db, _cpu_fp(), SIZES)
    model = get_cost_model("learned", "cpu")
    assert db.load_model(_cpu_fp(), "learned") is not None
    small = model.node_cost("matmul", {"act": 0}, [(2, 20), (20, 20)], (2, 20))  # unseen
    big = model.node_cost("matmul", {"act": 0}, [(48, 400), (400, 200)], (48, 200))
    assert 0 < small < big


@needs_lgb
def test_regression_objective_also_trains(cache):
    from tensat_py.cost import learned

    db = ProfileDatabase()
    _fill(db, _cpu_fp(), SIZES)
    _, report = learned.train(db, _cpu_fp(), objective="regression")
    assert report.objective == "regression" and report.spearman >= 0.9


@needs_lgb
def test_an_empty_cache_is_a_one_line_error_saying_what_to_run(cache):
    r = CliRunner().invoke(
        main, ["optimize", "squeezenet", "--cost-model", "learned", "--device", "cpu", "-q"]
    )
    assert r.exit_code == 2
    assert len(r.output.strip().splitlines()) == 1
    assert "tensat profile --train" in r.output


@needs_lgb
def test_cli_train_prints_the_held_out_spearman(cache):
    _fill(ProfileDatabase(), _cpu_fp(), SIZES)
    r = CliRunner().invoke(main, ["profile", "--train"])
    assert r.exit_code == 0, r.output
    assert "held-out Spearman rank correlation" in r.output


def test_spearman_of_ranks():
    from tensat_py.cost.learned import spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1.0)


@needs_lgb
def test_a_split_is_priced_on_cpu_where_onnxruntime_runs_it(cache):
    from tensat_py.cost import get_cost_model
    from tensat_py.cost.learned import LearnedCostModel

    db = ProfileDatabase()
    _fill(db, _cpu_fp(), SIZES)
    model = get_cost_model("learned", "cpu")
    assert isinstance(model, LearnedCostModel)
    parts = (TensorType((1, 8, 8, 8), "float32"), TensorType((1, 4, 8, 8), "float32"))
    split = make_context("split", {"axis": 1}, [(1, 12, 8, 8)], parts)
    assert model.costs([split])[0] > 0
    model.fusion = False  # the rules of a device without onnxruntime: a view
    assert model.costs([split])[0] == 0.0


@needs_lgb
def test_a_model_stored_with_older_features_is_retrained_on_use(cache):
    from tensat_py.cost import learned

    db = ProfileDatabase()
    fp = _cpu_fp()
    _fill(db, fp, SIZES)
    db.save_model(fp, learned.KIND, b"not a model", spearman=0.5, n_train=1, n_test=1, meta={})
    model = learned.LearnedCostModel.for_device("cpu", db)
    assert model.spearman != 0.5
    assert db.load_model(fp, learned.KIND)["meta"]["features"] == learned.FEATURES


@needs_lgb
def test_a_model_trained_on_another_operator_set_is_retrained_on_use(cache):
    # The operator feature's codes are sorted positions: a new operator shifts them.
    from tensat_py.cost import learned

    db = ProfileDatabase()
    fp = _cpu_fp()
    _fill(db, fp, SIZES)
    meta = {"features": learned.FEATURES, "operators": "an older set"}
    db.save_model(fp, learned.KIND, b"not a model", spearman=0.5, n_train=1, n_test=1, meta=meta)
    model = learned.LearnedCostModel.for_device("cpu", db)
    assert model.spearman != 0.5
    assert db.load_model(fp, learned.KIND)["meta"]["operators"] == learned.operator_set()


def test_a_signature_with_a_scalar_operand_parses_back():
    # A scalar operand (shape ()) is a tensor, not a pair: training used to stop on one.
    from tensat_py.cost.learned import context_of

    ctx = make_context("sub", {}, [(), (2, 3)], (2, 3))  # not commuted: order kept
    back = context_of(signature(ctx))
    assert back.inputs[0] == TensorType((), "float32")
    assert back.output == TensorType((2, 3), "float32")


@needs_lgb
def test_a_matmul_with_its_activation_is_priced_as_the_matmul_then_the_activation(cache):
    from tensat_py.cost import get_cost_model

    _fill(ProfileDatabase(), _cpu_fp(), SIZES)
    model = get_cost_model("learned", "cpu")
    plain = _ctx(16, 128, 64)
    fused = make_context(
        "matmul", {"act": 2}, [(16, 128), (128, 64)], (16, 64), operand_constant=(False, True)
    )
    relu = make_context("relu", {}, [(16, 64)], (16, 64))
    a, b, c = model.costs([plain, fused, relu])
    assert c > 0
    assert b == pytest.approx(a + c)


@needs_lgb
def test_a_bandwidth_calibrated_after_the_model_was_built_is_used(cache):
    from tensat_py.cost import get_cost_model
    from tensat_py.cost.profile import BANDWIDTH_SIDES, bandwidth_signature

    db = ProfileDatabase()
    fp = _cpu_fp()
    _fill(db, fp, SIZES)
    model = get_cost_model("learned", "cpu")
    assert model.bandwidth() is None  # nothing calibrated yet: no cold weights
    rate = 1e9
    db.put(
        fp,
        [
            Record(bandwidth_signature(n), "__bandwidth__", rate, 0.0, 3, rate)
            for n in BANDWIDTH_SIDES
        ],
    )  # as `profile` calibrating in the same process would
    curve = model.bandwidth()
    assert curve is not None and curve(1 << 20) == rate


@needs_lgb
def test_learned_prices_a_cached_reorder_at_its_figure_and_others_on_the_fitted_curve(cache):
    from tensat_py.cost import layout, learned

    db = ProfileDatabase()
    fp = _cpu_fp()
    _fill(db, fp, SIZES)
    # input reorders of 4 kB, 40 kB and 400 kB at 10 us x (kB / 4) ** 0.5, but the 40 kB
    # one measured at 50 us (no call overhead is cached: figures are the records' own)
    shapes = [(1, 8, 1, 125), (1, 8, 10, 125), (1, 8, 100, 125)]
    secs = [10e-6, 50e-6, 100e-6]
    recs = [Record(layout.BLOCK_SIGNATURE, "__nchwc_block__", 8, 0.0, 0, 8)]
    for shape, t in zip(shapes, secs, strict=True):
        sig = layout.reorder_signature("input", shape)
        recs.append(Record(sig, layout.reorder_op("input"), t, 0.0, 7, t))
    db.put(fp, recs)
    _, price = learned.LearnedCostModel.for_device("cpu", db).reorder_price()
    assert price("input", shapes[1]) == pytest.approx(50e-6)
    _, curve = learned.LearnedCostModel.for_device("cpu", db, measured=False).reorder_price()
    fitted = curve("input", shapes[1])
    assert 20e-6 < fitted < 50e-6  # the curve through the three, not the figure
    # a size not cached: the curve for both (a rate per byte would say 10 x 10 us)
    unseen = (1, 8, 1000, 125)
    assert price("input", unseen) == curve("input", unseen) < 40 * fitted


def test_reorder_curves_fit_a_power_law_of_the_bytes():
    from tensat_py.cost import layout

    # 1 ns x bytes ** 0.5: a 100x larger copy costs 10x more, not 100x
    points = [(b, 1e-9 * b**0.5) for b in (1e3, 1e4, 1e5, 1e6)]
    curves = layout.ReorderCurves({"output": points})
    c, e = curves.curves["output"]
    assert e == pytest.approx(0.5) and c == pytest.approx(1e-9)
    assert curves.price("output", (1, 10, 10, 100)) == pytest.approx(1e-9 * 40_000**0.5)
    exact = {layout.reorder_signature("output", (1, 10, 10, 100)): 3.0}
    assert (
        layout.ReorderCurves({"output": points}, exact=exact).price("output", (1, 10, 10, 100))
        == 3.0
    )
