"""Rule files by name: the shipped ``rules/`` folder, the Rust core's built-in sets, and
:func:`load_rules`, which the pipeline, the front ends' defaults and the policies share.

>>> rs = load_rules("taso+fold")
>>> len(rs) > 0
True
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from tensat_py import _core
from tensat_py.options import suggest

__all__ = ["FOLD", "LAYOUT", "RULES_DIR", "load_rules"]

RULES_DIR = Path(__file__).parent / "rules"
"""Folder of the shipped rule files (``rules/`` in the repository)."""
#: The name of the built-in constant-folding rule set in :func:`load_rules`.
FOLD = "fold"
#: The name of the built-in layout rule set in :func:`load_rules` (the squeeze-excite gate
#: upsampled to the gated tensor's shape, ``_core.RuleSet.layout()``).
LAYOUT = "layout"


@lru_cache(maxsize=16)
def _load_rules_cached(path: str, mtime: float) -> _core.RuleSet:
    rs = _core.RuleSet.load(path)
    if len(rs) == 0:
        raise ValueError(
            f"{path}: no rules in this file (a rule reads `name: source => target`; "
            "see docs/rules.md)"
        )
    return rs


def load_rules(
    rules: str | Path | _core.RuleSet | Sequence[str | Path | _core.RuleSet],
) -> _core.RuleSet:
    """Resolves a rule set.

    Args:
        rules: a shipped rule file's name (``"taso"`` for ``rules/taso.rules``), a
            built-in set of the Rust core whose targets no rule file can write: ``"fold"``
            (constant folding of scalar literals, ``_core.RuleSet.constant_folding()``) or
            ``"layout"`` (a squeeze-excite gate upsampled to the gated tensor's shape,
            ``_core.RuleSet.layout()``), a path to a ``.rules`` file, an already parsed
            ``RuleSet``, several of them joined by ``+`` (``"taso+tensor+fold"``) or a
            sequence of them (their rules in order). A file of the same name in the
            current folder shadows a built-in set.

    Raises:
        FileNotFoundError: when no such rule file exists (the message lists the shipped and
            built-in ones).
        ValueError: ``file:line:col: message`` on a syntax error; a file that holds no
            rule (empty, comments only); two files sharing a rule name.
    """
    if isinstance(rules, _core.RuleSet):
        return rules
    if isinstance(rules, str) and "+" in rules and not Path(rules).exists():
        rules = [r for r in rules.split("+") if r]
    if not isinstance(rules, str | Path):
        if not isinstance(rules, Sequence):
            raise TypeError(
                f"rules: expected a rule file name, a path, a RuleSet or a list of them, "
                f"got {type(rules).__name__}"
            )
        sets = [load_rules(r) for r in rules]
        if not sets:
            raise ValueError("no rule files given")
        return sets[0] if len(sets) == 1 else _core.RuleSet.union(sets)
    built_in = {FOLD: _core.RuleSet.constant_folding, LAYOUT: _core.RuleSet.layout}
    if isinstance(rules, str) and rules in built_in and not Path(rules).exists():
        return built_in[rules]()
    path = Path(rules)
    if not path.suffix and not path.exists():
        path = RULES_DIR / f"{rules}.rules"
    if not path.is_file():
        shipped = sorted(p.stem for p in RULES_DIR.glob("*.rules"))
        raise FileNotFoundError(
            f"no rule file {str(rules)!r}{suggest(str(rules), [*shipped, *built_in])} "
            f"(shipped: {', '.join(shipped)}; built in: {', '.join(built_in)})"
        )
    return _load_rules_cached(str(path.resolve()), path.stat().st_mtime)
