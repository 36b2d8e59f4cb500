"""The cycle's :class:`~tuner.cycle.Safeguards` on a live cluster: two ConfigMaps in
``execute.journal_namespace`` (the tuner's own namespace; deploy/'s Role grants exactly these).

- ``<prefix>-evictions`` (:attr:`~tuner.model.conventions.Keys.evictions`), written by the tuner:
  ``data.evictions`` lists the transitions of the last 24 hours as ``{"at": epoch seconds,
  "namespaces": {namespace: pods}}``. In the cluster rather than the knowledge base: a new
  leader, a restarted pod or a tuner with another knowledge store reads the same count, and
  ``kubectl get configmap`` shows it. Each transition is written before it starts (with its
  plan's evictions) and again when it ends (with what it ran), so a crash leaves the larger
  count. Entries older than a day are dropped when it is written.
- ``limits.pause_config_map`` (deploy/'s settings ConfigMap), the operator's: its annotation
  ``<prefix>/paused`` with any value but ``false`` pauses the tuner. A missing ConfigMap is no
  pause.

A dry run or shadow run reads both and writes neither (the cycle carries nothing out). Every
API failure is a :class:`~tuner.errors.ServiceError`: the cycle then holds its change.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from tuner.errors import ServiceError
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
from tuner.model.limits import DAY_S, Evictions, Limits, Spent

DATA_KEY = "evictions"


class ClusterSafeguards:
    """The eviction ledger and the pause switch in ConfigMaps."""

    def __init__(
        self,
        kube: KubePort,
        limits: Limits,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kube = kube
        self.namespace = kube.settings.journal_namespace
        self.ledger = kube.keys.evictions
        self.switch = limits.pause_config_map
        self.clock = clock

    def spent(self) -> Sequence[Spent]:
        """The transitions of the last day and their evictions."""
        data = self._data(self.ledger)
        now = self.clock()
        return tuple(s for s in _decoded(data, self._where()) if now - s.at < DAY_S)

    def begin(self, evicting: Evictions) -> None:
        """Add the transition about to start, stamped now."""
        self._write([*self.spent(), Spent.of(self.clock(), evicting)])

    def end(self, evicted: Evictions) -> None:
        """Replace the newest entry (the transition :meth:`begin` added) by what it evicted,
        stamped now."""
        kept = list(self.spent())[:-1]
        self._write([*kept, Spent.of(self.clock(), evicted)])

    def paused(self) -> str | None:
        """Why the tuner is paused, or None."""
        found = self._read(self.switch)
        annotations = (found.metadata.annotations or {}) if found is not None else {}
        value = annotations.get(self.kube.keys.paused)
        if value is None or value.strip().lower() == "false":
            return None
        return (
            f"paused by annotation {self.kube.keys.paused}={value!r} on ConfigMap "
            f"{self.namespace}/{self.switch}"
        )

    def _where(self) -> str:
        return f"ConfigMap {self.namespace}/{self.ledger}"

    def _read(self, name: str) -> Any | None:
        try:
            return self.kube.config_map(self.namespace, name)
        except ActionFailed as err:
            raise ServiceError(f"ConfigMap {self.namespace}/{name}: {err}") from err

    def _data(self, name: str) -> str | None:
        found = self._read(name)
        return None if found is None else (found.data or {}).get(DATA_KEY)

    def _write(self, spent: Sequence[Spent]) -> None:
        entries = [{"at": s.at, "namespaces": dict(s.namespaces)} for s in spent]
        body = {
            "metadata": {"name": self.ledger},
            "data": {DATA_KEY: json.dumps(entries, sort_keys=True)},
        }
        try:
            self.kube.put_config_map(self.namespace, body)
        except ActionFailed as err:
            raise ServiceError(f"{self._where()}: {err}") from err


def _decoded(text: str | None, where: str) -> list[Spent]:
    """The ledger's entries; an unreadable ledger is a ServiceError (never a silent reset)."""
    if not text:
        return []
    try:
        entries = json.loads(text)
        return [
            Spent.of(float(e["at"]), {str(k): int(v) for k, v in e["namespaces"].items()})
            for e in entries
        ]
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise ServiceError(
            f"{where}: data.{DATA_KEY} is unreadable ({err}); delete the ConfigMap to reset "
            "the count"
        ) from err
