"""Shadow mode: each cycle's entry in the account, the account summed over a period, the
daemon's log line and counter, and ``tuner report``."""

from __future__ import annotations

import json
import logging
import random
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from knowledge.embedded import EmbeddedKnowledgeBase
from knowledge.memory import MemoryKnowledge
from testkit.builders import cluster, node, pod
from tests.knowledge.test_shadow_account import cycle
from tests.unit.test_cycle import STABLE, Recorder, Script, settings
from tuner.cycle import CycleReport, CycleState, Outcome, Ports, run_cycle
from tuner.daemon.metrics import Metrics
from tuner.daemon.shadow import ShadowAccount
from tuner.holds import MemorySafeguards
from tuner.kb.report import render
from tuner.model.account import summary
from tuner.model.cluster import Cluster
from tuner.report.account import shadow_cycle

ROOT = Path(__file__).resolve().parents[2]


def test_a_cycle_saves_its_rate_until_the_next_cycle() -> None:
    assert cycle(0.0).saving == pytest.approx((1.25 - 0.75) * 600 / 3600)
    assert cycle(0.0, held="paused").saving == 0.0
    assert cycle(0.0, actions=()).saving == 0.0  # stayed
    assert cycle(0.0, cost_after=2.0).saving == 0.0  # never a negative saving


def test_the_account_counts_each_distinct_change_once() -> None:
    first = cycle(0.0)
    again = cycle(600.0, changed=False)  # the same plan, nothing changed: the same change
    moved = cycle(1200.0, changed=True)  # the same plan on a changed cluster: a new one
    held = cycle(1800.0, changed=False, held="outside maintenance window, next at ...")
    after_held = cycle(2400.0, changed=False)  # was held before: now it would act, anew
    other = cycle(3000.0, changed=False, plan="another", evictions=(("web", 3),))
    account = summary([first, again, moved, held, after_held, other], 0.0, 3600.0)
    assert (account.cycles, account.acting, account.held, account.plans) == (6, 5, 1, 4)
    assert account.saving == pytest.approx(5 * 0.5 * 600 / 3600)
    assert account.actions == (("migrate", 8), ("remove_node", 4))
    assert account.evictions == (("shop", 3), ("web", 6))
    assert account.evicted == 9
    assert (account.changed, account.compared) == (1, 5)
    assert account.currency == "EUR"
    assert summary([], 0.0, 1.0, "USD").to_json()["currency"] == "USD"


def test_the_report_as_text() -> None:
    text = render(summary([cycle(0.0), cycle(600.0, changed=True)], 0.0, 86400.0))
    assert text.splitlines() == [
        "shadow account from 1970-01-01 00:00 UTC to 1970-01-02 00:00 UTC",
        "cycles:            2 (2 would have acted, 0 held by a pause, a maintenance window or "
        "the eviction budget)",
        "would have saved:  0.1667 EUR (each change's saving per hour until the next cycle)",
        "changes:           2 (a plan repeated on an unchanged cluster counts once)",
        "actions:           migrate 4, remove_node 2",
        "evictions:         4 (shop 2, web 2)",
        "cluster changed:   1 of 1 cycles (under the previous cycle's plan)",
    ]
    assert render(summary([], 0.0, 1.0)).endswith("run tuner run --shadow first")


def spare_node() -> Cluster:
    return cluster(
        [node("a"), node("b"), node("c")],
        [pod("w-1", "a"), pod("w-2", "b"), pod("w-3", "c")],
    )


def shadow_report(c: Cluster, now: float, **analyse: object) -> CycleReport:
    ports = Ports(Script([STABLE]), Recorder(c), MemoryKnowledge(), MemorySafeguards())
    state = CycleState()
    report, _ = run_cycle(now, state, settings(**analyse), ports, random.Random(0), dry_run=True)
    return report


def test_a_shadow_cycle_is_what_the_dry_run_planned_and_whether_the_cluster_moved() -> None:
    report = shadow_report(spare_node(), 1000.0)
    assert report.outcome is Outcome.PLANNED
    first = shadow_cycle(report, None)
    assert first is not None and first.changed is None
    assert first.decision == "remove_nodes"
    assert first.interval_s == report.next_in == 600
    assert dict(first.actions) == {"migrate": 1, "remove_node": 1}
    assert first.evictions == (("default", 1),)
    assert first.saving == pytest.approx((first.cost_before - first.cost_after) / 6)
    same = shadow_cycle(shadow_report(spare_node(), 1600.0), first)
    assert same is not None and same.changed is False and same.repeats(first)
    grown = spare_node()
    grown = replace(grown, nodes=(*grown.nodes, node("d")))
    moved = shadow_cycle(shadow_report(grown, 2200.0), same)
    assert moved is not None and moved.changed is True
    waiting = replace(report, plan=None, cluster=None)
    assert shadow_cycle(waiting, first) is None


def test_the_daemon_logs_and_counts_each_cycles_saving_and_the_report_sums_the_logs(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    path = tmp_path / "kb.sqlite"
    metrics = Metrics(stale_after_s=60)
    with EmbeddedKnowledgeBase(path) as kb, caplog.at_level(logging.INFO, "tuner.daemon"):
        account = ShadowAccount(kb, metrics)
        start = time.time() - 3600
        for at in (start, start + 600, start + 1200):
            account.account(shadow_report(spare_node(), at))
        account.account(shadow_report(spare_node(), start + 1800, remove_nodes=False))  # stays
    logged = [float(m) for m in re.findall(r"shadow: would save (\d+\.\d+) USD", caplog.text)]
    assert len(logged) == 4 and logged[-1] == 0.0
    assert metrics.would_save._value.get() == pytest.approx(sum(logged))
    settings_file = tmp_path / "settings.json"
    settings_file.write_text(json.dumps({"knowledge": {"path": str(path)}}))
    done = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "report", "--settings", str(settings_file),
         "--since", "2h", "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout)
    assert report["saving"] == pytest.approx(sum(logged), abs=1e-5)
    assert (report["cycles"], report["acting_cycles"], report["plans"]) == (4, 3, 1)
    assert report["actions"] == {"migrate": 1, "remove_node": 1}
    assert report["evictions"] == 1
    assert (report["cluster_changed"], report["compared"]) == (0, 3)


def test_a_new_shadow_daemon_continues_the_account(tmp_path: Path) -> None:
    kb = MemoryKnowledge()
    ShadowAccount(kb, Metrics(60)).account(shadow_report(spare_node(), 1000.0))
    later = ShadowAccount(kb, Metrics(60)).account(shadow_report(spare_node(), 1600.0))
    assert later is not None and later.changed is False


def test_shadow_and_dry_run_are_two_modes_not_one() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tuner.cli", "run", "--settings", "x.json", "--dry-run", "--shadow"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "not allowed with argument --dry-run" in done.stderr
