"""For JAX users: optimise a jitted function's XLA program, and run the optimised program.

* :func:`optimize` lowers ``f`` at example arguments to HLO (``jax.jit(f).lower(...)``),
  optimises it (:func:`tensat_py.optimize`, HLO front end: verified through XLA by
  default) and returns the HLO text with its :class:`~tensat_py.result.OptimizeResult`.
* :func:`jit` wraps ``f`` like ``jax.jit``: per input signature (the arguments' pytree
  structure, shapes and dtypes) it optimises once, compiles the optimised HLO with XLA's
  CPU client (:func:`tensat_py.runtime.xla_exec.compile_text`) and runs that executable on
  later calls; a signature it could not optimise, or whose program was kept as lowered,
  runs ``jax.jit(f)`` instead, with one warning saying why.

Arguments are pytrees of arrays (positional only; no static arguments). JAX orders the
module's parameters as ``jax.tree_util.tree_flatten(args)`` orders the leaves (every leaf
is kept: ``keep_unused=True``) and returns a tuple of the output leaves when there are
several; the results are rebuilt in ``f``'s output structure.

The program runs on XLA's CPU client, so the default ``device`` is ``"cpu"`` (the roofline
model's CPU preset; the cost model is the HLO front end's default). Pass ``cost_model``,
``device``, ``time_limit`` and any other :func:`tensat_py.optimize` keyword through.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tensat_py.result import OptimizeResult
from tensat_py.verify import VerifyReport

__all__ = ["Optimized", "optimize", "jit", "Jitted", "Signature"]


def _jax() -> Any:
    try:
        import jax
    except ImportError as e:  # a dependency of tensat-py; absent only in a broken install
        raise ImportError(
            f"tensat_py.jax needs jax and jaxlib (dependencies of tensat-py): {e}"
        ) from None
    return jax


@contextmanager
def _x64_kept() -> Iterator[None]:
    """Leave the caller's ``jax_enable_x64`` as it was: running HLO through
    :mod:`tensat_py.runtime.xla_exec` turns 64-bit mode on, which would change what JAX
    lowers for the caller afterwards."""
    jax = _jax()
    before = bool(jax.config.read("jax_enable_x64"))
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


@dataclass(frozen=True)
class Optimized:
    """What :func:`optimize` returns.

    Attributes:
        hlo: the HLO text of the program chosen: the optimised one, or the input as lowered
            (re-printed) when :attr:`result` kept it (``result.fell_back``).
        input_hlo: the HLO text JAX lowered ``f`` to.
        result: the optimiser's :class:`~tensat_py.result.OptimizeResult` (predicted
            costs in seconds, status, message, statistics).
        in_tree, out_tree: the ``jax.tree_util`` structures of the arguments (as passed:
            a tuple of the positional arguments) and of ``f``'s result.
    """

    hlo: str
    input_hlo: str
    result: OptimizeResult
    in_tree: Any
    out_tree: Any

    def __repr__(self) -> str:
        return f"Optimized({self.summary()!r})"

    @property
    def report(self) -> VerifyReport | None:
        """The verification report of the candidate (None when verification was off)."""
        return self.result.verify

    @property
    def optimized(self) -> bool:
        """Whether :attr:`hlo` is a changed program (the optimiser did not keep the input)."""
        return not self.result.fell_back

    def summary(self) -> str:
        """One line: status, predicted speedup and what it is predicted by, verification;
        the message when the input was kept or some prices are roofline estimates
        (``stats["pricing"]``)."""
        r = self.result
        check = "not verified" if r.verify is None else f"verified: {r.verify.message}"
        guessed = bool(r.stats.get("pricing", {}).get("estimated"))
        return f"{r.extraction_status}: {r.speedup:.3f}x predicted ({r.basis}); {check}" + (
            f"; {r.message}" if (r.fell_back or guessed) and r.message else ""
        )


def _lower(f: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    jax = _jax()
    return jax.jit(f, keep_unused=True).lower(*args)


def optimize(f: Callable[..., Any], *example_args: Any, **options: Any) -> Optimized:
    """Lower ``f`` at ``example_args`` to HLO, optimise it and return the program.

    Args:
        f: a function JAX can jit (positional arguments, each a pytree of arrays).
        example_args: arguments fixing the signature (shapes, dtypes, structure); only their
            shapes and dtypes count.
        options: keywords for :func:`tensat_py.optimize` (``time_limit`` in seconds,
            ``cost_model``, ``device`` (default ``"cpu"``), ``verify``, ``confirm``, ...).

    Returns:
        an :class:`Optimized`: the HLO text (verified through XLA unless ``verify=False``),
        the input's HLO and the :class:`~tensat_py.result.OptimizeResult`.

    Raises:
        ImportError: jax is not installed.
        ValueError: a bad option (from :func:`tensat_py.optimize`), or HLO the front end
            cannot read (``HloParseError``, ``HloTranslateError``: ``file:line:col``).
        Exception: whatever JAX raises lowering ``f`` (a tracer error, a bad argument).

    >>> import jax.numpy as jnp
    >>> opt = optimize(lambda x, w: jnp.tanh(x @ w), jnp.ones((2, 3)), jnp.ones((3, 4)),
    ...                time_limit=10)
    >>> opt.hlo.startswith("HloModule") and opt.report.passed
    True
    """
    import tensat_py
    from tensat_py.frontends.hlo import loads
    from tensat_py.runtime.protocol import hlo_text

    lowered = _lower(f, example_args)
    text = lowered.as_text(dialect="hlo")
    name = getattr(f, "__name__", "f")
    graph = loads(text, f"<jax {name}>")
    with _x64_kept():
        result = tensat_py.optimize(graph, **{"device": "cpu", **options})
    return Optimized(
        hlo=hlo_text(result.graph, graph),
        input_hlo=text,
        result=result,
        in_tree=lowered.in_tree,
        out_tree=lowered.out_tree,
    )


@dataclass
class Signature:
    """One input signature of a :class:`Jitted` function and how it runs.

    Attributes:
        optimized: the :func:`optimize` result (None when optimising raised).
        runs: ``"tensat"`` (the optimised XLA executable) or ``"jax.jit"`` (the fallback).
        reason: why it falls back (empty when it runs the optimised program).
    """

    optimized: Optimized | None
    runs: str
    reason: str = ""
    executable: Any = field(default=None, repr=False)
    n_out: int = field(default=0, repr=False)


class Jitted:
    """The callable :func:`jit` returns (see there).

    Attributes:
        signatures: ``{signature key: Signature}`` for every signature seen.
        optimizations: how many times ``f`` was optimised (once per new signature).
    """

    def __init__(self, f: Callable[..., Any], options: dict[str, Any]) -> None:
        self.f = f
        self.options = options
        self.signatures: dict[Any, Signature] = {}
        self.optimizations = 0
        self._fallback: Any = None
        self.__wrapped__ = f
        self.__doc__ = getattr(f, "__doc__", None)
        self.__name__ = getattr(f, "__name__", "f")

    def _key(self, args: tuple[Any, ...]) -> Any:
        jax = _jax()
        leaves, tree = jax.tree_util.tree_flatten(args)
        return tree, tuple(_leaf_sig(x) for x in leaves)

    def fallback(self) -> Callable[..., Any]:
        """``jax.jit(f)``, made once."""
        if self._fallback is None:
            self._fallback = _jax().jit(self.f)
        return self._fallback

    def status(self, *args: Any) -> Signature | None:
        """How the signature of ``args`` runs (None when it was never called)."""
        return self.signatures.get(self._key(args))

    def __call__(self, *args: Any) -> Any:
        key = self._key(args)
        sig = self.signatures.get(key)
        if sig is None:
            sig = self.signatures[key] = self._prepare(args)
            if sig.runs != "tensat":
                warnings.warn(
                    f"tensat_py.jax.jit({self.__name__}): running jax.jit for this signature: "
                    f"{sig.reason}",
                    RuntimeWarning,
                    stacklevel=2,
                )
        if sig.runs == "tensat":
            try:
                return self._run(sig, args)
            except Exception as e:  # XLA refused the arguments: jax.jit from now on
                sig.runs, sig.reason, sig.executable = "jax.jit", f"XLA failed to run it: {e}", None
                warnings.warn(
                    f"tensat_py.jax.jit({self.__name__}): running jax.jit for this signature: "
                    f"{sig.reason}",
                    RuntimeWarning,
                    stacklevel=2,
                )
        return self.fallback()(*args)

    def _prepare(self, args: tuple[Any, ...]) -> Signature:
        """Optimise and compile for the signature of ``args``; a fallback on failure."""
        from tensat_py.runtime.xla_exec import compile_text

        self.optimizations += 1
        try:
            opt = optimize(self.f, *args, **self.options)
        except Exception as e:  # lowering, loading or optimising: jax.jit runs it
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            return Signature(None, "jax.jit", f"optimisation failed: {first}")
        if not opt.optimized:
            r = opt.result
            return Signature(
                opt,
                "jax.jit",
                f"the program was kept as lowered ({r.extraction_status}: {r.message})",
            )
        jax = _jax()
        n_in = len(jax.tree_util.tree_leaves(args))
        if opt.in_tree.num_leaves != n_in:
            return Signature(opt, "jax.jit", f"{opt.in_tree.num_leaves} parameters, {n_in} leaves")
        if "python_cpu_callback" in opt.hlo:
            return Signature(opt, "jax.jit", "the program calls back into Python")
        try:
            with _x64_kept():
                exe = compile_text(opt.hlo)
        except RuntimeError as e:
            return Signature(opt, "jax.jit", f"XLA could not compile it: {e}")
        return Signature(opt, "tensat", "", exe, opt.out_tree.num_leaves)

    def _run(self, sig: Signature, args: tuple[Any, ...]) -> Any:
        jax = _jax()
        assert sig.optimized is not None
        dev = jax.devices("cpu")[0]
        leaves = [jax.device_put(x, dev) for x in jax.tree_util.tree_leaves(args)]
        out = sig.executable.execute_sharded(leaves).disassemble_into_single_device_arrays()
        if len(out) != sig.n_out:
            raise RuntimeError(f"{len(out)} outputs, {sig.n_out} expected")
        return jax.tree_util.tree_unflatten(sig.optimized.out_tree, [o[0] for o in out])


def _leaf_sig(x: Any) -> tuple[Any, ...]:
    """A leaf's part of a signature: shape, dtype and weak type, as ``jax.jit`` keys it."""
    import numpy as np

    shape = tuple(np.shape(x))
    dtype = getattr(x, "dtype", None)
    if dtype is None:  # a Python scalar: JAX gives it a weak type
        return shape, type(x).__name__, True
    return shape, str(dtype), bool(getattr(x, "weak_type", False))


