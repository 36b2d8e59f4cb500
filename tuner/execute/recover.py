"""Find and undo what an earlier run left behind (it crashed, was killed or lost the API).

Everything the tuner changes carries the ``<prefix>/managed`` label and a record of the change
(:mod:`tuner.execute.marks`), so one label selector finds every leftover: node labels, cordons,
taints and pod-deletion-costs. The journal names the transition that was interrupted and, when
an add or remove was interrupted after its scaling, the replica count to restore
(:func:`~tuner.execute.scaling.undo_scale`: only when nobody has changed it since, verified),
and when a surge move was interrupted, the rollout restart to set back
(:func:`~tuner.execute.surge.undo_restart`: only when its rollout is not complete).
Placeholder pods, of an interrupted provision or held ahead of a forecast rise
(:mod:`tuner.execute.reserve`), are found by their own label
(:func:`~tuner.execute.provision.remove_placeholders`), so even one created just before its
journal entry is deleted; then the reserve's journal is dropped.
"""

from __future__ import annotations

from tuner.execute.journal import Journal, ReserveJournal, interrupted
from tuner.execute.marks import undo_node, undo_pod
from tuner.execute.port import KubePort
from tuner.execute.provision import remove_placeholders
from tuner.execute.scaling import undo_scale
from tuner.execute.surge import undo_restart


def recover(kube: KubePort) -> list[str]:
    """Undo every leftover; one line per thing undone."""
    undone: list[str] = []
    journal = Journal(kube)
    data = journal.read()
    if data is not None:
        undone.append(interrupted(data))
        if data.get("restarted"):  # first: the move's cordon still keeps its new pod off its source
            undone.append(undo_restart(kube, data["restarted"]))
    selector = kube.keys.managed
    for node in kube.list_nodes(selector):
        name = node.metadata.name
        if kube.patch_node(name, lambda n: undo_node(n, kube.keys)) is not None:
            undone.append(f"node {name}: removed the tuner's labels, cordon and taint")
    for pod in kube.labelled_pods(selector):
        namespace, name = pod.metadata.namespace, pod.metadata.name
        if kube.patch_pod(namespace, name, lambda p: undo_pod(p, kube.keys)) is not None:
            undone.append(f"pod {namespace}/{name}: restored its pod-deletion-cost")
    undone += remove_placeholders(kube)
    reserve = ReserveJournal(kube)
    held = reserve.read()
    if held is not None:
        undone.append(f"a reserve of {len(held)} placeholder pod(s) was held: {sorted(held)}")
        reserve.end()
    if data is not None:
        if data.get("scaled"):
            undone.append(undo_scale(kube, data["scaled"]))
        journal.end()
    return undone
