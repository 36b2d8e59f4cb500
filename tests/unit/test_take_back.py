"""Taking back a node left to the autoscaler when pending pods need it (pure core and the
simulated actuator)."""

from testkit.builders import cluster, node, pod
from tuner.model.constraints import (
    ZONE_KEY,
    Constraints,
    LabelSelector,
    PodAffinityTerm,
    SpreadConstraint,
    Taint,
)
from tuner.plan.take_back import needed_back
from tuner.sim.engine import Simulation
from tuner.sim.ports import SimActuator
from tuner.sim.scenarios import scenario
from tuner.sim.strategies.autoscaler_only import AutoscalerOnly

HANDED = node(
    "handed",
    "4",
    "8Gi",
    unschedulable=True,
    taints=(Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"),),
)
BUSY = node("busy", "4", "8Gi")
FULL = [pod("web-1", "busy", "3500m", "1Gi")]


def test_a_pending_pod_that_fits_takes_the_node_back() -> None:
    c = cluster([BUSY, HANDED], [*FULL, pod("web-2", None, "1", "1Gi")])
    assert needed_back(c, ["handed"]) == ("handed",)


def test_nothing_pending_or_nothing_handed_over_takes_nothing_back() -> None:
    assert needed_back(cluster([BUSY, HANDED], FULL), ["handed"]) == ()
    pending = cluster([BUSY, HANDED], [*FULL, pod("web-2", None, "1", "1Gi")])
    assert needed_back(pending, []) == ()


def test_a_pod_the_node_cannot_hold_does_not_take_it_back() -> None:
    too_big = cluster([BUSY, HANDED], [*FULL, pod("web-2", None, "5", "1Gi")])
    assert needed_back(too_big, ["handed"]) == ()
    elsewhere = Constraints(node_selector=(("pool", "other"),))
    selected = cluster([BUSY, HANDED], [*FULL, pod("web-2", None, "1", constraints=elsewhere)])
    assert needed_back(selected, ["handed"]) == ()


def test_placeholders_daemonset_pods_and_nodes_being_deleted_do_not_count() -> None:
    placeholder = pod("hold-1", None, "1", labels={"tuner/placeholder": "x"})
    daemon = pod("agent-1", None, "100m", kind="DaemonSet")
    c = cluster([BUSY, HANDED], [*FULL, placeholder, daemon])
    assert needed_back(c, ["handed"], lambda p: "tuner/placeholder" in p.labels) == ()
    deleting = node(
        "handed", "4", "8Gi", unschedulable=True, taints=(Taint("ToBeDeletedByClusterAutoscaler"),)
    )
    assert (
        needed_back(cluster([BUSY, deleting], [*FULL, pod("web-2", None, "1")]), ["handed"]) == ()
    )


def test_pending_pods_fill_a_taken_node_before_another_is_taken() -> None:
    second = node("handed-2", "4", "8Gi", unschedulable=True)
    pending = [pod(f"web-{i}", None, "1", "1Gi") for i in range(2, 5)]
    assert needed_back(
        cluster([BUSY, HANDED, second], [*FULL, *pending]), ["handed", "handed-2"]
    ) == ("handed",)
    five = [pod(f"web-{i}", None, "1", "1Gi") for i in range(2, 7)]
    assert needed_back(cluster([BUSY, HANDED, second], [*FULL, *five]), ["handed", "handed-2"]) == (
        "handed",
        "handed-2",
    )


def test_replicas_that_repel_each_other_take_back_a_node_each() -> None:
    spread = Constraints(
        anti_affinity=(PodAffinityTerm(LabelSelector((("app", "web"),)), ("default",)),)
    )
    second = node("handed-2", "4", "8Gi", unschedulable=True)
    pending = [pod(f"web-{i}", None, "1", "1Gi", constraints=spread) for i in (2, 3)]
    handed = ["handed", "handed-2"]
    assert needed_back(cluster([BUSY, HANDED, second], pending), handed) == ("handed", "handed-2")
    # a resident of the handed-over node that the pending pod repels keeps the node handed over
    resident = pod("web-1", "handed", "100m", kind="DaemonSet", workload="web")
    assert needed_back(cluster([BUSY, HANDED], [resident, pending[0]]), ["handed"]) == ()


def test_the_simulated_actuator_uncordons_a_needed_node_and_its_pods_run() -> None:
    sim = Simulation(scenario("thesis-wide", 0.5), 1, AutoscalerOnly())
    sim.advance(60)
    actuator = SimActuator(sim, "autoscaler")
    state = sim.cluster_state
    assert state.totals.pending == 0
    assert actuator.take_back_needed(sim.now) == ()  # nothing handed over
    first, *others = sorted(state.nodes)
    for other in others:  # no room elsewhere: the drained node's pods pend
        state.nodes[other].unschedulable = True
    sim.controls.drain_node(first, "autoscaler")
    assert first in sim.handed_over
    assert state.totals.pending >= 1
    assert actuator.take_back_needed(sim.now) == (first,)
    assert not state.nodes[first].unschedulable
    assert first not in sim.handed_over
    assert state.totals.pending == 0


def test_a_pending_pod_whose_zone_spread_forbids_the_handed_node_does_not_take_it_back() -> None:
    """Zone a holds one web pod, zone b none: a second one may only go to zone b."""
    web_app = LabelSelector((("app", "web"),))
    zone_spread = Constraints(spread=(SpreadConstraint(1, ZONE_KEY, web_app),))
    in_a = node("handed", "4", "8Gi", unschedulable=True, labels={ZONE_KEY: "a"})
    busy_b = node("busy-b", "4", "8Gi", labels={ZONE_KEY: "b"})
    running = pod("web-1", "web-a", "100m", constraints=zone_spread)
    other_a = node("web-a", "4", "8Gi", labels={ZONE_KEY: "a"})
    pending = pod("web-2", None, "1", "1Gi", constraints=zone_spread)
    filler = pod("fill-1", "busy-b", "4", "8Gi")
    c = cluster([in_a, busy_b, other_a], [running, filler, pending])
    assert needed_back(c, ["handed"]) == ()
    unspread = cluster([in_a, busy_b, other_a], [running, filler, pod("web-2", None, "1", "1Gi")])
    assert needed_back(unspread, ["handed"]) == ("handed",)