def jit(f: Callable[..., Any], **options: Any) -> Jitted:
    """``f`` compiled through tensat: a callable that, for each new input signature
    (pytree structure, shapes, dtypes), optimises ``f`` once (:func:`optimize` with
    ``options``), compiles the optimised HLO with XLA's CPU client and then runs that
    executable; outputs come back as JAX arrays in ``f``'s output structure.

    A signature whose optimisation raised, whose program the optimiser kept as lowered
    (nothing cheaper, verification or confirmation failed) or that XLA cannot compile or
    run here runs ``jax.jit(f)`` instead; a :class:`RuntimeWarning` says so once, with the
    reason, and ``.status(*args)`` tells (a :class:`Signature`: ``runs`` is ``"tensat"`` or
    ``"jax.jit"``, ``reason``, the :class:`Optimized` program). ``.optimizations`` counts
    the optimisations.

    Args:
        f: a function JAX can jit (positional pytree-of-array arguments).
        options: keywords for :func:`tensat_py.optimize` (``time_limit`` in seconds per
            signature, ``cost_model``, ``device``, ...).

    Raises:
        ImportError: jax is not installed.

    >>> import jax.numpy as jnp
    >>> g = jit(lambda x, w: jnp.tanh(x @ w), time_limit=10)
    >>> g(jnp.ones((2, 3)), jnp.ones((3, 4))).shape
    (2, 4)
    """
    _jax()
    return Jitted(f, dict(options))
