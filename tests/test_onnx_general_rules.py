"""The ONNX front end's general rules under ``tensat rules check``: batch-norm folding into
a preceding convolution, and the biased matmul merge only where each bias is a vector of
its matmul's columns."""

from __future__ import annotations

from tensat_py.pipeline import RULES_DIR
from tensat_py.rules_check import check_files


def test_batch_norm_folding_and_bias_merge_pass_the_checker_at_several_seeds():
    for seed in (0, 1, 2):
        report = check_files([RULES_DIR / "general.rules"], seed=seed)
        status = {r.name: r.status for r in report.results}
        assert status["bn-fold-conv"] == "PASS", seed
        assert status["matmul-bias-merge"] == "PASS", seed
        assert report.counts["FAIL"] == 0 and report.counts["UNTESTABLE"] == 0, seed
