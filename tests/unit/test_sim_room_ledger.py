"""The room ledger (``tuner simulate --ledger``): a tuner row's cost above the lower bound,
tick by tick, by the outcome of the tuner's last cycle and by the nodes that carry it; it sums
to the row's cost minus the bound's, and recording it changes no decision."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from testkit.builders import cluster, node, pod
from tuner.errors import InputError
from tuner.model.movability import Policy, assess
from tuner.sim.engine import Scenario, Simulation
from tuner.sim.evaluate import simulate
from tuner.sim.load import Phase, Phases
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.report import comparison, run
from tuner.sim.room_ledger import (
    BEYOND,
    CANDIDATE,
    FAILS_CHECK,
    NO_CYCLE,
    PAST_END,
    SUMMARY_BEGIN,
    SUMMARY_END,
    SUMMARY_HEADER,
    UNJUDGED,
    Ledger,
    LedgerRecorder,
    RoomTrace,
    beyond_bound,
    merged_summary,
    room_ledger,
    summary_row,
    verdicts,
)
from tuner.sim.strategies.tuner import ProjectTuner
from tuner.sim.workloads import Service

E2 = NODE_TYPES["e2-standard-4"]  # 3920m allocatable


def pinned() -> Scenario:
    """24 x 350m over 4 nodes (the Cluster Autoscaler keeps every node, 3 hold them), and one
    StatefulSet pod that pins its node."""
    return Scenario(
        name="pinned",
        title="pinned",
        services=(
            Service("web", 350, 2**28, replicas=24, namespace="shop"),
            Service("db", 100, 2**28, replicas=1, namespace="shop", kind="StatefulSet"),
        ),
        daemonsets=(Service("proxy", 100, 0, kind="DaemonSet", namespace="kube-system"),),
        loads={"shop": Phases(60, (Phase(7200, 1.0),))},
        pools=(NodeGroup("pool", E2, 1, 10, 4),),
        duration=2400,
        warmup=60,
    )


def test_the_ledger_sums_to_the_rows_cost_minus_the_bound_by_cause_and_by_node() -> None:
    scenario = pinned()
    alone = run(scenario, "autoscaler", 1)
    tuned = run(scenario, "tuner", 1, ledger=True)
    compared = comparison(scenario, 1, (alone, tuned))

    ledger = compared.ledger("tuner")

    left = tuned.cost - compared.lower_bound_cost
    assert left > 0.01  # the row leaves room: the ledger has something to split
    assert math.isclose(ledger.row_cost, tuned.cost)
    assert math.isclose(ledger.bound_cost, compared.lower_bound_cost)
    assert math.isclose(sum(ledger.by_cause.values()), left)
    assert math.isclose(sum(ledger.by_node.values()), left)
    assert math.isclose(sum(ledger.by_cause_node.values()), left)
    assert math.isclose(sum(ledger.hours.values()), scenario.duration / 3600)
    assert "acted: remove_nodes" in ledger.by_cause  # the tuner removed a node
    assert any(cause.startswith("window: ") for cause in ledger.by_cause)


def test_the_recorder_keeps_the_tuners_verdict_on_every_node_and_one_entry_a_tick() -> None:
    scenario = pinned()
    tuner = ProjectTuner(scenario, 1)
    sim = Simulation(scenario, 1, tuner)
    recorder = LedgerRecorder(sim, tuner)

    sim.advance(scenario.warmup + scenario.duration)

    assert recorder.trace.ticks == len(sim.series.time)
    assert recorder.trace.segments[0].cause.startswith("window: ")  # the first cycle's, at 0
    verdicts = set(recorder.verdicts.values())
    assert "pinned: StatefulSet pod" in verdicts  # the node holding the database
    assert verdicts - {"pinned: StatefulSet pod"} <= {CANDIDATE, FAILS_CHECK}
    for segment in recorder.trace.segments:  # every billed node, at its price
        assert sum(count for *_, count in segment.nodes) >= 3


def test_a_pinned_node_is_named_by_its_most_lasting_pin() -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    pods = [
        pod("db-0", "n0", kind="StatefulSet"),
        pod("dns-1", "n0", namespace="kube-system"),
        pod("dns-2", "n1", namespace="kube-system"),
        pod("web-1", "n1", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        pod("web-2", "n2"),
    ]
    seen = cluster(nodes, pods)
    movability = assess(seen, Policy())

    found = verdicts(seen, movability, frozenset({"n2"}), frozenset({"kube-system"}))

    assert found == {
        "n0": "pinned: StatefulSet pod",
        "n1": "pinned: kube-system pod",
        "n2": CANDIDATE,
        "n3": FAILS_CHECK,
    }


def test_recording_the_ledger_changes_no_decision() -> None:
    scenario = pinned()
    plain = run(scenario, "tuner", 1)
    recorded = run(scenario, "tuner", 1, ledger=True)

    assert plain.trace is None
    assert recorded.trace is not None
    assert recorded.series.cost == plain.series.cost
    assert recorded.decisions == plain.decisions
    assert run(scenario, "autoscaler", 1, ledger=True).trace is None  # tuners only


def test_the_nodes_beyond_the_bound_are_those_the_tuner_had_the_best_chance_to_remove() -> None:
    nodes = (
        ("a", 2.0, "pinned: StatefulSet pod", 2),
        ("a", 2.0, FAILS_CHECK, 1),
        ("a", 2.0, CANDIDATE, 1),
        ("a", 2.0, UNJUDGED, 1),
        ("b", 5.0, CANDIDATE, 1),
    )

    split = beyond_bound(nodes, {"a": 2, "b": 2, "c": 1}, {"a": 2.0, "b": 5.0, "c": 1.0})

    assert split == {
        ("a", CANDIDATE): 2.0,
        ("a", FAILS_CHECK): 2.0,
        ("a", UNJUDGED): 2.0,
        ("b", BEYOND): -5.0,
        ("c", BEYOND): -1.0,
    }
    row, bound = 5 * 2.0 + 5.0, 2 * 2.0 + 2 * 5.0 + 1.0
    assert math.isclose(sum(split.values()), row - bound)


def test_the_ticks_a_run_goes_on_past_the_end_count_whole_and_apart() -> None:
    trace = RoomTrace()
    for _ in range(3):
        trace.add(NO_CYCLE, (("a", 1.0, UNJUDGED, 2),))
    assert len(trace.segments) == 1 and trace.ticks == 3
    bound = [(1.0, (1,))] * 2  # CA alone's run ended a tick earlier
    pools = [("a", 1.0, "e2")]

    ledger = room_ledger("tuner", trace, [2.0] * 3, 2.0, bound, pools, 3600.0)

    assert ledger.by_cause == {NO_CYCLE: 2.0, PAST_END: 2.0}
    assert ledger.by_node == {("a", UNJUDGED): 4.0}
    assert math.isclose(ledger.uncaptured, 6.0 - 2.0)
    with pytest.raises(ValueError, match="3 ticks, the run 2, the bound 2"):
        room_ledger("tuner", trace, [2.0] * 2, 2.0, bound, pools, 3600.0)


def test_simulate_prints_the_ledger_of_each_tuner_row(capsys: pytest.CaptureFixture[str]) -> None:
    simulate("thesis-wide", ("tuner",), hours=0.25, ledger=True)

    out = capsys.readouterr().out
    assert "#### thesis-wide, tuner: " in out
    assert "| the tuner's last cycle | hours | room left | share |" in out


def written_ledger(scenario: str, left: float = 3.0) -> Ledger:
    """A ledger whose row leaves ``left`` of the 4.0 of room CA alone leaves (bound 6.0)."""
    return Ledger(
        scenario=scenario,
        strategy="tuner",
        currency="USD",
        ca_cost=10.0,
        row_cost=6.0 + left,
        bound_cost=6.0,
        by_cause={
            "removal refused: forecast": 0.6 * left,
            "window: unstable, decline not-falling": 0.3 * left,
            "acted: remove_nodes": 0.1 * left,
            "window: waiting": 0.0001,
        },
        hours={
            "removal refused: forecast": 12.7,
            "window: unstable, decline not-falling": 3.0,
            "acted: remove_nodes": 1.04,
            "window: waiting": 0.5,
        },
        by_node={
            ("a", FAILS_CHECK): 1.2 * left,
            ("a", "pinned: StatefulSet pod"): 0.05 * left,
            ("b", BEYOND): -0.25 * left,
        },
        by_cause_node={},
        pool_types={"a": "e2-standard-2", "b": "e2-standard-8"},
    )


def test_a_summary_row_gives_the_room_left_its_causes_and_the_nodes_carrying_it() -> None:
    row = summary_row(written_ledger("diurnal"))

    assert row == (
        "| diurnal | tuner | 3.00 of 4.00 USD (75 %) "
        "| `removal refused: forecast` 60 % (12.7 h); "
        "`window: unstable, decline not-falling` 30 % (3.0 h); `acted: remove_nodes` 10 % (1.0 h) "
        f"| a (e2-standard-2) `{FAILS_CHECK}` 3.60; b (e2-standard-8) `{BEYOND}` -0.750; "
        "a (e2-standard-2) `pinned: StatefulSet pod` 0.150 |"
    )
    assert row.count("|") == SUMMARY_HEADER[0].count("|")
    assert "|" + " |".join("---" for _ in range(5)).replace(" ", "") in SUMMARY_HEADER[1]


def test_a_row_that_leaves_no_room_names_no_cause_and_a_long_list_says_how_many_more() -> None:
    assert summary_row(written_ledger("thesis-wide", left=0.0)).endswith(
        "| 0 of 4.00 USD (0 %) | — | — |"
    )
    at_bound = replace(written_ledger("robot-shop", left=-0.0001), ca_cost=6.0)
    assert summary_row(at_bound).endswith("| 0 of 0 USD (CA alone is at the bound) | — | — |")
    assert summary_row(written_ledger("diurnal"), top=1).count("; 2 more") == 2


def test_the_summary_keeps_other_scenarios_rows_and_replaces_those_run_again() -> None:
    first = merged_summary("", [summary_row(written_ledger("a")), summary_row(written_ledger("b"))])
    assert first.splitlines()[:2] == list(SUMMARY_HEADER)

    again = merged_summary(
        first, [summary_row(written_ledger("b", 1.0)), summary_row(written_ledger("c"))]
    )

    rows = again.splitlines()[2:]
    assert [r.split("|")[1].strip() for r in rows] == ["a", "b", "c"]
    assert rows[0] == summary_row(written_ledger("a"))
    assert rows[1] == summary_row(written_ledger("b", 1.0))
    assert merged_summary("a hand-written table\n| x | y |", []) == "\n".join(SUMMARY_HEADER)


def test_simulate_fills_the_ledger_table_between_the_documents_markers(tmp_path: Path) -> None:
    doc = tmp_path / "evaluation.md"
    doc.write_text(f"# Prose\n\n{SUMMARY_BEGIN}\nold hand copy\n{SUMMARY_END}\n\nMore prose.\n")

    simulate("thesis-wide", ("tuner",), hours=0.25, ledger_doc=doc)

    text = doc.read_text()
    assert text.startswith(f"# Prose\n\n{SUMMARY_BEGIN}\n{SUMMARY_HEADER[0]}\n")
    assert "old hand copy" not in text
    assert "\n| thesis-wide | tuner | " in text
    assert text.endswith(f" |\n{SUMMARY_END}\n\nMore prose.\n")
    unmarked = tmp_path / "unmarked.md"
    unmarked.write_text("# Prose only\n")
    with pytest.raises(InputError, match="has no <!-- ledger:begin -->"):
        simulate("thesis-wide", ("tuner",), hours=0.25, ledger_doc=unmarked)
    assert unmarked.read_text() == "# Prose only\n"
