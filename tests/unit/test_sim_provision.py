"""The simulated executor's provision_node: a placeholder the simulated Cluster Autoscaler grows
the right pool for (its node selector, the pool's maximum), simulated time that really passes,
and later actions of the plan landing on the node it bound."""

from __future__ import annotations

import inspect
from dataclasses import replace
from types import MappingProxyType

import pytest

from tuner.model.cluster import Node, Pod
from tuner.model.conventions import POOL_LABEL_BY_SYSTEM
from tuner.model.pools import NodePool
from tuner.model.resources import Resources
from tuner.plan.actions import Action, Migrate, ProvisionNode, RemoveNode
from tuner.sim import pools
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.metrics import ActionResult
from tuner.sim.prices import NODE_TYPES
from tuner.sim.strategy import Strategy
from tuner.sim.workloads import Service

LABEL = POOL_LABEL_BY_SYSTEM["gke"]
SMALL = NODE_TYPES["e2-standard-4"]
BIG = NODE_TYPES["e2-standard-8"]
WEB = Service("web", 1000, 1 << 30, replicas=2)


def simulation(big_max: int = 3) -> Simulation:
    scenario = Scenario(
        name="replace",
        title="two small nodes, a pool of big ones",
        services=(WEB,),
        daemonsets=(),
        loads={},
        pools=(
            pools.NodeGroup("small", SMALL, min_nodes=0, initial_nodes=2),
            pools.NodeGroup("big", BIG, max_nodes=big_max),
            pools.NodeGroup("other", BIG, max_nodes=3),
        ),
        duration=3600.0,
        warmup=0.0,
    )
    return Simulation(scenario, seed=1)


def provision() -> ProvisionNode:
    labels = MappingProxyType({LABEL: "big"})
    template = Node("", BIG.capacity, BIG.allocatable, labels=labels)
    return ProvisionNode("big+1", NodePool("big", BIG.name, template, selector=labels), WEB_TWO)


WEB_TWO = Resources(2000, 2 << 30)


def replace_web(sim: Simulation) -> tuple[list[Pod], list[str], list[Action]]:
    """After a minute: web's pods, the nodes they run on, and the plan that replaces those
    nodes by a new big one."""
    sim.advance(60)
    web = [p for p in sim.cluster().pods if p.workload == WEB.workload]
    old = sorted({p.node or "" for p in web})
    plan: list[Action] = [
        provision(),
        *(Migrate(p, "big+1") for p in web),
        *(RemoveNode(n) for n in old),
    ]
    return web, old, plan


def test_a_replace_grows_the_selected_pool_and_the_pods_land_on_the_new_node() -> None:
    sim = simulation()
    web, old, plan = replace_web(sim)
    start = sim.now

    results = sim.apply(plan, node_removal="command")

    assert [r.verified for r in results] == [True] * len(plan), [r.detail for r in results]
    nodes = sim.cluster_state.nodes
    (new,) = [n for n in nodes.values() if n.pool == "big"]
    assert not any(n.pool == "other" for n in nodes.values())
    assert sim.now - start >= sim.scenario.autoscaler.provisioning_delay
    assert {p.node for p in sim.cluster().pods} == {new.name}
    assert set(old).isdisjoint(nodes)
    assert results[1].action == Migrate(web[0], new.name)
    assert not any(p.placeholder for p in sim.cluster_state.pods.values())
    assert max(sim.series.pending) == 0  # the placeholder is no workload's pending pod
    assert sim.actions.provision_node == 1


def test_a_pod_scaled_in_while_the_provision_waits_is_nothing_to_move_and_the_replace_ends() -> (
    None
):
    sim = simulation()
    web, old, plan = replace_web(sim)
    controls = sim.controls
    service = controls.service_of(WEB.workload)
    state = sim.cluster_state
    gone = state.pods[state.by_name[web[0].name]]
    assert service is not None
    controls.scale(service, -1)  # its HPA scales web in: that very pod deleted
    controls.delete_pod(gone)

    results = sim.apply(plan, node_removal="command")

    assert [r.verified for r in results] == [True] * len(plan), [r.detail for r in results]
    assert results[1].detail == f"pod {web[0].key} is already gone"
    (new,) = [n for n in sim.cluster_state.nodes.values() if n.pool == "big"]
    assert {p.node for p in sim.cluster().pods} == {new.name}
    assert set(old).isdisjoint(sim.cluster_state.nodes)


