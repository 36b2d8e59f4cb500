"""Algorithm 1, the both-impossible guard, min saving and exploration."""

import math
import random
from collections import Counter

import pytest

from testkit.builders import cluster, node, pod
from tuner.analyse.context import Context
from tuner.analyse.decision import Stay, analyse, walk
from tuner.analyse.exploration import random_migration
from tuner.analyse.options import Choice, Disruption, Proposal, Refusal
from tuner.analyse.previous import PreviousDeployment
from tuner.analyse.removal import RemoveNodes
from tuner.model.change import Addition, DesiredChange, Relocation
from tuner.model.execution import execution_of
from tuner.model.movability import Policy, assess
from tuner.settings import Analyse, Pricing, Settings

INF = math.inf


@pytest.mark.parametrize(
    ("current", "removal", "previous", "expected"),
    [
        (10, 8, 9, Choice.REMOVE_NODES),
        (10, 8, 8, Choice.REMOVE_NODES),  # tie: removal needs fewer actions
        (10, 9, 8, Choice.PREVIOUS),
        (10, INF, 10, Choice.STAY),  # tie with current: stay
        (10, INF, 12, Choice.STAY),
        (10, INF, 7, Choice.PREVIOUS),
        (10, 8, INF, Choice.REMOVE_NODES),
        (10, INF, INF, Choice.STAY),  # both impossible: stay, not remove
    ],
)
def test_algorithm_1(current: float, removal: float, previous: float, expected: Choice) -> None:
    """The walk over removal then previous, from staying, is Algorithm 1."""

    def offer(option: Choice, cost: float) -> Proposal:
        if math.isinf(cost):
            return Proposal.refused(option, Refusal.NO_CANDIDATE, "none")
        return Proposal(option, cost, DesiredChange(), "")

    stay = Proposal(Stay.name, current, DesiredChange(), "stay")
    weighed = [
        (RemoveNodes(), offer(Choice.REMOVE_NODES, removal)),
        (PreviousDeployment(), offer(Choice.PREVIOUS, previous)),
    ]
    assert walk(stay, weighed).option is expected


def _settings(**analyse: object) -> Settings:
    return Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), **analyse),
    )  # type: ignore[arg-type]


def test_analyse_prefers_removal_and_builds_its_change() -> None:
    c = cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])
    result = analyse(c, _settings(), [], random.Random(0))
    assert result.decision is Choice.REMOVE_NODES
    assert result.cost_current == 8 and result.cost_after == 4
    assert len(result.change.relocations) == 1 and len(result.change.remove_nodes) == 1


def test_analyse_returns_to_a_cheaper_previous_deployment() -> None:
    then = cluster([node("x", "8", "16Gi")], [pod("w-1", "x", "3"), pod("w-2", "x", "3")])
    now = cluster(
        [node("a", "8", "16Gi"), node("b", "8", "16Gi")],
        [pod("w-1", "a", "3"), pod("w-2", "b", "3")],
    )
    s = _settings(remove_nodes=False)
    history = [execution_of(then, assess(then, Policy(frozenset())), s.pricing, 100, 0, 1)]
    result = analyse(now, s, history, random.Random(0))
    assert result.decision is Choice.PREVIOUS
    assert result.cost_after == 8
    # w-2 leaves b for a: one move, as a replacement's would be (not a removal and an addition)
    assert result.chosen is not None
    assert result.chosen.disruption == Disruption(pods_moved=1, nodes_drained=1)


def test_small_savings_are_not_worth_the_disruption() -> None:
    c = cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])
    result = analyse(c, _settings(min_saving_per_hour=5.0), [], random.Random(0))
    assert result.decision is Choice.STAY
    assert "below min_saving_per_hour" in result.reason
    assert result.change.empty


def test_staying_explores_with_the_configured_chance() -> None:
    c = cluster([node("a"), node("b")], [pod("w-1", "a", "1"), pod("w-2", "b", "1")])
    never = analyse(c, _settings(migration_chance=0.0, remove_nodes=False), [], random.Random(0))
    assert never.decision is Choice.STAY and never.change.empty
    always = analyse(c, _settings(migration_chance=1.0, remove_nodes=False), [], random.Random(0))
    assert always.decision is Choice.RANDOM
    assert len(always.change.relocations) == 1


