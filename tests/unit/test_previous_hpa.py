"""A previous deployment must not change the replica count of an HPA-scaled workload: the
HPA owns it and would undo the change at its next sync (found with the simulator)."""

from dataclasses import replace

from testkit.builders import cluster, node, pod
from tuner.analyse.previous import find_previous
from tuner.model.cluster import Hpa, Workload
from tuner.model.execution import execution_of
from tuner.model.movability import Policy, assess
from tuner.settings import Pricing

PRICING = Pricing(price_per_core=1.0, price_per_gb=0.0)
POLICY = Policy(frozenset())
WEB = Workload("default", "Deployment", "web")


def test_entry_with_another_replica_count_of_an_hpa_workload_is_unattainable() -> None:
    then = cluster([node("a"), node("b")], [pod("web-1", "a", "1"), pod("web-2", "a", "1")])
    now = cluster(
        [node("x"), node("y"), node("z")],
        [pod("web-1", "x", "1"), pod("web-2", "y", "1"), pod("web-3", "z", "1")],
    )
    entry = execution_of(then, assess(then, POLICY), PRICING, 100.0, 0.0, 600.0)
    without_hpa = find_previous(now, assess(now, POLICY), PRICING, [entry], 12.0)
    assert without_hpa.change is not None  # a removal of one web pod, then two nodes

    scaled = replace(now, hpas=(Hpa("default", "web", WEB, 1, 10),))
    with_hpa = find_previous(scaled, assess(scaled, POLICY), PRICING, [entry], 12.0)
    assert with_hpa.change is None
    ((_, why),) = with_hpa.unattainable
    assert "replica count" in why and "HPA" in why


def test_same_replica_count_of_an_hpa_workload_is_still_attainable() -> None:
    then = cluster(
        [node("a"), node("b")],
        [pod("web-1", "a", "1"), pod("web-2", "a", "1"), pod("web-3", "a", "1")],
    )
    now = cluster(
        [node("x"), node("y"), node("z")],
        [pod("web-1", "x", "1"), pod("web-2", "y", "1"), pod("web-3", "z", "1")],
    )
    entry = execution_of(then, assess(then, POLICY), PRICING, 100.0, 0.0, 600.0)
    scaled = replace(now, hpas=(Hpa("default", "web", WEB, 1, 10),))
    result = find_previous(scaled, assess(scaled, POLICY), PRICING, [entry], 12.0)
    assert result.change is not None
    assert len(result.change.remove_nodes) == 1  # all three web pods move onto one node
