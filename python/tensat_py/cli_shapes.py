"""``--input-shape NAME=D0,D1,...``: static shapes for ONNX inputs with symbolic
dimensions, shared by ``tensat optimize`` and ``tensat profile``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

__all__ = ["input_shape_option", "input_shapes"]


def input_shape_option(extra: str = "") -> Callable[[Any], Any]:
    """The repeatable ``--input-shape`` click option (into the ``input_shape`` parameter);
    ``extra`` ends its help text."""
    return click.option(
        "--input-shape",
        "input_shape",
        multiple=True,
        metavar="NAME=D0,D1,...",
        help="Static shape for an ONNX input with symbolic dimensions (repeatable), e.g. "
        "x=1,3,224,224" + (f"; {extra}" if extra else "") + ".",
    )


def input_shapes(specs: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """``("x=1,3,224,224", ...)`` -> ``{"x": (1, 3, 224, 224)}``.

    Raises:
        click.BadParameter: a spec without ``=``, a repeated name, or a dimension that is
            not a positive integer.
    """
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, sep, dims = spec.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or min(shape) < 1 or name in out:
            raise click.BadParameter(
                f"{spec!r}: expected NAME=D0,D1,... with positive dimensions, once per name",
                param_hint="--input-shape",
            )
        out[name] = shape
    return out
