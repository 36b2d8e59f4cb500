"""Plan: most migrations, every action feasible when it runs, swaps resolved, removals last."""

import pytest

from testkit.builders import cluster, node, pod
from tuner.model.change import Addition, DesiredChange, Relocation
from tuner.model.constraints import Constraints, LabelSelector, PodAffinityTerm
from tuner.model.resources import Resources
from tuner.plan.actions import Add, Migrate, Remove, RemoveNode, action_json
from tuner.plan.planner import plan
from tuner.plan.replay import InfeasiblePlan, replay


def test_removal_and_addition_of_a_workload_become_a_migration() -> None:
    c = cluster([node("a"), node("b")], [pod("web-1", "a"), pod("web-2", "a")])
    web = c.pods[0].workload
    change = DesiredChange(
        removals=(c.pods[0],), additions=(Addition(web, "b", c.pods[0].requests),)
    )
    actions = plan(c, change)
    assert actions == (Migrate(c.pods[0], "b"),)


def test_migrations_are_maximised_and_the_rest_are_adds_and_removes() -> None:
    c = cluster(
        [node("a"), node("b"), node("c")], [pod("web-1", "a"), pod("web-2", "a"), pod("web-3", "a")]
    )
    web = c.pods[0].workload
    r = c.pods[0].requests
    change = DesiredChange(
        removals=c.pods,  # 3 removals
        additions=(Addition(web, "b", r), Addition(web, "c", r)),  # 2 additions
    )
    actions = plan(c, change)
    assert sum(isinstance(a, Migrate) for a in actions) == 2
    assert sum(isinstance(a, Remove) for a in actions) == 1
    replay(c, actions)


def test_a_removal_and_addition_on_the_same_node_cancel_out() -> None:
    c = cluster([node("a")], [pod("web-1", "a")])
    change = DesiredChange(
        removals=c.pods, additions=(Addition(c.pods[0].workload, "a", c.pods[0].requests),)
    )
    assert plan(c, change) == ()


def test_swap_between_full_nodes_uses_a_temporary_remove_and_add() -> None:
    # a and b are full; x must go to b and y to a
    c = cluster(
        [node("a", "1", "1Gi"), node("b", "1", "1Gi")],
        [pod("x-1", "a", "1", workload="x"), pod("y-1", "b", "1", workload="y")],
    )
    x, y = c.pods
    change = DesiredChange(relocations=(Relocation(x, "b"), Relocation(y, "a")))
    actions = plan(c, change)
    assert [type(a) for a in actions] == [Remove, Migrate, Add]
    final = replay(c, actions)  # raises if any step overcommits
    assert final.requested["a"] == Resources(1000, 128 * 2**20)
    assert {action_json(a)["op"] for a in actions} == {"remove", "migrate", "add"}


def test_order_makes_room_before_moving_in() -> None:
    # b is full of z; z leaves to c, then x can move from a to b
    c = cluster(
        [node("a", "1", "1Gi"), node("b", "1", "1Gi"), node("c", "1", "1Gi")],
        [pod("x-1", "a", "1", workload="x"), pod("z-1", "b", "1", workload="z")],
    )
    x, z = c.pods
    actions = plan(c, DesiredChange(relocations=(Relocation(x, "b"), Relocation(z, "c"))))
    assert actions == (Migrate(z, "c"), Migrate(x, "b"))


def test_scale_down_runs_before_a_blocked_addition() -> None:
    c = cluster([node("a", "1", "1Gi")], [pod("x-1", "a", "1", workload="x")])
    y = pod("y-1", None, "1", workload="y")
    change = DesiredChange(removals=c.pods, additions=(Addition(y.workload, "a", y.requests),))
    actions = plan(c, change)
    assert [type(a) for a in actions] == [Remove, Add]


def test_node_removals_come_last() -> None:
    c = cluster([node("a"), node("b")], [pod("w-1", "a")])
    actions = plan(c, DesiredChange(relocations=(Relocation(c.pods[0], "b"),), remove_nodes=("a",)))
    assert isinstance(actions[-1], RemoveNode)
    assert action_json(actions[-1]) == {"op": "remove_node", "node": "a"}


def test_impossible_desired_state_is_refused() -> None:
    c = cluster([node("a", "1", "1Gi")], [pod("x-1", "a", "1", workload="x")])
    y = pod("y-1", None, "1", workload="y")
    with pytest.raises(InfeasiblePlan):
        plan(c, DesiredChange(additions=(Addition(y.workload, "a", y.requests),)))


def test_a_step_waits_until_anti_affinity_allows_it() -> None:
    # db-1 on b repels web pods: web-1 may move to b only once db-1 is gone
    apart = Constraints(
        anti_affinity=(PodAffinityTerm(LabelSelector((("app", "web"),)), ("default",)),)
    )
    web, db = pod("web-1", "a"), pod("db-1", "b", constraints=apart)
    c = cluster([node("a"), node("b")], [web, db])
    actions = plan(c, DesiredChange(relocations=(Relocation(web, "b"),), removals=(db,)))
    assert actions == (Remove(db), Migrate(web, "b"))
    replay(c, actions)


def test_replay_rejects_overcommit_and_non_empty_node_removal() -> None:
    c = cluster(
        [node("a", "1", "1Gi"), node("b", "1", "1Gi")],
        [pod("x-1", "a", "1", workload="x"), pod("y-1", "b", "1", workload="y")],
    )
    with pytest.raises(
        InfeasiblePlan, match="step 1: pod default/x-1 cannot go to node b: not enough free CPU"
    ):
        replay(c, [Migrate(c.pods[0], "b")])
    with pytest.raises(InfeasiblePlan, match="node a still runs default/x-1"):
        replay(c, [RemoveNode("a")])


def test_action_json_matches_the_contract() -> None:
    p = pod("web-1", "a")
    assert action_json(Migrate(p, "b")) == {
        "op": "migrate",
        "pod": "default/web-1",
        "workload": "default/Deployment/web",
        "from": "a",
        "to": "b",
    }
    assert action_json(Add(p.workload, "b", p.requests)) == {
        "op": "add",
        "workload": "default/Deployment/web",
        "to": "b",
    }
    assert action_json(Remove(p)) == {
        "op": "remove",
        "pod": "default/web-1",
        "workload": "default/Deployment/web",
        "from": "a",
    }
