"""A Gymnasium environment for rule choice: ``tensat/Rewrite-v0``.

As PolyGym (Brauckmann et al., PACT 2021) and CompilerGym (Cummins et al., CGO 2022) do
for loop transformations and compiler passes, an action names a rule of the rule set,
independent of the program: action ``r < num_rules`` runs one exploration iteration of the
e-graph in which only rule ``r``'s matches are applied (multi-pattern rules included: they
are searched whenever chosen); the last action, ``num_rules``, stops.

* **Observation** (``Box``, float32, ``7 + 2 * num_rules`` values): log(1 + e-nodes),
  log(1 + e-classes), the fraction of the step budget used, the current best cost over
  the input's, the log of the last reward's magnitude, whether the e-node budget is
  reached, whether the e-graph is saturated; then per rule log(1 + its matches in the
  current e-graph) and whether it is exhausted (its last application changed nothing and
  nothing changed since).
* **Reward**: decrease of the best program's cost in milliseconds (greedy DAG
  extraction under the cost model, roofline by default; for Knossos terms RLO's unitless
  cost), so the return of an episode is the input's cost minus the final one.
* **Episode end**: ``terminated`` on the stop action or saturation (every rule
  exhausted); ``truncated`` when ``max_steps`` actions ran or the e-graph holds
  ``node_limit`` e-nodes.

Programs: a tensor :class:`~tensat_py.graph.Graph` or zoo name (``program="nasrnn"``), or
a Knossos term (flat node list, with ``rules="knossos_simplify+knossos_binding"``,
``cost_model="rlo"``). Requires Gymnasium (the ``learn`` extra). Importing this module
registers the id; ``gym.make("tensat_py.policies.env:tensat/Rewrite-v0", program=...)``
imports and makes it in one call.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tensat_py import _core
from tensat_py.policies import RuleSubset, best_program

__all__ = ["RewriteEnv", "register"]

ENV_ID = "tensat/Rewrite-v0"


class RewriteEnv(gym.Env):
    """Rule choice on one program's e-graph (see the module).

    Args:
        program: a Graph, a zoo model name, or a Knossos flat term.
        rules: rule file name(s) (default ``"taso"``).
        cost_model: ``"roofline"`` (default) or ``"rlo"`` (Knossos terms).
        max_steps: actions per episode before truncation (default 20).
        node_limit: e-nodes before truncation (default 20,000).
        device: roofline device preset (default ``"t4"``).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        program: Any = "nasrnn",
        rules: str = "taso",
        cost_model: str = "roofline",
        max_steps: int = 20,
        node_limit: int = 20_000,
        device: str = "t4",
    ) -> None:
        from tensat_py.cost import get_cost_model
        from tensat_py.rule_files import load_rules

        if isinstance(program, str):
            from tensat_py import models

            program = models.get(program)
        self.flat = list(program.to_flat()) if hasattr(program, "to_flat") else list(program)
        self.ruleset = load_rules(rules)
        self.cost_model_name = cost_model
        self.model = None if cost_model == "rlo" else get_cost_model(cost_model, device)
        self.max_steps = max_steps
        self.node_limit = node_limit
        self.num_rules = len(self.ruleset)
        self.action_space = spaces.Discrete(self.num_rules + 1)
        n = 7 + 2 * self.num_rules
        # Every feature is a count's log, a share, a ratio of costs or a flag: >= 0.
        self.observation_space = spaces.Box(0.0, 1e6, shape=(n,), dtype=np.float32)
        self.egraph: Any = None
        self.steps = 0
        self.cost0 = self.cost = 1.0
        self.last_reward = 0.0
        self.exhausted = np.zeros(self.num_rules, dtype=bool)

    def _cost(self) -> float:
        if self.model is None:
            return float(self.egraph.extract_rlo({})[0])
        export = self.egraph.export()
        return best_program(export, self.model.costs_for_export(export))[0] * 1e3

    def _obs(self) -> np.ndarray:
        enodes, eclasses = self.egraph.size()
        counts = np.asarray(self.egraph.match_counts(self.ruleset, True), dtype=np.float64)
        head = [
            math.log1p(enodes),
            math.log1p(eclasses),
            self.steps / self.max_steps,
            self.cost / self.cost0 if self.cost0 > 0 else 1.0,
            math.log1p(abs(self.last_reward)),
            float(enodes >= self.node_limit),
            float(self.exhausted.all()),
        ]
        obs = np.concatenate([head, np.log1p(counts), self.exhausted.astype(np.float64)])
        return obs.astype(np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """A fresh e-graph of the program; the observation and ``{"cost": ...}``."""
        super().reset(seed=seed)
        self.egraph = _core.EGraph(self.flat)
        self.steps = 0
        self.last_reward = 0.0
        self.exhausted[:] = False
        self.cost0 = self.cost = self._cost()
        return self._obs(), {"cost": self.cost}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Apply rule ``action`` for one iteration (or stop)."""
        action = int(action)
        if not self.action_space.contains(action):
            raise ValueError(f"action {action} outside 0..{self.num_rules}")
        if action == self.num_rules:
            self.last_reward = 0.0
            return self._obs(), 0.0, True, False, {"cost": self.cost, "stopped": True}
        before = self.egraph.size()
        st = self.egraph.saturate(
            self.ruleset,
            k_multi=0,
            node_limit=self.node_limit,
            iter_limit=1,
            time_limit=60.0,
            policy=RuleSubset([action], multi=True),
        )
        changed = self.egraph.size() != before or st["stop_reason"] != "saturated"
        if changed:
            self.exhausted[:] = False
        self.exhausted[action] = not changed
        cost = self._cost()
        reward = self.cost - cost
        self.cost = cost
        self.last_reward = reward
        self.steps += 1
        terminated = bool(self.exhausted.all())
        truncated = self.steps >= self.max_steps or self.egraph.size()[0] >= self.node_limit
        info = {"cost": cost, "enodes": self.egraph.size()[0], "stop_reason": st["stop_reason"]}
        return self._obs(), float(reward), terminated, bool(truncated), info


def register() -> None:
    """Registers ``tensat/Rewrite-v0`` with Gymnasium (idempotent)."""
    if ENV_ID not in gym.envs.registry:
        gym.register(id=ENV_ID, entry_point="tensat_py.policies.env:RewriteEnv")


register()
