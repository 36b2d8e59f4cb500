"""``tuner run --shadow``: the daemon plans every cycle as a dry run does and keeps the account
of what it would have done and saved (:mod:`tuner.model.account`) in the knowledge base — the
only thing it writes. Each cycle logs its entry (``shadow: would save ...``) and adds its
saving to ``tuner_would_save_usd_total``; ``tuner report`` sums the account over a period.
"""

from __future__ import annotations

import logging

from knowledge.base import KnowledgeBase, KnowledgeError
from tuner.cycle import CycleReport
from tuner.daemon.metrics import Metrics
from tuner.model.account import ShadowCycle
from tuner.model.limits import DAY_S
from tuner.report.account import shadow_cycle

log = logging.getLogger("tuner.daemon")


class ShadowAccount:
    """Records each shadow cycle; remembers the last one (also across a restart, from the
    knowledge base) to tell whether the cluster changed under its plan."""

    def __init__(self, kb: KnowledgeBase, metrics: Metrics) -> None:
        self.kb = kb
        self.metrics = metrics
        self.previous: ShadowCycle | None = None
        self._resumed = False

    def account(self, report: CycleReport) -> ShadowCycle | None:
        """Record what the cycle would have done and saved; the entry (None: the cycle
        analysed nothing)."""
        if not self._resumed:
            self._resume(report.end)
        cycle = shadow_cycle(report, self.previous)
        if cycle is None:
            return None
        held = f"; held: {cycle.held}" if cycle.held else ""
        changed = {None: "", True: "; the cluster changed under the previous plan", False: ""}
        log.info(
            "shadow: would save %.6f %s until the next cycle (%.4f -> %.4f %s/h for %.0f s, "
            "%d actions, %d evictions)%s%s",
            cycle.saving,
            cycle.currency,
            cycle.cost_before,
            cycle.cost_after,
            cycle.currency,
            cycle.interval_s,
            sum(n for _, n in cycle.actions),
            sum(n for _, n in cycle.evictions),
            held,
            changed[cycle.changed],
            extra={"would_save": cycle.saving, "shadow": cycle.to_json()},
        )
        try:
            self.kb.record_shadow(cycle)
        except KnowledgeError as err:
            log.warning("shadow account: cycle %s not recorded: %s", cycle.id, err)
        self.metrics.would_save.inc(cycle.saving)
        self.previous = cycle
        return cycle

    def _resume(self, now: float) -> None:
        """Start from the account's last cycle of the last day, if the store can be read."""
        try:
            recent = self.kb.shadow_cycles(now - DAY_S, now)
        except KnowledgeError as err:
            log.warning("shadow account: earlier cycles not read: %s", err)
            return
        self._resumed = True
        self.previous = recent[-1] if recent else None
