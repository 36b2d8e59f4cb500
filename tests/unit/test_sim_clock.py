"""The simulation's clock: timed events fire once due, earliest first, and in the order they were
scheduled when due at the same instant; a deleted Node object registers again through one."""

from __future__ import annotations

from tuner.model.resources import Resources
from tuner.sim.autoscaler import Bin
from tuner.sim.clock import Clock
from tuner.sim.controls import REREGISTER_DELAY
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.load import Phase, Phases
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.workloads import Service


def test_events_fire_when_due_earliest_first_then_in_the_order_scheduled() -> None:
    clock = Clock(0.0, 5.0)
    fired: list[str] = []
    for at, name in ((10.0, "a"), (5.0, "b"), (10.0, "c"), (15.0, "d"), (10.0, "e")):
        clock.schedule(at, lambda name=name: fired.append(name))  # type: ignore[misc]
    clock.fire_due()
    assert fired == []
    clock.advance()
    clock.advance()
    clock.fire_due()
    assert fired == ["b", "a", "c", "e"]
    clock.fire_due()
    assert fired == ["b", "a", "c", "e"]  # each fires once
    clock.advance()
    clock.fire_due()
    assert fired[-1] == "d"


def test_an_event_scheduled_by_an_event_due_now_fires_in_the_same_pass() -> None:
    clock = Clock(0.0, 5.0)
    fired: list[str] = []
    clock.schedule(0.0, lambda: clock.schedule(0.0, lambda: fired.append("second")))
    clock.fire_due()
    assert fired == ["second"]


def test_a_deleted_node_object_registers_again_after_the_delay() -> None:
    scenario = Scenario(
        name="two",
        title="two",
        services=(Service("web", 500, 2**28, replicas=2, namespace="shop"),),
        daemonsets=(),
        loads={"shop": Phases(60, (Phase(3600, 1.0),))},
        pools=(NodeGroup("pool", NODE_TYPES["e2-standard-4"], 2, 5, 2),),
        duration=3600,
        warmup=0,
    )
    sim = Simulation(scenario, 1)
    sim.advance(10)
    name = sorted(sim.cluster_state.nodes)[0]
    sim.controls.drain_node(name, "delete-node")
    deleted_at = sim.now
    assert not sim.controls.node_ready(name)
    sim.advance(REREGISTER_DELAY - 5)
    assert not sim.controls.node_ready(name)
    sim.advance(5)
    assert sim.now == deleted_at + REREGISTER_DELAY
    sim.advance(5)
    assert sim.controls.node_ready(name)


def test_a_bin_packs_by_the_resource_rule_and_unpacks() -> None:
    room = Bin(1000, 2**30, 2)
    web = Resources(600, 2**28)
    assert room.fits(web)
    room.put(web)
    assert not room.fits(web)  # 400m left
    room.put(Resources(400, 2**28))
    assert (room.cpu, room.slots, room.pods, room.packed_cpu) == (0, 0, 2, 1000)
    room.take_out(web)
    assert (room.cpu, room.memory, room.slots, room.pods) == (600, 2**30 - 2**28, 1, 1)
