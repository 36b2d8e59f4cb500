"""The independent replay checker catches a plan that breaks any fit rule, once per rule, and
lets the same plan through when only that rule is satisfied."""

from __future__ import annotations

from dataclasses import replace

import pytest

from testkit.builders import cluster, node, pod
from tuner.model import constraints as rules
from tuner.model.change import DesiredChange, Relocation
from tuner.model.cluster import Cluster, Node, Pod
from tuner.model.snapshot import Snapshot
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


ZONE = rules.ZONE_KEY
WEB_APP = rules.LabelSelector((("app", "web"),))
GPU = "nvidia.com/gpu"


def _zoned(name: str, zone: str, **extra: object) -> Node:
    return node(name, "4", "8Gi", labels={ZONE: zone}, **extra)  # type: ignore[arg-type]


def _spread(key: str, *, hard: bool = True) -> rules.Constraints:
    return rules.Constraints(spread=(rules.SpreadConstraint(1, key, WEB_APP, hard=hard),))


def _web(name: str, on: str, constraints: rules.Constraints) -> Pod:
    return pod(name, on, "100m", "64Mi", constraints=constraints)


def _rule_case(rule: str) -> tuple[Cluster, Pod, str]:
    """A cluster where migrating the returned pod from ``src`` to ``dst`` breaks ``rule`` only,
    and the reason the replay must give."""
    if rule in ("zone spread", "soft zone spread"):
        spread = _spread(ZONE, hard=rule == "zone spread")
        mover = _web("web-1", "src", spread)
        others = [_web("web-2", "dst", spread), _web("web-3", "dst", spread)]
        nodes = [_zoned("src", "a"), _zoned("dst", "b")]
        kind = "topology spread" if rule == "zone spread" else "soft topology spread"
        why = f"{kind} on {ZONE} \\(maxSkew 1\\) would be broken: 3 pods in {ZONE}=b"
        return cluster(nodes, [mover, *others]), mover, why
    if rule == "hostname spread":
        spread = _spread(rules.HOSTNAME_KEY)
        mover = _web("web-1", "src", spread)
        nodes = [node("src"), node("dst"), node("idle")]
        why = "topology spread on kubernetes.io/hostname \\(maxSkew 1\\) would be broken"
        return cluster(nodes, [mover, _web("web-2", "dst", spread)]), mover, why
    if rule == "pod affinity":
        near_cache = rules.PodAffinityTerm(rules.LabelSelector((("app", "cache"),)), ("default",))
        mover = _web("web-1", "src", rules.Constraints(affinity=(near_cache,)))
        nodes = [node("src"), node("dst")]
        why = "required pod affinity: no matching pod in kubernetes.io/hostname=dst"
        return cluster(nodes, [mover, pod("cache-1", "src")]), mover, why
    if rule == "zone anti-affinity":
        away = rules.PodAffinityTerm(rules.LabelSelector((("app", "db"),)), ("default",), ZONE)
        mover = _web("web-1", "src", rules.Constraints(anti_affinity=(away,)))
        nodes = [_zoned("src", "a"), _zoned("dst", "b"), _zoned("db-host", "b")]
        why = f"required pod anti-affinity with default/db-1 in one {ZONE}"
        return cluster(nodes, [mover, pod("db-1", "db-host")]), mover, why
    if rule == "zonal volume":
        disk = rules.VolumeAffinity(
            "PersistentVolume pv-1 (claim default/data)",
            ((rules.Requirement(ZONE, "In", ("a",)),),),
        )
        mover = _web("web-1", "src", rules.Constraints(volumes=(disk,)))
        nodes = [_zoned("src", "a"), _zoned("dst", "b")]
        why = "PersistentVolume pv-1 \\(claim default/data\\) is not reachable from the node"
        return cluster(nodes, [mover]), mover, why
    if rule == "host port":
        port = rules.Constraints(host_ports=(rules.HostPort(8080),))
        mover = _web("web-1", "src", port)
        bound = rules.Constraints(host_ports=(rules.HostPort(8080, "TCP", "10.0.0.7"),))
        nodes = [node("src"), node("dst")]
        why = "host port TCP 0.0.0.0:8080 is in use"
        return cluster(nodes, [mover, pod("proxy-1", "dst", constraints=bound)]), mover, why
    assert rule == "GPU"
    gpu = rules.Constraints(extended=((GPU, 1),))
    mover = _web("web-1", "src", gpu)
    one_gpu = {GPU: 1}
    nodes = [replace(node(n), extended=one_gpu) for n in ("src", "dst")]
    why = f"not enough free {GPU}"
    return cluster(nodes, [mover, pod("train-1", "dst", constraints=gpu)]), mover, why


RULES = [
    "zone spread",
    "hostname spread",
    "soft zone spread",
    "pod affinity",
    "zone anti-affinity",
    "zonal volume",
    "host port",
    "GPU",
]


@pytest.mark.parametrize("rule", RULES)
def test_replay_catches_a_migration_that_breaks_a_rule_counting_other_pods(rule: str) -> None:
    c, mover, why = _rule_case(rule)
    with pytest.raises(
        InfeasiblePlan, match=f"step 1: pod default/web-1 cannot go to node dst: {why}"
    ):
        replay(c, [Migrate(mover, "dst")])


@pytest.mark.parametrize("rule", RULES)
def test_the_planner_and_the_snapshot_refuse_the_same_migration(rule: str) -> None:
    c, mover, _ = _rule_case(rule)
    assert Snapshot(c).why_not(mover, "dst", leaving=mover.node) is not None
    with pytest.raises(InfeasiblePlan):
        plan(c, DesiredChange(relocations=(Relocation(mover, "dst"),)))


def test_a_scheduler_placement_is_not_held_to_soft_spread() -> None:
    c, mover, _ = _rule_case("soft zone spread")
    assert replay(c, [Migrate(mover, "dst")], soft=False).pods["dst"] == {
        "default/web-1",
        "default/web-2",
        "default/web-3",
    }


def test_soft_spread_may_stay_as_uneven_as_it_was() -> None:
    """Zones a:1, b:3 (skew 2): a pod may move within zone b, not leave zone a."""
    spread = _spread(ZONE, hard=False)
    pods = [
        _web("web-1", "a1", spread),
        *(_web(f"web-{i}", "b1", spread) for i in (2, 3, 4)),
    ]
    c = cluster([_zoned("a1", "a"), _zoned("b1", "b"), _zoned("b2", "b")], pods)
    assert replay(c, [Migrate(pods[1], "b2")]).pods["b2"] == {"default/web-2"}
    with pytest.raises(InfeasiblePlan, match="soft topology spread"):
        replay(c, [Migrate(pods[0], "b2")])


def test_a_node_the_plan_removes_is_cordoned_from_its_first_step() -> None:
    mover = pod("web-1", "src")
    c = cluster([node("src"), node("gone")], [mover])
    with pytest.raises(InfeasiblePlan, match="cannot go to node gone: node is cordoned"):
        replay(c, [Migrate(mover, "gone"), RemoveNode("gone")])
