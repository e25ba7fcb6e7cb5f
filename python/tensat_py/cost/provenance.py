"""Where a measured cost model's prices came from, for the result to say.

A measured cost model (``xla``) prices the programs of one optimisation either whole, as
its runtime compiles them (every region measured), or operator by operator, when whole
programs cannot be priced in time; and past its measuring deadline it estimates a missing
figure with the roofline ``cpu`` preset instead of measuring it. A prediction made of such
estimates is a roofline figure under another name, so :func:`tensat_py.optimize` reports
how its two prices were made (``stats["pricing"]``, :meth:`Pricing.to_json`) and says so
in its message when some were estimated (:meth:`Pricing.note`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Pricing:
    """How the programs one optimisation priced (``graph_cost`` calls since the model's
    ``measure_until``) were priced.

    Attributes:
        whole: programs priced whole, as the runtime compiles them, each region measured.
        by_operator: programs priced as the sum of their operators' prices.
        estimated: operator prices among those of ``by_operator`` programs that are
            roofline ``cpu`` estimates, not measurements, because a figure was missing
            past the measuring deadline (``tensat profile`` can measure it ahead).
        unmeasurable: operator prices among them that are roofline ``cpu`` estimates
            because the runtime cannot run the operator alone (an opaque operator kept
            as it is, such as a ``sort``): no measurement can replace them.
        why: why programs were priced operator by operator (``""`` when none were).

    >>> p = Pricing(by_operator=2, estimated=3, why="412 regions to measure before the deadline")
    >>> for part in p.describe().split("; "):
    ...     print(part)
    operator by operator (412 regions to measure before the deadline)
    3 operator prices estimated with the roofline cpu preset, not measured
    >>> Pricing(whole=2).describe()
    'whole programs: each region XLA compiles measured'
    """

    whole: int = 0
    by_operator: int = 0
    estimated: int = 0
    unmeasurable: int = 0
    why: str = ""

    def describe(self) -> str:
        """One line for tables: how the prices were made."""
        if not self.by_operator:
            return "whole programs: each region XLA compiles measured" if self.whole else ""
        where = f"operator by operator ({self.why})" if self.why else "operator by operator"
        parts = [where]
        if self.estimated:
            parts.append(
                f"{self.estimated} operator prices estimated with the roofline cpu preset, "
                "not measured"
            )
        if self.unmeasurable:
            parts.append(
                f"{self.unmeasurable} roofline cpu estimates for operators XLA cannot run alone"
            )
        if len(parts) == 1:
            parts.append("every operator price measured")
        return "; ".join(parts)

    def note(self) -> str:
        """A sentence for the result's message when some prices were estimated, with how to
        measure them instead; ``""`` otherwise."""
        if not self.estimated:
            return ""
        return (
            f"{self.estimated} operator prices are roofline cpu estimates, not measurements "
            "(measuring them would have overrun the time limit): `tensat profile --runtime "
            "xla` on the input measures them ahead, or give a longer time limit"
        )

    def to_json(self) -> dict[str, Any]:
        """``{"whole", "by_operator", "estimated", "unmeasurable", "why", "described"}``."""
        return {**asdict(self), "described": self.describe()}