def test_a_pool_at_its_maximum_is_not_grown_and_the_provision_times_out() -> None:
    sim = simulation(big_max=0)
    sim.advance(60)
    web = [p for p in sim.cluster().pods if p.workload == WEB.workload]
    before = sorted(sim.cluster_state.nodes)
    start = sim.now

    results = sim.apply([provision(), Migrate(web[0], "big+1")], provision_timeout_s=300)

    assert [r.verified for r in results] == [False]
    assert results[0].detail == "no new Ready node of pool big within 300 s"
    assert sim.now - start >= 300
    assert sorted(sim.cluster_state.nodes) == before  # no other pool grew for it either
    assert not any(p.placeholder for p in sim.cluster_state.pods.values())
    assert [p.node for p in sim.cluster().pods] == [p.node for p in web]


def test_the_same_seed_gives_the_same_replace() -> None:
    def run() -> tuple[float, list[str]]:
        sim = simulation()
        sim.advance(60)
        web = [p for p in sim.cluster().pods if p.workload == WEB.workload]
        sim.apply([provision(), *(Migrate(p, "big+1") for p in web)])
        return sim.now, sorted(p.node or "" for p in sim.cluster().pods)

    assert run() == run()


class Replacing(Strategy):
    """Replaces the web pods' nodes by one big node at its first turn, noting each turn."""

    name = "replacing"

    def __init__(self) -> None:
        self.turns: list[float] = []
        self.results: tuple[ActionResult, ...] = ()
        self.finished_at = -1.0

    def on_tick(self, sim: Simulation) -> None:
        self.turns.append(sim.now)
        if len(self.turns) > 1:
            return
        web = [p for p in sim.cluster().pods if p.workload == WEB.workload]
        plan = [provision(), *(Migrate(p, "big+1") for p in web)]
        self.results = sim.apply(plan, node_removal="command")
        self.finished_at = sim.now


def strategy_simulation(strategy: Strategy, duration: float = 3600.0) -> Simulation:
    sim = simulation()
    return Simulation(replace(sim.scenario, duration=duration), 1, strategy)


def test_a_provision_in_the_strategys_turn_suspends_the_turn_not_the_tick_loop() -> None:
    strategy = Replacing()
    sim = strategy_simulation(strategy)
    inside: list[bool] = []
    run = sim.controllers.run

    def controllers() -> None:  # a controller run called from within a strategy's turn?
        inside.append(any(frame.function == "on_tick" for frame in inspect.stack()))
        run()

    sim.controllers.run = controllers  # type: ignore[method-assign]
    sim.advance(600)

    assert [r.verified for r in strategy.results] == [True, True, True]
    assert strategy.finished_at >= sim.scenario.autoscaler.provisioning_delay
    assert len(inside) == 600 / sim.tick and not any(inside)
    # no turn while it waited; the next turn is the tick after the one it finished in
    assert strategy.turns[:2] == [0.0, strategy.finished_at + sim.tick]


def test_a_run_does_not_end_while_the_strategys_turn_waits() -> None:
    strategy = Replacing()
    sim = strategy_simulation(strategy)
    sim.advance(5)  # the first turn starts the provision at 0 and waits for the node
    assert sim.turns.waiting is None
    assert strategy.finished_at > 0 and sim.now == strategy.finished_at + sim.tick
    assert [r.verified for r in strategy.results] == [True, True, True]


class Failing(Strategy):
    name = "failing"

    def on_tick(self, sim: Simulation) -> None:
        raise ValueError("a strategy's bug")


def test_an_error_in_the_strategys_turn_reaches_the_driver() -> None:
    sim = strategy_simulation(Failing())
    with pytest.raises(ValueError, match="a strategy's bug"):
        sim.advance(5)
    with pytest.raises(ValueError, match="a strategy's bug"):  # the next turn runs again
        sim.advance(5)
