"""Replace: several nodes onto fewer or cheaper new nodes of a pool, only when it pays."""

import logging
import random
from dataclasses import replace
from fractions import Fraction

import pytest
from prometheus_client import generate_latest

from testkit.builders import cluster, node, pod
from tuner.analyse.context import Context
from tuner.analyse.decision import analyse, beats
from tuner.analyse.options import Choice, Proposal, Refusal
from tuner.analyse.replace import ReplaceNodes, find_replacement
from tuner.cycle import CycleReport, Outcome, TransitionResult
from tuner.daemon.cycle_events import cycle_event
from tuner.daemon.cycle_log import log_cycle
from tuner.daemon.metrics import Metrics
from tuner.model.change import DesiredChange, NewNode, Relocation
from tuner.model.cluster import Cluster, Node
from tuner.model.constraints import Constraints
from tuner.model.conventions import POOL_LABELS
from tuner.model.movability import Policy, assess
from tuner.model.pools import discover
from tuner.plan.actions import Migrate, ProvisionNode, RemoveNode
from tuner.plan.planner import plan
from tuner.plan.replay import InfeasiblePlan, replay
from tuner.report.build import build_report
from tuner.report.text import render_text
from tuner.settings import Analyse, LeaderElectionSettings, Settings, Thresholds, settings_from_dict

POOL = POOL_LABELS[0]


def _small(name: str) -> Node:
    return node(name, "4", "16Gi", labels={POOL: "small"}, instance_type="small-4")


def _settings(big_price: float = 1.5, **pools: dict[str, object]) -> Settings:
    big = {
        "template": {
            "instance_type": "big-8",
            "cpu": "8",
            "memory": "32Gi",
            "labels": {POOL: "big"},
        },
        **pools.get("big", {}),
    }
    document = {
        "pricing": {"node_types": {"small-4": 1.0, "big-8": big_price, "full-4": 1.0}},
        "analyse": {"excluded_namespaces": [], "remove_nodes": False},
        "pools": {
            "big": big,
            "small": {"max": 2, **pools.get("small", {})},
            "full-4": {"max": 1},
        },
    }
    return settings_from_dict(document)


def _half_empty() -> Cluster:
    """Two small nodes half full (2.5 of 4 cores each: together too much for one of them) and
    a full node that cannot be drained: nothing can be removed, two smalls fit on one big.
    Only the big pool (no node yet) can grow."""
    return cluster(
        [_small("s-1"), _small("s-2"), node("f-1", "4", "16Gi", instance_type="full-4")],
        [
            pod("web-1", "s-1", "2500m", "1Gi"),
            pod("api-1", "s-2", "2500m", "1Gi"),
            pod("db-1", "f-1", "4", "1Gi", kind="StatefulSet"),
        ],
    )


def _analyse(c: Cluster, s: Settings, policy: Policy | None = None):  # type: ignore[no-untyped-def]
    movability = assess(c, policy or Policy(frozenset()))
    return find_replacement(c, s, movability, discover(c, s))


def test_two_half_empty_nodes_become_one_cheaper_new_node() -> None:
    c, s = _half_empty(), _settings()
    found = _analyse(c, s).replacement
    assert found is not None
    assert found.drained == ("s-1", "s-2")
    assert [(n.name, n.pool.name) for n in found.new_nodes] == [("big+1", "big")]
    assert sorted((m.pod.name, m.node) for m in found.moves) == [
        ("api-1", "big+1"),
        ("web-1", "big+1"),
    ]
    assert found.saving == 0.5
    result = analyse(c, s, [], random.Random(0))
    assert result.decision is Choice.REPLACE_NODES
    assert (result.cost_current, result.cost_after) == (3.0, 2.5)
    assert result.chosen is not None and result.chosen.disruption.nodes_provisioned == 1


def test_never_more_actions_than_one_cycle_may_take() -> None:
    c, s = _half_empty(), _settings()
    s = replace(s, execute=replace(s.execute, max_actions_per_cycle=4))  # needs 1 + 2 + 2
    result = _analyse(c, s)
    assert result.replacement is None and result.refusal is Refusal.TOO_MANY_ACTIONS
    assert "5 actions, more than execute.max_actions_per_cycle 4" in result.reason


