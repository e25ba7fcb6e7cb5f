"""Argument validation in one place (tensat_py.options) for the API and the CLI: one-line
errors naming the option, "did you mean" for misspelt names, no tracebacks."""

from __future__ import annotations

import pytest
import tensat_py
from click.testing import CliRunner
from tensat_py.builder import GraphBuilder
from tensat_py.cli import main


def _tiny() -> tensat_py.Graph:
    b = GraphBuilder()
    x = b.input((4, 4), name="x")
    return b.finish([b.relu(x)])


BAD = [
    # (API keyword, value, CLI flag, expected message part after the option's name)
    ("k_multi", -1, "--k-multi", "must be a non-negative integer, got -1"),
    ("node_limit", -1, "--node-limit", "must be a non-negative integer, got -1"),
    ("iter_limit", -5, "--iter-limit", "must be a non-negative integer, got -5"),
    ("time_limit", 0.0, "--time-limit", "must be a positive, finite number"),
    ("extractor", "greedy_dag", "--extractor", "did you mean 'greedy-dag'?"),
    ("solver", "higs", "--solver", "did you mean 'highs'?"),
    ("cycle_filter", "eficient", "--cycle-filter", "did you mean 'efficient'?"),
    ("device", "a10", "--device", "did you mean 'a100'?"),
]


@pytest.mark.parametrize("key,value,flag,expect", BAD)
def test_api_rejects_bad_options_with_one_line(key, value, flag, expect) -> None:
    with pytest.raises(ValueError) as err:
        tensat_py.optimize(_tiny(), **{key: value})
    assert str(err.value).startswith(f"{key}: ") and expect in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("key,value,flag,expect", BAD)
def test_cli_rejects_bad_options_with_the_same_message_naming_the_flag(
    key, value, flag, expect
) -> None:
    out = CliRunner().invoke(main, ["optimize", "nasrnn", flag, str(value)])
    assert out.exit_code == 2, out.output
    assert f"error: {flag}: " in out.output and expect in out.output
    assert "Traceback" not in out.output
    assert out.exception is None or isinstance(out.exception, SystemExit)


def test_huge_limit_is_an_error_not_an_overflow() -> None:
    with pytest.raises(ValueError, match="node_limit"):
        tensat_py.optimize(_tiny(), node_limit=2**80)


def test_zoo_name_gets_a_suggestion() -> None:
    with pytest.raises(FileNotFoundError, match="did you mean 'bert'"):
        tensat_py.load("bret")
    out = CliRunner().invoke(main, ["optimize", "resnet5"])
    assert out.exit_code == 2 and "did you mean 'resnet50'" in out.output


def test_rule_file_name_gets_a_suggestion() -> None:
    with pytest.raises(FileNotFoundError, match="did you mean 'taso'"):
        tensat_py.optimize(_tiny(), rules="tasso")
    out = CliRunner().invoke(main, ["rules", "list", "tensr"])
    assert out.exit_code == 2 and "did you mean 'tensor'" in out.output


def test_optimize_loads_a_zoo_name_or_path(tmp_path) -> None:
    res = tensat_py.optimize("nasrnn", extractor="greedy", node_limit=500)
    assert res.cost_before > 0 and res.verify is not None and res.verify.passed
    with pytest.raises(FileNotFoundError, match="no-such.model"):
        tensat_py.optimize(str(tmp_path / "no-such.model"))


def test_optimize_rejects_other_types_with_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match=r"optimize\(\) takes a Graph.*tensat_py.load"):
        tensat_py.optimize(42)  # type: ignore[arg-type]


def test_cost_model_object_without_the_protocol_is_rejected() -> None:
    with pytest.raises(ValueError, match="cost_model: object is neither a name"):
        tensat_py.optimize(_tiny(), cost_model=object())


def test_extract_command_validates_its_options(tmp_path) -> None:
    f = tmp_path / "e.json"
    f.write_text('{"nodes": {"a": {"op": "x", "eclass": "0"}}, "root_eclasses": ["0"]}')
    out = CliRunner().invoke(main, ["extract", str(f), "--solver", "cpx"])
    assert out.exit_code == 2 and "error: --solver: unknown value 'cpx'" in out.output
    out = CliRunner().invoke(main, ["extract", str(f), "--time-limit", "-1"])
    assert out.exit_code == 2 and "--time-limit" in out.output
