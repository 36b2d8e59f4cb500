"""The independent replay checker catches a plan that breaks any fit rule, once per rule, and
lets the same plan through when only that rule is satisfied."""

from __future__ import annotations

import pytest

from testkit.builders import cluster, node, pod
from tuner.model import scheduling as rules
from tuner.model.change import DesiredChange, Relocation
from tuner.model.cluster import Node
from tuner.plan.actions import Action, Add, Migrate, Remove, RemoveNode
from tuner.plan.planner import plan
from tuner.plan.replay import InfeasiblePlan, replay

DEDICATED = rules.Taint("dedicated", "web", "NoSchedule")
NOT_WITH_DB = rules.PodAffinityTerm(rules.LabelSelector((("app", "db"),)), ("default",))
NOT_WITH_WEB = rules.PodAffinityTerm(rules.LabelSelector((("app", "web"),)), ("default",))
WEB = rules.Constraints(
    tolerations=(rules.Toleration("dedicated", "Equal", "web", "NoSchedule"),),
    node_selector=(("pool", "a"),),
    node_affinity=((rules.Requirement("zone", "In", ("x",)),),),
    anti_affinity=(NOT_WITH_DB,),
)
MOVER = pod("web-1", "src", "1", "1Gi", constraints=WEB)


def target(**overrides: object) -> Node:
    """A node that admits MOVER by every rule unless ``overrides`` break one."""
    spec: dict[str, object] = {
        "labels": {"pool": "a", "zone": "x"},
        "taints": (DEDICATED,),
    }
    spec.update(overrides)
    return node("dst", "2", "2Gi", **spec)  # type: ignore[arg-type]


GUARD = pod(
    "guard-1", "dst", "10m", "1Mi", constraints=rules.Constraints(anti_affinity=(NOT_WITH_WEB,))
)
DB = pod("db-1", "dst", "10m", "1Mi")
FILLER = pod("filler-1", "dst", "10m", "1Mi")

CASES = {
    "cpu": (target(allocatable=("500m", "2Gi")), [], "not enough free CPU"),
    "memory": (target(allocatable=("2", "512Mi")), [], "not enough free memory"),
    "pod slots": (target(max_pods=1), [FILLER], "no free pod slot"),
    "cordon": (target(unschedulable=True), [], "node is cordoned"),
    "taint": (
        target(taints=(DEDICATED, rules.Taint("gpu", "yes", "NoExecute"))),
        [],
        "taint gpu=yes:NoExecute not tolerated",
    ),
    "nodeSelector": (target(labels={"pool": "b", "zone": "x"}), [], "nodeSelector pool=a"),
    "node affinity": (
        target(labels={"pool": "a", "zone": "y"}),
        [],
        "required node affinity not matched",
    ),
    "anti-affinity of the arriving pod": (
        target(),
        [DB],
        "required pod anti-affinity with default/db-1",
    ),
    "anti-affinity of a resident": (
        target(),
        [GUARD],
        "required pod anti-affinity with default/guard-1",
    ),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_replay_catches_a_migration_that_breaks_one_rule(rule: str) -> None:
    dst, residents, why = CASES[rule]
    c = cluster([node("src", "4", "8Gi"), dst], [MOVER, *residents])
    with pytest.raises(
        InfeasiblePlan, match=f"step 1: pod default/web-1 cannot go to node dst: {why}"
    ):
        replay(c, [Migrate(MOVER, "dst")])
    # an addition of the workload carries the constraints of its running pod
    with pytest.raises(InfeasiblePlan, match=f"step 1: .* cannot go to node dst: {why}"):
        replay(c, [Add(MOVER.workload, "dst", MOVER.requests)])
    # the planner never orders the step either
    with pytest.raises(InfeasiblePlan):
        plan(c, DesiredChange(relocations=(Relocation(MOVER, "dst"),)))


def test_the_same_migration_replays_when_every_rule_holds() -> None:
    c = cluster([node("src", "4", "8Gi"), target(max_pods=2)], [MOVER, FILLER])
    final = replay(c, [Migrate(MOVER, "dst")])
    assert final.pods["dst"] == {"default/web-1", "default/filler-1"}
    assert replay(c, [Add(MOVER.workload, "dst", MOVER.requests)]).pods["dst"] == {
        "default/+web#1",
        "default/filler-1",
    }
    assert plan(c, DesiredChange(relocations=(Relocation(MOVER, "dst"),))) == (
        Migrate(MOVER, "dst"),
    )


@pytest.mark.parametrize(
    ("actions", "why"),
    [
        ([RemoveNode("src")], "step 1: node src still runs default/web-1"),
        ([Migrate(MOVER, "dst"), Remove(MOVER)], "step 2: pod default/web-1 is not on node src"),
        ([Migrate(pod("web-9", "src"), "dst")], "step 1: pod default/web-9 is not on node src"),
        ([Migrate(MOVER, "ghost")], "step 1: unknown node ghost"),
        ([RemoveNode("dst"), Migrate(MOVER, "dst")], "step 2: node dst was removed"),
        ([RemoveNode("dst"), RemoveNode("dst")], "step 2: unknown node dst"),
    ],
)
def test_replay_catches_steps_on_things_that_are_not_there(actions: list[Action], why: str) -> None:
    c = cluster([node("src", "4", "8Gi"), target()], [MOVER])
    with pytest.raises(InfeasiblePlan, match=why):
        replay(c, actions)


def test_daemonset_pods_may_stay_on_a_removed_node() -> None:
    c = cluster([node("src"), target()], [pod("agent-1", "src", kind="DaemonSet")])
    assert replay(c, [RemoveNode("src")]).removed == {"src"}
