"""The reserve where people and tools see it: the cycle log (text and JSON fields), the daemon's
metrics and ``tuner monitor`` (from those metrics in Prometheus; here a double of the monitor's
Prometheus port, ``tests/cluster/test_reserve.py`` runs the keeper for real)."""

from __future__ import annotations

import json
import logging

import pytest

from tuner.cycle import CycleReport, Outcome
from tuner.daemon.cycle_log import log_cycle
from tuner.daemon.logs import JsonFormatter
from tuner.daemon.metrics import Metrics
from tuner.model.reserve import Reserve, ReservedNode, ReserveOutcome
from tuner.model.resources import Resources
from tuner.monitor.command import daemon_reserve, reserve_lines
from tuner.monitor.prometheus import InstantResult, QueryError
from tuner.monitor.series import series

NODE = ReservedNode("small", Resources(1000, 1 << 30))
RESERVE = Reserve(0.0, 720.0, (NODE, NODE), "forecast peak 150 (upper band) against 100 now")


def _report(held: ReserveOutcome | None, reserve: Reserve = RESERVE) -> CycleReport:
    return CycleReport(Outcome.WAITING, 0, 600, "wait", 60, reserve=reserve, reserved=held)


def test_the_cycle_log_says_what_the_forecast_led_to(caplog: pytest.LogCaptureFixture) -> None:
    held = ReserveOutcome(created=("p-1",), removed=("p-0",), standing=2)
    with caplog.at_level(logging.INFO):
        log_cycle(_report(held), logging.getLogger("tuner.daemon"))
    (record,) = [r for r in caplog.records if r.getMessage().startswith("reserve:")]
    assert record.getMessage().startswith("reserve: 2 of small until ")
    assert "forecast peak 150" in record.getMessage()
    assert "placeholders created 1, removed 1, standing 2" in record.getMessage()
    fields = json.loads(JsonFormatter().format(record))
    assert fields["reserve_nodes"] == {"small": 2}
    assert fields["placeholders_created"] == ["p-1"]
    assert fields["placeholders_standing"] == 2
    caplog.clear()
    with caplog.at_level(logging.INFO):
        log_cycle(_report(ReserveOutcome(failed="API down")), logging.getLogger("tuner.daemon"))
    (failed,) = [r for r in caplog.records if r.getMessage().startswith("reserve:")]
    assert failed.levelno == logging.WARNING and "stopped: API down" in failed.getMessage()


def test_the_metrics_expose_the_reserve_and_its_placeholders() -> None:
    metrics = Metrics(stale_after_s=3600)
    metrics.observe(_report(ReserveOutcome(created=("a", "b"), standing=2)), 0.1)
    metrics.observe(_report(ReserveOutcome(removed=("a", "b")), Reserve(0.0, 0.0)), 0.1)
    value = metrics.registry.get_sample_value
    assert value("tuner_reserve_nodes", {"pool": "small"}) == 0  # asked before, not now
    assert value("tuner_reserve_placeholders") == 0
    assert value("tuner_reserve_placeholders_created_total") == 2
    assert value("tuner_reserve_placeholders_removed_total") == 2


class Answers:
    """The monitor's Prometheus port answering the reserve's queries."""

    def __init__(self, standing: bool = True) -> None:
        self.standing = standing

    def instant(self, query: str, at: float) -> InstantResult:
        if "by (pool)" in query:
            return (series({"pool": "small"}, (at, 2.0)),)
        if "tuner_reserve_placeholders)" in query:
            return (series({}, (at, 2.0)),) if self.standing else ()
        if "[600s]" not in query:
            raise QueryError(query, "unexpected window")
        return (series({}, (at, 3.0 if "created" in query else 1.0)),)

    def range(self, query: str, start: float, end: float, step: float) -> tuple[object, ...]:
        raise AssertionError("not asked")


def test_monitor_reads_the_daemons_reserve_from_prometheus() -> None:
    found = daemon_reserve(Answers(), 1000.0, 600.0)  # type: ignore[arg-type]
    assert found == {
        "over_s": 600.0,
        "nodes": {"small": 2},
        "standing": 2,
        "created": 3,
        "removed": 1,
    }
    assert reserve_lines(found) == [
        "reserve:  2 of small held ahead of the forecast; placeholders standing 2, created 3 "
        "and removed 1 over the last 600 s"
    ]
    missing = daemon_reserve(Answers(standing=False), 1000.0, 600.0)  # type: ignore[arg-type]
    assert isinstance(missing, str) and "is the daemon scraped" in missing
    assert reserve_lines(missing)[0].startswith("reserve:  unknown: no tuner_reserve_placeholders")
