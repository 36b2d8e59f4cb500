"""The journal of the transition in flight: a ConfigMap written before every action and
deleted when the transition ends, so a run that died mid-transition is visible to the next.
Before an add or remove scales, it also records the workload and its replica count before and
after the change (``scaled``), so that recovery can restore the count; before a surge move
restarts a Deployment's rollout, the annotation it sets (``restarted``), so that recovery can
set it back; before a provision creates a placeholder pod, its name (``placeholder``).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.execute.events import Ref
from tuner.execute.kube import now_iso
from tuner.execute.port import KubePort
from tuner.plan.actions import Action, action_json


class Journal:
    """``<prefix>-journal`` in ``execute.journal_namespace``."""

    def __init__(self, kube: KubePort) -> None:
        self.kube = kube
        self.name = kube.keys.journal
        self.namespace = kube.settings.journal_namespace

    @property
    def ref(self) -> Ref:
        """The journal as an Event's subject."""
        return Ref("v1", "ConfigMap", self.name, self.namespace)

    def read(self) -> dict[str, str] | None:
        """The journal's data, or None when no transition is in flight."""
        cm = self.kube.config_map(self.namespace, self.name)
        return dict(cm.data or {}) if cm is not None else None

    def begin(self, actions: Sequence[Action]) -> None:
        """Record a transition about to start (replacing any earlier record)."""
        body = {
            "metadata": {
                "name": self.name,
                "labels": {self.kube.keys.managed: "true"},
            },
            "data": {
                "started": now_iso(),
                "owner": f"{socket.gethostname()}/{os.getpid()}",
                "actions": json.dumps([action_json(a) for a in actions]),
                "current": "0",
            },
        }
        self.kube.put_config_map(self.namespace, body)

    def step(self, index: int) -> None:
        """Record that action ``index`` (0-based) is about to run (``current``): of a wave of
        migrations moving at once, its first action."""
        self._patch({"current": str(index)})

    def scaling(self, record: Mapping[str, object]) -> None:
        """Record the replica change an add or remove is about to make (what to restore after
        a crash), until :meth:`settled`."""
        self._patch({"scaled": json.dumps(record, sort_keys=True)})

    def settled(self) -> None:
        """The replica change recorded by :meth:`scaling` was verified: drop it."""
        self._patch({"scaled": None})

    def restarting(self, record: Mapping[str, object]) -> None:
        """Record the rollout restart a surge move is about to make (what to set back after a
        crash, :func:`~tuner.execute.surge.undo_restart`), until :meth:`restarted`."""
        self._patch({"restarted": json.dumps(record, sort_keys=True)})

    def restarted(self) -> None:
        """The restart recorded by :meth:`restarting` was verified or set back: drop it."""
        self._patch({"restarted": None})

    def placeholder(self, name: str | None) -> None:
        """Record the placeholder pod about to be created (None: it was deleted), so that a
        recovery says which one it deletes."""
        self._patch({"placeholder": name})

    def _patch(self, data: Mapping[str, str | None]) -> None:
        self.kube.patch_config_map(
            self.namespace, self.name, {"data": {**data, "updated": now_iso()}}
        )

    def end(self) -> None:
        """The transition ended (done, stopped or rolled back): drop the record."""
        self.kube.delete_config_map(self.namespace, self.name)


def interrupted(data: dict[str, str]) -> str:
    """One line on the transition a journal describes."""
    try:
        actions: list[dict[str, Any]] = json.loads(data.get("actions", "[]"))
        current = int(data.get("current", "0"))
    except (ValueError, TypeError):
        return f"an interrupted transition (unreadable journal, started {data.get('started')})"
    step = actions[current] if 0 <= current < len(actions) else {}
    what = " ".join(f"{k}={v}" for k, v in step.items())
    return (
        f"transition of {len(actions)} actions started {data.get('started')} by "
        f"{data.get('owner')} was interrupted at action {current + 1} ({what})"
    )


class ReserveJournal:
    """``<prefix>-journal-reserve`` in ``execute.journal_namespace``: the placeholder pods held
    ahead of a forecast rise, each written before it is created and dropped once it is verified
    gone, so a run that died holding some is visible to the next (whose recovery deletes them by
    their label and drops this record)."""

    def __init__(self, kube: KubePort) -> None:
        self.kube = kube
        self.name = f"{kube.keys.journal}-reserve"
        self.namespace = kube.settings.journal_namespace

    def read(self) -> dict[str, str] | None:
        """Placeholder name -> its record, or None when nothing is journaled."""
        cm = self.kube.config_map(self.namespace, self.name)
        return dict(cm.data or {}) if cm is not None else None

    def holding(self, name: str, record: Mapping[str, object]) -> None:
        """Record the placeholder about to be created."""
        entry = {name: json.dumps(record, sort_keys=True)}
        if self.kube.config_map(self.namespace, self.name) is None:
            labels = {self.kube.keys.managed: "true"}
            body = {"metadata": {"name": self.name, "labels": labels}, "data": entry}
            self.kube.put_config_map(self.namespace, body)
        else:
            self.kube.patch_config_map(self.namespace, self.name, {"data": entry})

    def released(self, name: str) -> None:
        """The placeholder was verified gone: drop its record."""
        self.kube.patch_config_map(self.namespace, self.name, {"data": {name: None}})

    def end(self) -> None:
        """Nothing is held any more: drop the record."""
        self.kube.delete_config_map(self.namespace, self.name)
