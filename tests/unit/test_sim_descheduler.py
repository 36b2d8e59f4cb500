"""The descheduler's ``HighNodeUtilization`` in the simulator, checked against hand-computed
cases: which nodes it takes pods from, in which order, which pods it skips, and when it stops."""

from __future__ import annotations

from tuner.sim.engine import Scenario, Simulation
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.state import SimCluster, SimNode, SimPod
from tuner.sim.strategies.descheduler import Descheduler, high_node_utilization, usage
from tuner.sim.workloads import GIB, MIB, Service

E2 = NODE_TYPES["e2-standard-4"]  # allocatable 3920m, 14283282842 bytes, 110 pods


def node_with(cluster: SimCluster, *services: Service) -> SimNode:
    node = cluster.add_node(E2, 0, 0, "pool")
    for service in services:
        cluster.bind(cluster.create_pod(service, 0), node, 0)
    return node


def svc(
    name: str, cpu: int, memory: int = 0, kind: str = "Deployment", namespace: str = "shop"
) -> Service:
    return Service(name, cpu, memory, kind=kind, namespace=namespace)


def everything(pod: SimPod) -> bool:
    return True


def test_usage_is_the_requested_share_with_daemonsets() -> None:
    cluster = SimCluster()
    node = node_with(cluster, svc("a", 784, 2 * GIB), svc("proxy", 196, kind="DaemonSet"))
    share = usage(node)
    assert share["cpu"] == 980 / 3920 * 100  # 25 %
    assert share["memory"] == 2 * GIB / 14283282842 * 100  # 15.04 %
    assert share["pods"] == 2 / 110 * 100


def test_evicts_from_the_underutilized_nodes_least_used_first_skipping_what_it_must() -> None:
    cluster = SimCluster()
    node_with(cluster, svc("busy", 2000, GIB))  # 51 % CPU: a destination
    n2 = node_with(
        cluster,
        svc("web", 400, 512 * MIB),  # 10.2 % CPU, 3.8 % memory: underutilized
        svc("dns", 50, 64 * MIB, namespace="kube-system"),  # system-critical: kept
        svc("proxy", 50, 0, kind="DaemonSet", namespace="kube-system"),  # DaemonSet: kept
        svc("bare", 10, 0, kind="Pod"),  # no controller: kept
        svc("idle", 0, 0),  # BestEffort: evicted first
    )
    n3 = node_with(cluster, svc("cart", 300, 256 * MIB))  # smaller than n2: visited first
    node_with(cluster, svc("db", 3000, 4 * GIB, kind="StatefulSet"))  # 76.5 %: a destination
    done = high_node_utilization(cluster, 0, everything)
    assert done.sources == (n3.name, n2.name)
    assert [p.service.name for p in done.evicted] == ["cart", "idle", "web"]


def test_stops_once_the_destinations_free_cpu_is_used_up() -> None:
    cluster = SimCluster()
    node_with(cluster, svc("big", 3800))  # 120m free: the only destination
    node_with(cluster, *(svc(f"p{i}", 100) for i in range(3)))  # 7.7 % CPU
    done = high_node_utilization(cluster, 0, everything)
    # 120m free: the first eviction leaves 20m (still positive), the second -80m: stop
    assert [p.service.name for p in done.evicted] == ["p0", "p1"]


def test_an_eviction_its_budget_refuses_is_skipped_and_takes_no_room() -> None:
    cluster = SimCluster()
    node_with(cluster, svc("big", 3800))  # 120m free
    node_with(cluster, svc("guarded", 100), svc("p1", 100), svc("p2", 100))
    done = high_node_utilization(cluster, 0, lambda pod: pod.service.name != "guarded")
    assert [p.service.name for p in done.evicted] == ["p1", "p2"]


def test_a_node_at_a_threshold_is_underutilized_and_cordoned_ones_are_no_destination() -> None:
    cluster = SimCluster()
    at = node_with(cluster, svc("a", 784))  # exactly 20 % CPU
    busy = node_with(cluster, svc("b", 2000))
    assert high_node_utilization(cluster, 0, everything).sources == (at.name,)
    busy.unschedulable = True
    assert high_node_utilization(cluster, 0, everything).evicted == ()


def test_nothing_when_every_node_or_no_node_is_underutilized() -> None:
    low = SimCluster()
    node_with(low, svc("a", 100))
    node_with(low, svc("b", 200))
    assert high_node_utilization(low, 0, everything).evicted == ()
    high = SimCluster()
    node_with(high, svc("a", 1000))
    node_with(high, svc("b", 2000))
    assert high_node_utilization(high, 0, everything).sources == ()


def test_the_strategy_evicts_through_the_simulation_and_the_pod_is_packed_elsewhere() -> None:
    big = Service("big", 2500, 4 * GIB, namespace="shop")
    small = Service("small", 300, 256 * MIB, namespace="shop")
    scenario = Scenario(
        name="spread",
        title="spread",
        services=(big, small),
        daemonsets=(),
        loads={},
        pools=(NodeGroup("pool", E2, initial_nodes=2),),
        duration=600,
        warmup=0,
    )
    strategy = Descheduler()
    sim = Simulation(scenario, 1, strategy)
    state = sim.cluster_state
    first, second = sorted(state.nodes.values(), key=lambda n: n.name)
    for pod, node in zip(state.pending(), (first, second), strict=True):
        state.bind(pod, node, 0)  # big on the first node, small alone on the second
    assert sim.scheduler.scoring == "MostAllocated"
    strategy.on_tick(sim)
    (moved,) = state.pods_of(small)
    assert moved.node == first.name and not second.pods
    assert state.evictions == 1 and strategy.decisions == {"evict": 1}
    assert strategy.next_run == 120.0