def test_random_migration_is_uniform_over_feasible_pairs() -> None:
    # feasible pairs: web-1 -> b, web-1 -> c, web-2 -> b, web-2 -> c, api-1 -> a, api-1 -> c
    # (api-1 fits only where 600m is free; db is a StatefulSet and never moves)
    nodes = [node("a", "1", "4Gi"), node("b", "1", "4Gi"), node("c", "2", "4Gi")]
    pods = [
        pod("web-1", "a", "200m"),
        pod("web-2", "a", "200m"),
        pod("api-1", "b", "600m"),
        pod("db-0", "c", "1400m", kind="StatefulSet", workload="db"),
    ]
    c = cluster(nodes, pods)
    movability = assess(c, Policy(frozenset()))
    rng = random.Random(1)
    draws = Counter()
    for _ in range(6000):
        move = random_migration(Context.of(c, Settings(), movability), rng)
        assert move is not None
        draws[(move.pod.name, move.node)] += 1
    expected = {
        ("web-1", "b"),
        ("web-1", "c"),
        ("web-2", "b"),
        ("web-2", "c"),
        ("api-1", "a"),
        ("api-1", "c"),
    }
    assert set(draws) == expected
    for count in draws.values():
        assert 850 < count < 1150  # 1000 expected each


def test_random_migration_is_seedable_and_none_when_nothing_fits() -> None:
    c = cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])
    m = assess(c, Policy(frozenset()))
    first = [random_migration(Context.of(c, Settings(), m), random.Random(7)) for _ in range(3)]
    assert first[0] == first[1] == first[2]
    full = cluster(
        [node("a", "1", "1Gi"), node("b", "1", "1Gi")], [pod("w-1", "a", "1"), pod("w-2", "b", "1")]
    )
    context = Context.of(full, Settings(), assess(full, Policy(frozenset())))
    assert random_migration(context, random.Random(0)) is None


def test_every_option_answers_with_a_proposal_and_the_decision_reports_them() -> None:
    then = cluster([node("x", "8", "16Gi")], [pod("w-1", "x", "3"), pod("w-2", "x", "3")])
    gone = cluster([node("y", "8", "16Gi", instance_type="gone-type")], [pod("w-1", "y", "3")])
    now = cluster(
        [node("a", "8", "16Gi"), node("b", "8", "16Gi")],
        [pod("w-1", "a", "3"), pod("w-2", "b", "3")],
    )
    s = _settings(remove_nodes=False)
    policy = Policy(frozenset())
    history = [
        execution_of(then, assess(then, policy), s.pricing, 100, 0, 1),
        execution_of(gone, assess(gone, policy), s.pricing, 100, 0, 1),
    ]
    result = analyse(now, s, history, random.Random(0))
    removal, previous, replace = result.proposals
    assert (removal.option, previous.option) == (Choice.REMOVE_NODES, Choice.PREVIOUS)
    assert not removal.possible and removal.refusal is Refusal.DISABLED
    assert removal.reason == "node removal is disabled"
    assert replace.option == Choice.REPLACE_NODES
    assert not replace.possible and replace.refusal is Refusal.NO_POOL_CAN_GROW
    assert replace.reason == "no node pool can grow"
    assert result.chosen is previous and previous.cost_after == result.cost_after == 8
    assert previous.change == result.change and previous.disruption.nodes_drained == 1
    # what the decision does to the knowledge base: hold the chosen entry, forget the unattainable
    assert result.holds == history[0].id
    assert [(f.entry, f.kind) for f in result.forget] == [(history[1].id, "unattainable")]


def test_staying_chooses_no_proposal_but_exploring_chooses_one() -> None:
    c = cluster([node("a"), node("b")], [pod("w-1", "a", "1"), pod("w-2", "b", "1")])
    stay = analyse(c, _settings(migration_chance=0.0, remove_nodes=False), [], random.Random(0))
    assert stay.chosen is None and stay.holds is None and stay.forget == ()
    explore = analyse(c, _settings(migration_chance=1.0, remove_nodes=False), [], random.Random(0))
    assert explore.chosen is not None and explore.chosen.option == Choice.RANDOM
    assert explore.chosen.disruption.pods_moved == 1 and explore.cost_after == explore.cost_current


def test_a_move_counts_once_whichever_option_made_it() -> None:
    """A relocation (removal, replace, exploration) and a removal paired with an addition of
    the same workload (a previous deployment; the planner makes one migration of them) are one
    move each; an addition or removal left unpaired counts as itself."""
    w1, w2 = pod("w-1", "a"), pod("w-2", "a")
    relocated = DesiredChange(relocations=(Relocation(w1, "b"),))
    paired = DesiredChange(removals=(w1,), additions=(Addition(w1.workload, "b", w1.requests),))
    assert Disruption.of(relocated) == Disruption.of(paired) == Disruption(pods_moved=1)
    other = pod("db-1", "a", workload="db")
    unpaired = DesiredChange(
        removals=(w1, w2, other), additions=(Addition(w1.workload, "b", w1.requests),)
    )
    assert Disruption.of(unpaired) == Disruption(pods_moved=1, pods_removed=2)
    assert Disruption.of(unpaired).rank == (0, 3)