def test_no_replacement_unless_cheaper_after_provisioning() -> None:
    c = _half_empty()
    assert _analyse(c, _settings(big_price=2.0)).replacement is None
    result = analyse(c, _settings(big_price=2.0), [], random.Random(0))
    assert result.decision is Choice.STAY and result.change == DesiredChange()


def test_never_when_the_pool_cannot_grow() -> None:
    c = _half_empty()
    at_max = _settings(big={"max": 0})
    outcome = _analyse(c, at_max)
    assert outcome.replacement is None and outcome.refusal is Refusal.NO_POOL_CAN_GROW
    assert analyse(c, at_max, [], random.Random(0)).decision is Choice.STAY


def test_never_drains_a_pool_below_its_minimum() -> None:
    c = _half_empty()
    assert _analyse(c, _settings(small={"min": 1})).replacement is None
    assert _analyse(c, _settings(small={"min": 0})).replacement is not None


def test_never_drains_nor_fills_an_unsettled_node() -> None:
    # s-3 is nearly empty and would take api-1 (then only s-1 needs a new node: same saving,
    # fewer moves), but it changed during the window: it is neither drained nor filled.
    c = cluster(
        [*_half_empty().nodes, _small("s-3")],
        [*_half_empty().pods, pod("tiny-1", "s-3", "100m", "128Mi")],
    )
    s = _settings()
    free = _analyse(c, s).replacement
    assert free is not None and "s-3" in free.drained
    held = _analyse(c, s, Policy(frozenset(), unsettled_nodes=frozenset({"s-3"})))
    assert held.replacement is not None
    assert "s-3" not in held.replacement.drained
    assert all(m.node != "s-3" for m in held.replacement.moves)


def test_the_thresholds_bound_a_replacement() -> None:
    c = _half_empty()
    tight = Settings(
        pricing=_settings().pricing,
        analyse=Analyse(
            excluded_namespaces=frozenset(),
            thresholds=Thresholds(Fraction(70, 100), None),
        ),
        pools=_settings().pools,
    )
    # after: 9 of 12 cores requested (75 %): over a 70 % threshold
    outcome = _analyse(c, tight)
    assert outcome.replacement is None and outcome.refusal is Refusal.THRESHOLDS


def test_disabled_and_capped() -> None:
    c = _half_empty()
    s = _settings()
    off = Settings(s.pricing, Analyse(excluded_namespaces=frozenset(), replace_nodes=False))
    assert _analyse(c, off).refusal is Refusal.DISABLED
    assert _analyse(c, off).reason == "node replacement is disabled"
    one = Settings(
        s.pricing, Analyse(excluded_namespaces=frozenset(), max_replaced_nodes=1), pools=s.pools
    )
    assert _analyse(c, one).replacement is None  # one small node alone: no cheaper type


def test_a_daemonset_that_would_run_on_the_new_node_takes_room_there() -> None:
    base = _half_empty()
    tight = {"template": {"instance_type": "big-8", "cpu": "5500m", "memory": "32Gi"}}
    everywhere = pod("agent-1", "s-1", "1", "1Gi", kind="DaemonSet")
    small_only = pod(
        "agent-1",
        "s-1",
        "1",
        "1Gi",
        kind="DaemonSet",
        constraints=Constraints(node_selector=((POOL, "small"),)),
    )
    # 5 of 5.5 cores of moved pods fit the new node; with 1 core of agent they do not
    assert _analyse(base, _settings(big=tight)).replacement is not None
    crowded = cluster(list(base.nodes), [*base.pods, everywhere])
    assert _analyse(crowded, _settings(big=tight)).replacement is None
    elsewhere = cluster(list(base.nodes), [*base.pods, small_only])
    assert _analyse(elsewhere, _settings(big=tight)).replacement is not None


def _proposal(option: Choice, cost: float, drained: int = 0, provisioned: int = 0) -> Proposal:
    pool = discover(_half_empty(), _settings()).by_name["big"]
    change = DesiredChange(
        remove_nodes=tuple(f"n-{i}" for i in range(drained)),
        new_nodes=tuple(NewNode(f"big+{i}", pool) for i in range(provisioned)),
    )
    return Proposal(option, cost, change, "")


