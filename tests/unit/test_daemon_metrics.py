"""The daemon's /metrics and /healthz, read over real HTTP."""

from __future__ import annotations

import json
import logging
import random
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace

import pytest

from testkit.builders import cluster, node, pod
from tuner.analyse.decision import analyse
from tuner.cycle import CycleReport, Outcome, TransitionResult
from tuner.daemon.logs import JsonFormatter
from tuner.daemon.metrics import Metrics
from tuner.model.load import Load
from tuner.report.build import build_report
from tuner.settings import Analyse, Pricing, Settings


@pytest.fixture
def served() -> Iterator[tuple[Metrics, str]]:
    metrics = Metrics(stale_after_s=3600)
    server = metrics.serve(0, "127.0.0.1")
    yield metrics, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _acted_report() -> CycleReport:
    s = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset()),
    )
    c = cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])
    plan = build_report(c, s, analyse(c, s, [], random.Random(0)))
    result = TransitionResult(plan.actions[:1], False, "wrong node", plan.actions[:1])
    return CycleReport(
        Outcome.FAILED,
        0,
        600,
        "x",
        600,
        load=Load.scalar(100.0),
        plan=plan,
        result=result,
        recorded="id",
    )


def test_cycles_actions_and_costs_are_exported(served: tuple[Metrics, str]) -> None:
    metrics, url = served
    metrics.observe(_acted_report(), 2.5)
    status, text = _get(url + "/metrics")
    assert status == 200
    assert 'tuner_cycles_total{outcome="failed"} 1.0' in text
    assert 'tuner_actions_total{op="migrate",result="verified"} 1.0' in text
    assert 'tuner_eviction_only_actions_total{op="migrate"} 1.0' in text  # not onboarded
    assert 'tuner_actions_total{op="remove_node",result="failed"} 1.0' in text
    assert 'tuner_cost_per_hour{when="before"} 8.0' in text
    assert 'tuner_cost_per_hour{when="after"} 4.0' in text
    assert "tuner_cycle_duration_seconds_count 1.0" in text


def test_a_migration_that_landed_elsewhere_is_counted(served: tuple[Metrics, str]) -> None:
    metrics, url = served
    report = _acted_report()
    assert report.result is not None
    first = report.result.done
    result = replace(report.result, eviction_only=(), landed_elsewhere=((first[0], "c"),))
    metrics.observe(replace(report, result=result), 1.0)
    _, text = _get(url + "/metrics")
    assert 'tuner_actions_total{op="migrate",result="verified"} 1.0' in text
    assert 'tuner_landed_elsewhere_actions_total{op="migrate"} 1.0' in text
    assert 'tuner_eviction_only_actions_total{op="migrate"}' not in text


def test_healthz_turns_503_when_cycles_stop(served: tuple[Metrics, str]) -> None:
    metrics, url = served
    assert _get(url + "/healthz") == (200, "ok\n")
    metrics.stale_after_s = 0
    assert _get(url + "/healthz")[0] == 503
    assert _get(url + "/nope")[0] == 404


def test_json_log_lines_carry_extra_fields() -> None:
    record = logging.makeLogRecord(
        {
            "name": "tuner",
            "levelname": "INFO",
            "msg": "cycle %s",
            "args": ("done",),
            "outcome": "acted",
        }
    )
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "cycle done"
    assert entry["outcome"] == "acted"
    assert entry["level"] == "INFO"


def test_a_verified_transition_adds_its_saving_until_the_next_cycle_and_a_pause_shows(
    served: tuple[Metrics, str],
) -> None:
    metrics, url = served
    failed = _acted_report()
    metrics.observe(failed, 1.0)  # a failed transition saves nothing
    acted = replace(failed, outcome=Outcome.ACTED, next_in=1800.0)
    metrics.observe(acted, 1.0)
    metrics.observe(replace(acted, outcome=Outcome.HELD, paused="paused by annotation"), 1.0)
    text = _get(url + "/metrics")[1]
    analysis = acted.plan.analysis  # type: ignore[union-attr]
    saved = (analysis.cost_current - analysis.cost_after) * 0.5
    assert saved > 0
    assert f"tuner_saved_usd_total {saved}" in text
    assert "tuner_would_save_usd_total 0.0" in text
    assert "tuner_paused 1.0" in text
    metrics.observe(replace(acted, outcome=Outcome.ERROR), 1.0)  # an error does not know
    assert "tuner_paused 1.0" in _get(url + "/metrics")[1]
    metrics.observe(replace(acted, outcome=Outcome.STAYED), 1.0)
    assert "tuner_paused 0.0" in _get(url + "/metrics")[1]
