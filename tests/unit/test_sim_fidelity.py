"""Simulator fixes found by replaying scenarios on the real control plane (docs/fidelity.md),
each checked against the behaviour of the real component it models."""

from __future__ import annotations

from tuner.sim.karpenter import Karpenter
from tuner.sim.karpenter_disruption import DISRUPTED_TAINT, KarpenterConfig
from tuner.sim.karpenter_packing import Offering
from tuner.sim.prices import NODE_TYPES
from tuner.sim.state import SimCluster
from tuner.sim.workloads import MIB, Service

E4 = NODE_TYPES["e2-standard-4"]
MEDIUM = Offering("medium", E4)


def test_karpenter_deletes_an_empty_node_someone_else_cordoned() -> None:
    # Real Karpenter (statenode.go ValidateNodeDisruptable) does not skip unschedulable
    # nodes: the tuner's node_removal "autoscaler" relies on its emptiness consolidation.
    cluster = SimCluster()
    busy = cluster.add_node(E4, -600, 0, "medium")
    pod = cluster.create_pod(Service("web", 3000, 256 * MIB, namespace="shop"), -600)
    cluster.bind(pod, busy, -600)
    left = cluster.add_node(E4, -600, 0, "medium")
    left.unschedulable = True
    karpenter = Karpenter((MEDIUM,), (), KarpenterConfig(budget=1.0))
    assert left in karpenter.candidates(cluster, 0)
    karpenter.step(cluster, [], 0)
    assert left.name not in cluster.nodes and busy.name in cluster.nodes
    assert karpenter.commands == {"empty": 1}


def test_karpenter_skips_a_node_it_is_already_disrupting() -> None:
    cluster = SimCluster()
    node = cluster.add_node(E4, -600, 0, "medium")
    node.unschedulable = True
    node.taints = (DISRUPTED_TAINT,)
    assert Karpenter((MEDIUM,), ()).candidates(cluster, 0) == []
