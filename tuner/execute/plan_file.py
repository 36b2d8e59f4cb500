"""Actions back from the plan output contract (``tuner plan --format json``, docs/concepts.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tuner.errors import InputError
from tuner.model.cluster import Cluster, Workload
from tuner.model.resources import Resources
from tuner.plan.actions import Action, Add, Migrate, Remove, RemoveNode


def actions_from_json(entries: Iterable[Mapping[str, Any]], cluster: Cluster) -> list[Action]:
    """The plan's ``actions``, resolved against the cluster they were planned on."""
    pods = {p.key: p for p in cluster.pods}
    actions: list[Action] = []
    for index, entry in enumerate(entries, 1):
        op = entry.get("op")
        try:
            match op:
                case "migrate":
                    actions.append(Migrate(pods[entry["pod"]], str(entry["to"])))
                case "add":
                    workload = Workload.parse(str(entry["workload"]))
                    actions.append(Add(workload, str(entry["to"]), _requests(cluster, workload)))
                case "remove":
                    actions.append(Remove(pods[entry["pod"]]))
                case "remove_node":
                    actions.append(RemoveNode(str(entry["node"])))
                case _:
                    raise InputError(f"action {index}: unknown op {op!r}")
        except KeyError as err:
            raise InputError(f"action {index} ({op}): {err.args[0]!r} not found") from err
        except ValueError as err:
            raise InputError(f"action {index} ({op}): {err}") from err
    return actions


def _requests(cluster: Cluster, workload: Workload) -> Resources:
    """An instance's requests, from a running pod of the workload (zero when none runs)."""
    return next((p.requests for p in cluster.pods if p.workload == workload), Resources(0, 0))
