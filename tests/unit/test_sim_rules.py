"""The scheduling rules in the simulator: kube-scheduler's filters, the Cluster Autoscaler's and
Karpenter's simulations, scenario files; and every strategy's placements replayed through the
independent checker."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tuner.model.constraints import ZONE_KEY
from tuner.model.resources import Resources
from tuner.plan.actions import Add
from tuner.plan.replay import InfeasiblePlan, replay
from tuner.sim.autoscaler import AutoscalerConfig, ClusterAutoscaler
from tuner.sim.command import STRATEGY_NAMES
from tuner.sim.engine import Simulation
from tuner.sim.karpenter import Karpenter
from tuner.sim.karpenter_disruption import KarpenterConfig
from tuner.sim.karpenter_packing import Offering, pack_claims
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.report import STRATEGIES
from tuner.sim.scenario_file import build
from tuner.sim.scheduler import Scheduler
from tuner.sim.state import SimCluster, SimNode, SimPod
from tuner.sim.workloads import MIB, Service, Spread

E4 = NODE_TYPES["e2-standard-4"]
ZONE_SPREAD = (Spread(ZONE_KEY, 1, True),)
WEB = Service("web", 500, 256 * MIB, namespace="shop", spread=ZONE_SPREAD)


def zoned(cluster: SimCluster, zone: str, *services: Service) -> SimNode:
    """A ready node in ``zone`` running one pod of each service."""
    node = cluster.add_node(E4, -600, 0, f"pool-{zone}", zone=zone)
    for service in services:
        cluster.bind(cluster.create_pod(service, -600), node, -600)
    return node


def test_the_scheduler_keeps_a_hard_zone_spread() -> None:
    cluster = SimCluster()
    zoned(cluster, "a", WEB)
    zoned(cluster, "b")
    pod = cluster.create_pod(WEB, 0)
    feasible = Scheduler(random.Random(0)).feasible(cluster, pod, 0)
    assert [n.labels[ZONE_KEY] for n in feasible] == ["b"]  # a: 1, b: 0
    soft = Service("web", 500, 256 * MIB, namespace="shop", spread=(Spread(ZONE_KEY, 1, False),))
    loose = SimCluster()
    zoned(loose, "a", soft)
    zoned(loose, "b")
    assert len(Scheduler(random.Random(0)).feasible(loose, loose.create_pod(soft, 0), 0)) == 2


def test_the_cluster_autoscaler_keeps_a_node_whose_pod_the_spread_holds() -> None:
    """The zone-b node is nearly idle, but its web pod may go only to zone b (a: 1, b: 0)."""
    cluster = SimCluster()
    zoned(cluster, "a", WEB, Service("db", 2500, 256 * MIB, namespace="shop"))
    zoned(cluster, "b", WEB)
    ca = ClusterAutoscaler(AutoscalerConfig(), (NodeGroup("pool-a", E4, zone="a"),), ())
    assert ca.find_unneeded(cluster, 0) == []
    plain = SimCluster()
    web = Service("web", 500, 256 * MIB, namespace="shop")
    zoned(plain, "a", web, Service("db", 2500, 256 * MIB, namespace="shop"))
    zoned(plain, "b", web)
    assert ca.find_unneeded(plain, 0) == ["pool-b-0002"]


def test_the_cluster_autoscaler_grows_the_zone_the_spread_needs() -> None:
    cluster = SimCluster()
    zoned(cluster, "a", WEB)
    zoned(cluster, "b", Service("fill", 3800, 256 * MIB, namespace="shop"))
    pod = cluster.create_pod(WEB, 0)  # zone a has room, but a: 1, b: 0 wants b
    pools = (NodeGroup("pool-a", E4, max_nodes=5, zone="a"), NodeGroup("pool-b", E4, 0, 5, 0, "b"))
    ca = ClusterAutoscaler(AutoscalerConfig(), pools, ())
    assert ca.scale_up(cluster, [pod], 0) == 1
    booting = [n for n in cluster.nodes.values() if not n.ready(0)]
    assert [n.labels[ZONE_KEY] for n in booting] == ["b"]


OFFERINGS = (Offering("pool-a", E4, zone="a"), Offering("pool-b", E4, zone="b"))


def test_karpenter_launches_in_the_zone_the_spread_needs() -> None:
    cluster = SimCluster()
    zoned(cluster, "a", WEB)
    zoned(cluster, "b", Service("fill", 3800, 256 * MIB, namespace="shop"))
    pod = cluster.create_pod(WEB, 0)
    claims, unfit = pack_claims([pod], OFFERINGS, Resources(), 0, cluster.census(0))
    assert not unfit and [o.zone for o in claims[0].offerings] == ["b"]


@pytest.mark.parametrize("spread", [True, False])
def test_karpenter_consolidates_a_node_only_where_the_spread_allows(spread: bool) -> None:
    """Zone a's node holds one web pod, zone b's another and room: deleting a's would put
    both in b (b: 2, a: 0)."""
    web = WEB if spread else Service("web", 500, 256 * MIB, namespace="shop")
    cluster = SimCluster()
    a = zoned(cluster, "a", web)
    zoned(cluster, "b", web)
    command = Karpenter(OFFERINGS, (), KarpenterConfig()).evaluate(
        cluster, [a], [], 0, cluster.census(0)
    )
    assert (command is None) is spread
    assert cluster.census(0) is None or len(cluster.census(0).residents[a.name]) == 1  # type: ignore[union-attr]


def _obeys(sim: Simulation, pod: SimPod, node: SimNode) -> None:
    """A bind that every hard rule allows, by the replay checker on the cluster before it."""
    if pod.placeholder or pod.daemon:
        return
    view = sim.cluster_state.view(sim.now, ())
    try:
        replay(view, [Add(pod.service.workload, node.name, pod.requests)], soft=False)
    except InfeasiblePlan as err:
        raise AssertionError(f"{sim.strategy} bound {pod.name} to {node.name}: {err}") from err


RULED: dict[str, Any] = {
    "name": "ruled",
    "hours": 2,
    "seed": 3,
    "system": "gke",
    "pools": [
        {
            "name": "small",
            "node_type": "e2-standard-2",
            "max": 8,
            "initial": 1,
            "zones": ["a", "b", "c"],
        },
        {"name": "big", "node_type": "e2-standard-8", "max": 3, "initial": 0, "zones": ["a"]},
    ],
    "applications": [
        {
            "app": "online-boutique",
            "copies": 2,
            "trace": "google2019",
            "first_day": 1,
            "peak": 40,
            "rules": {
                "frontend": {"spread": [{"topology_key": "zone", "max_skew": 1}]},
                "cartservice": {"spread": [{"topology_key": "hostname", "max_skew": 1}]},
                "adservice": {"anti_affinity": "hostname"},
            },
        }
    ],
    "services": [
        {
            "name": "search",
            "namespace": "logging",
            "kind": "StatefulSet",
            "cpu": "500m",
            "memory": "1Gi",
            "replicas": 3,
            "anti_affinity": "zone",
        }
    ],
}


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_strategy_places_pods_only_where_the_hard_rules_allow(
    strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = build(RULED)
    sim = Simulation(scenario, 3, STRATEGIES[strategy](scenario, 3))
    bind = SimCluster.bind
    binds = 0

    def checked(state: SimCluster, pod: SimPod, node: SimNode, now: float) -> None:
        nonlocal binds
        _obeys(sim, pod, node)
        binds += 1
        bind(state, pod, node, now)

    monkeypatch.setattr(SimCluster, "bind", checked)
    sim.advance(scenario.warmup + scenario.duration)
    assert binds > 50
    zones = {n.labels[ZONE_KEY] for n in sim.cluster_state.nodes.values()}
    assert zones <= {"a", "b", "c"}
