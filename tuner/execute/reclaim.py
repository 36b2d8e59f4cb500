"""Take back the nodes left for an autoscaler that did not remove them.

With ``execute.node_removal: autoscaler`` an emptied node is handed over cordoned and stamped
``<prefix>/left-for-removal=<time>`` (:func:`~tuner.execute.marks.hand_over`). When no
autoscaler deletes it within ``execute.autoscaler_grace_s`` (a node group at its minimum size,
scale-down disabled, consolidation off), :func:`reclaim_unremoved` undoes the tuner's cordon and
stamp so the node is paid for and usable again, and says so in a ``NodeNotRemoved`` Warning
Event and the log. A node an autoscaler has started deleting (its deletion taint) is left alone.

:func:`take_back_needed` takes a handed-over node back at once, whatever its age, when pods are
pending that it could hold (:func:`~tuner.plan.take_back.needed_back`): it is Ready and
billed until the autoscaler deletes it, so the pods run now instead of waiting for a new node.
"""

from __future__ import annotations

import calendar
import logging
import time
from typing import Any

from tuner.execute.checks import other_autoscaler
from tuner.execute.events import Event, Ref, Sink
from tuner.execute.marks import reclaim
from tuner.execute.port import KubePort
from tuner.model.cluster import Cluster
from tuner.model.conventions import Keys
from tuner.plan.take_back import deleting, needed_back

log = logging.getLogger(__name__)


def _left_since(node: Any, keys: Keys) -> float | None:
    """When the node was handed over (epoch seconds); None when it was not, ``-inf`` when its
    stamp cannot be read (it is overdue: a stale stamp must not pin a node for ever)."""
    stamp = (node.metadata.annotations or {}).get(keys.left_for_removal)
    if stamp is None:
        return None
    try:
        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return float("-inf")


def overdue(node: Any, keys: Keys, grace_s: float, now: float) -> bool:
    """The node was handed over at least ``grace_s`` seconds before ``now`` (0: never)."""
    since = _left_since(node, keys)
    return grace_s > 0 and since is not None and now - since >= grace_s


def reclaim_unremoved(kube: KubePort, events: Sink, now: float) -> tuple[str, ...]:
    """Take back every node handed over ``execute.autoscaler_grace_s`` or more before ``now``
    and still there; their names."""
    keys, grace = kube.keys, kube.settings.autoscaler_grace_s
    if grace <= 0:
        return ()
    taken: list[str] = []
    for node in kube.list_nodes():
        if not overdue(node, keys, grace, now):
            continue
        name = node.metadata.name

        def build(live: Any) -> Any:
            if other_autoscaler(kube.serialize(live)) or not overdue(live, keys, grace, now):
                return None
            return reclaim(live, keys)

        if kube.patch_node(name, build) is None:
            continue
        note = (
            f"node {name} was left for the autoscaler at "
            f"{node.metadata.annotations[keys.left_for_removal]} and not removed within "
            f"{grace:g} s: the tuner's cordon is undone, the node is in use again"
        )
        log.warning("%s", note)
        events.record(Event(Ref.node(name), "Reclaim", "NodeNotRemoved", note, warning=True))
        taken.append(name)
    return tuple(taken)


def take_back_needed(kube: KubePort, events: Sink, cluster: Cluster) -> tuple[str, ...]:
    """Take back the handed-over nodes of ``cluster`` that its pending pods would run on; their
    names (the tuner's own placeholders, which ask for a new node, do not count)."""
    keys = kube.keys
    handed = [n.name for n in cluster.nodes if keys.left_for_removal in n.annotations]
    if not handed:
        return ()

    def build(live: Any) -> Any:
        return None if deleting(live.spec.taints or ()) else reclaim(live, keys)

    taken: list[str] = []
    for name in needed_back(cluster, handed, lambda pod: keys.placeholder in pod.labels):
        if kube.patch_node(name, build) is None:
            continue
        note = (
            f"pods are pending that node {name} can hold: the tuner's cordon is undone and the "
            "node, left for the autoscaler, is in use again"
        )
        log.warning("%s", note)
        events.record(Event(Ref.node(name), "Reclaim", "NodeNeeded", note))
        taken.append(name)
    return tuple(taken)