def test_where_replace_fits_in_the_decision() -> None:
    replace = _proposal(Choice.REPLACE_NODES, 8.0, drained=2, provisioned=1)

    def wins(incumbent: Proposal) -> bool:
        return beats(ReplaceNodes(), replace, incumbent)

    assert wins(_proposal(Choice.STAY, 10.0))  # against staying: cheaper
    assert not wins(_proposal(Choice.STAY, 8.0))  # no cheaper than staying: stay
    assert not wins(_proposal(Choice.REMOVE_NODES, 8.0, drained=1))  # removal on ties
    assert wins(_proposal(Choice.REMOVE_NODES, 7.5, drained=1)) is False  # dearer loses
    assert not wins(_proposal(Choice.PREVIOUS, 8.0, drained=1))
    assert wins(_proposal(Choice.PREVIOUS, 8.0, drained=4))  # less disruptive
    assert wins(_proposal(Choice.PREVIOUS, 9.0, drained=1))  # cheaper wins


def test_min_saving_applies_to_a_replacement() -> None:
    c = _half_empty()
    s = _settings()
    picky = Settings(
        s.pricing,
        Analyse(excluded_namespaces=frozenset(), remove_nodes=False, min_saving_per_hour=0.6),
        pools=s.pools,
    )
    result = analyse(c, picky, [], random.Random(0))
    assert result.decision is Choice.STAY and "min_saving_per_hour" in result.reason


def test_the_plan_provisions_first_and_the_replay_accepts_it() -> None:
    c, s = _half_empty(), _settings()
    proposal = ReplaceNodes().propose(Context.of(c, s, assess(c, Policy(frozenset()))))
    actions = plan(c, proposal.change)
    assert isinstance(actions[0], ProvisionNode) and actions[0].node == "big+1"
    assert actions[0].requests.cpu == 5000
    assert [type(a) for a in actions[1:]] == [Migrate, Migrate, RemoveNode, RemoveNode]
    final = replay(c, actions)
    assert sorted(final.pods["big+1"]) == ["default/api-1", "default/web-1"]
    assert final.removed == {"s-1", "s-2"}


def test_a_move_onto_a_new_node_that_does_not_fit_is_refused() -> None:
    c = _half_empty()
    pool = discover(c, _settings()).by_name["big"]
    too_small = NewNode("big+1", pool)
    db = c.pods[2]  # 4 cores
    change = DesiredChange(
        relocations=(Relocation(c.pods[0], "big+1"), Relocation(c.pods[1], "big+1")),
        new_nodes=(too_small,),
    )
    replay(c, plan(c, change))
    bad = (
        ProvisionNode("big+1", pool, db.requests),
        Migrate(c.pods[0], "big+1"),
        Migrate(c.pods[1], "big+1"),
        Migrate(db, "big+1"),
    )
    with pytest.raises(InfeasiblePlan, match=r"step 4: .* not enough free CPU"):
        replay(c, bad)
    with pytest.raises(InfeasiblePlan, match=r"unknown node big\+1"):
        replay(c, (Migrate(c.pods[0], "big+1"),))


def test_the_report_shows_new_nodes() -> None:
    c, s = _half_empty(), _settings()
    report = build_report(c, s, analyse(c, s, [], random.Random(0)))
    document = report.to_json()
    assert document["decision"] == "replace_nodes"
    assert document["new_nodes"] == [{"node": "big+1", "pool": "big", "type": "big-8"}]
    assert document["options"]["replace_nodes"] == 2.5
    assert document["actions"][0] == {
        "op": "provision_node",
        "node": "big+1",
        "pool": "big",
        "type": "big-8",
    }
    # after: 9 of 12 cores requested on f-1 and the new node
    assert document["utilization"]["after"]["cpu"] == 0.75
    assert "provision_node  big (big-8)" in render_text(report)


