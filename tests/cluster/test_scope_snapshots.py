"""The snapshot stability judge on the real control plane: a node the tuner left to the
autoscaler may go without blocking the window; any other node leaving blocks it."""

from __future__ import annotations

from testkit.cluster_fixture import ClusterHarness
from tests.cluster.conftest import make_actuator
from tuner.model.conventions import Keys
from tuner.model.window_report import Verdict
from tuner.monitor.kube import read_cluster
from tuner.monitor.stability import compare_snapshots
from tuner.plan.actions import RemoveNode

KEYS = Keys()


def test_a_node_left_to_the_autoscaler_leaves_without_blocking(kube: ClusterHarness) -> None:
    nodes = [kube.add_node(f"{kube.namespace}-n{i}") for i in (1, 2, 3)]
    kube.deployment("web", 2)
    victim = next(iter(kube.placement("app=web").values()))
    other = next(n for n in nodes if n != victim and n not in kube.placement("app=web").values())
    result = make_actuator(kube, node_removal="autoscaler").carry_out([RemoveNode(victim)])
    assert result.completed, result.reason
    kube.wait_available("web", 2)
    start = read_cluster(kube.api)

    kube.core.delete_node(victim)  # what the autoscaler does with it
    kube.nodes.remove(victim)
    handed_over = compare_snapshots(start, read_cluster(kube.api), 0.0, 600.0, keys=KEYS)
    assert handed_over.verdict is Verdict.UNSTABLE  # the cluster did change
    assert handed_over.unsettled.blockers == ()
    assert victim in handed_over.unsettled.nodes

    kube.core.delete_node(other)  # nobody handed this one over
    kube.nodes.remove(other)
    blocked = compare_snapshots(start, read_cluster(kube.api), 0.0, 600.0, keys=KEYS)
    assert blocked.unsettled.blockers == (f"nodes joining or leaving: {other}",)