def test_a_dear_node_however_full_is_replaced_by_a_cheaper_type_its_pods_fit() -> None:
    # s-1 and s-2 are emptier, but only the full highmem node has a cheaper type that fits it
    c = cluster(
        [
            _small("s-1"),
            _small("s-2"),
            node("h-1", "4", "32Gi", labels={POOL: "highmem"}, instance_type="highmem-4"),
        ],
        [
            pod("web-1", "s-1", "3", "1Gi"),
            pod("api-1", "s-2", "3", "1Gi"),
            pod("batch-1", "h-1", "3900m", "6Gi"),
        ],
    )
    document = {
        "pricing": {"node_types": {"small-4": 1.0, "highmem-4": 1.35}},
        "analyse": {"excluded_namespaces": [], "max_replaced_nodes": 2},
        "pools": {"highmem": {"max": 1}},
    }
    found = _analyse(c, settings_from_dict(document)).replacement
    assert found is not None and found.drained == ("h-1",)
    assert [n.pool.name for n in found.new_nodes] == ["small"] and round(found.saving, 2) == 0.35


def test_a_replace_shows_in_the_cycle_log_the_event_and_the_metrics(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c, s = _half_empty(), _settings()
    report = build_report(c, s, analyse(c, s, [], random.Random(0)))
    cycle = CycleReport(
        Outcome.ACTED,
        0.0,
        600.0,
        report.analysis.reason,
        600.0,
        plan=report,
        result=TransitionResult(report.actions, True),
    )
    log = logging.getLogger("test.replace")
    with caplog.at_level(logging.INFO, logger="test.replace"):
        log_cycle(cycle, log)
    text = caplog.text
    assert "replace nodes 2.5000" in text and "decision replace_nodes" in text
    assert "provision_node big (big-8) -> big+1" in text
    assert cycle_event(cycle, LeaderElectionSettings()).reason == "ReplacedNodes"
    metrics = Metrics(60.0)
    metrics.observe(cycle, 0.1)
    exported = generate_latest(metrics.registry).decode()
    assert 'tuner_actions_total{op="provision_node",result="verified"} 1.0' in exported


def test_a_saving_within_price_rounding_is_no_replacement() -> None:
    # one big node for two smalls at 1.99 (0.5 % saved): within rounding, not worth a drain
    assert _analyse(_half_empty(), _settings(big_price=1.99)).replacement is None
    assert _analyse(_half_empty(), _settings(big_price=1.95)).replacement is not None


def test_room_is_made_where_only_a_node_that_stays_admits_a_pod() -> None:
    green = Constraints(node_selector=(("color", "green"),))
    full = node("f-1", "4", "16Gi", instance_type="full-4", labels={"color": "green"})
    c = cluster(
        [_small("s-1"), _small("s-2"), full],
        [
            pod("web-1", "s-1", "2500m", "1Gi"),
            pod("api-1", "s-2", "1500m", "1Gi"),
            pod("g-1", "s-2", "1000m", "1Gi", constraints=green),
            pod("db-1", "f-1", "2500m", "1Gi", kind="StatefulSet"),
            pod("tool-1", "f-1", "1000m", "1Gi"),
        ],
    )
    s = _settings()  # the default: make_room on
    off = replace(s, analyse=replace(s.analyse, make_room=False))
    assert _analyse(c, off).replacement is None
    found = _analyse(c, s).replacement
    assert found is not None and found.drained == ("s-1", "s-2")
    assert sorted((m.pod.name, m.node) for m in found.moves) == [
        ("api-1", "big+1"),
        ("g-1", "f-1"),  # after tool-1 left it
        ("tool-1", "big+1"),
        ("web-1", "big+1"),
    ]
    replay(c, plan(c, found.change))


def test_no_new_node_is_opened_for_a_pod_it_does_not_admit() -> None:
    """g-1 needs green: a new big node would not admit it, so none is opened (and paid for)
    for it; the room made on the green f-1 takes it, which is a mere removal."""
    green = Constraints(node_selector=(("color", "green"),))
    full = node("f-1", "4", "16Gi", instance_type="full-4", labels={"color": "green"})
    c = cluster(
        [_small("s-1"), _small("s-2"), full],
        [
            pod("g-1", "s-1", "1000m", "1Gi", constraints=green),
            pod("api-1", "s-2", "1000m", "1Gi"),
            pod("db-1", "f-1", "2500m", "1Gi", kind="StatefulSet"),
            pod("tool-1", "f-1", "1000m", "1Gi"),
        ],
    )
    s = _settings(big_price=0.5)
    s = replace(s, analyse=replace(s.analyse, make_room=True))
    result = _analyse(c, s)
    assert result.replacement is None and result.refusal is Refusal.MERE_REMOVAL
