"""Scenario files through the real CLI: every invalid file ends with one stderr line naming the
field (and value), exit 2, before anything is simulated or written; a valid file runs."""

from __future__ import annotations

import copy
import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tuner.cli import main
from tuner.errors import InputError
from tuner.model.constraints import HOSTNAME_KEY
from tuner.sim.engine import Scenario
from tuner.sim.history import served
from tuner.sim.karpenter_disruption import WHEN_EMPTY, KarpenterConfig
from tuner.sim.load import TRACES, TraceReplay, trace_series
from tuner.sim.prices import NODE_TYPES
from tuner.sim.scenario_file import PATTERNS, build
from tuner.sim.scenario_rules import APPLICATIONS
from tuner.sim.scenario_schema import schema
from tuner.sim.scenarios import scenario

VALID: dict[str, Any] = {
    "name": "mine",
    "hours": 0.25,
    "seed": 4,
    "system": "eks",
    "expander": "least-waste",
    "pools": [
        {"name": "general", "node_type": "m5.large", "min": 1, "max": 6, "initial": 2},
        {"name": "memory", "node_type": "r5.xlarge", "max": 3},
    ],
    "applications": [{"app": "php-apache", "pattern": "narrow-peaks"}],
    "services": [
        {
            "name": "search",
            "namespace": "logs",
            "kind": "StatefulSet",
            "cpu": "1",
            "memory": "2Gi",
            "replicas": 3,
            "pdb_max_unavailable": 1,
            "source": "elastic/elasticsearch chart: resources.requests",
        },
        {
            "name": "api",
            "namespace": "shop",
            "cpu": "250m",
            "memory": "256Mi",
            "hpa": {"min": 1, "max": 5, "target": 0.5},
            "cpu_per_load": 10,
        },
    ],
    "loads": {"shop": {"trace": "capital-bikeshare", "first_day": 2, "peak": 20}},
}


def with_change(path: str, value: Any) -> dict[str, Any]:
    """VALID with one field (dotted path, list indices as numbers) set, or removed (...)."""
    doc = copy.deepcopy(VALID)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    target: Any = doc
    for part in parents:
        target = target[part]
    if value is ...:
        del target[last]
    else:
        target[last] = value
    return doc


def run_file(
    tmp_path: Path, doc: Any, raw: str | None = None, out: str = "out"
) -> tuple[int, Path]:
    """``tuner simulate`` on the document (or raw text); (exit status, the output path)."""
    scenario = tmp_path / "scenario.json"
    scenario.write_text(raw if raw is not None else json.dumps(doc))
    output = tmp_path / out
    return main(["simulate", "--scenario", str(scenario), "--output", str(output)]), output


INVALID = [
    ("unknown top-level key", with_change("colour", "red"), "unknown key 'colour'"),
    ("unknown pool key", with_change("pools.0.size", 3), "pools[0]: unknown key 'size'"),
    ("negative pool max", with_change("pools.0.max", -1), "pools[0].max: -1"),
    ("fractional copies", with_change("applications.0.copies", 1.5), "copies: 1.5"),
    ("huge copies", with_change("applications.0.copies", 1e9), "copies: 1000000000.0"),
    ("negative hours", with_change("hours", -3), "hours: -3"),
    ("zero hours", with_change("hours", 0), "hours: 0"),
    ("huge hours", with_change("hours", 1e6), "hours: 1000000.0"),
    ("negative peak", with_change("loads.shop.peak", -5), "loads.shop.peak: -5"),
    ("unknown node type", with_change("pools.1.node_type", "m9.huge"), "'m9.huge'"),
    ("unknown application", with_change("applications.0.app", "wordpress"), "'wordpress'"),
    ("unknown trace", with_change("loads.shop.trace", "netflix"), "'netflix'"),
    ("initial above max", with_change("pools.0.initial", 7), "pools[0].initial: 7"),
    ("min above max", with_change("pools.0.min", 9), "pools[0].min: 9"),
    ("name is a path", with_change("name", "../escape"), "name: '../escape'"),
    ("name is absolute", with_change("name", "/tmp/x"), "name: '/tmp/x'"),
    ("hidden name", with_change("name", ".hidden"), "name: '.hidden'"),
    ("no pools", with_change("pools", []), "pools: []"),
    ("missing pools", with_change("pools", ...), "'pools' is a required property"),
    ("bad cpu quantity", with_change("services.1.cpu", "lots"), "services[1].cpu: 'lots'"),
    ("negative cpu", with_change("services.1.cpu", -1), "services[1].cpu: -1"),
    ("cpu beyond any node", with_change("services.1.cpu", "900"), "services[1].cpu: '900'"),
    ("hpa min above max", with_change("services.1.hpa.min", 9), "services[1].hpa.min: 9"),
    ("two loads for one namespace", with_change("loads.shop.pattern", "wide-peaks"), "loads.shop"),
    ("load of no namespace", with_change("loads.ghost", {"constant": 3}), "loads.ghost"),
    ("trace too short", with_change("loads.shop.first_day", 28), "loads.shop.first_day: 28"),
    ("duplicate pool", with_change("pools.1.name", "general"), "pools[1].name: 'general'"),
    ("boolean seed", with_change("seed", True), "seed: True"),
    (
        "DaemonSets fill the node",
        {
            **VALID,
            "services": [
                {**VALID["services"][0], "kind": "DaemonSet", "cpu": "2"},
                VALID["services"][1],
            ],
        },
        "pools[0].node_type: 'm5.large'",
    ),
    ("top level is a list", [VALID], "(top level): "),
    # issue 28: quantities beyond 4,096 cores or 64 TiB name their field
    ("cpu beyond 4,096 cores", with_change("services.1.cpu", "5000"), "services[1].cpu: quantity"),
    ("memory beyond 64 TiB", with_change("services.1.memory", "100Ti"), "services[1].memory: "),
    ("copies written as a float", with_change("applications.0.copies", 2.0), "copies: 2.0"),
    ("replicas written as a float", with_change("services.0.replicas", 3.0), "replicas: 3.0"),
    ("pool max written as a float", with_change("pools.0.max", 6.0), "pools[0].max: 6.0"),
    ("hours too short to record", with_change("hours", 1e-300), "hours: 1e-300"),
    # issue 28: a pod no pool's node holds beside its DaemonSets is refused, naming the field
    ("cpu no node has", with_change("services.1.cpu", "7"), "services[1].cpu: pod shop/api"),
    ("memory no node has", with_change("services.1.memory", "40Gi"), "services[1].memory: pod"),
    # issue 27: an HPA cannot compute utilisation of a 0-CPU request
    ("HPA on no CPU request", with_change("services.1.cpu", "0"), "services[1].hpa: an HPA on"),
    ("HPA on a 0 CPU number", with_change("services.1.cpu", 0), "cpu is 0 (the HPA controller"),
    (
        "unknown consolidation policy",
        with_change("karpenter", {"consolidation_policy": "Never"}),
        "karpenter.consolidation_policy: 'Never'",
    ),
    (
        "negative consolidateAfter",
        with_change("karpenter", {"consolidate_after_s": -1}),
        "karpenter.consolidate_after_s: -1",
    ),
]


@pytest.mark.parametrize(("case", "doc", "field"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_file_is_one_line_naming_the_field_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, doc: Any, field: str
) -> None:
    code, out = run_file(tmp_path, doc)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, case
    assert len(lines) == 1, lines
    assert field in lines[0], lines[0]
    assert captured.out == ""
    assert not out.exists()


@pytest.mark.parametrize(
    ("case", "raw", "field"),
    [
        ("NaN peak", json.dumps(VALID).replace('"peak": 20', '"peak": NaN'), "loads.shop.peak"),
        (
            "Infinity hours",
            json.dumps(VALID).replace('"hours": 0.25', '"hours": Infinity'),
            "hours",
        ),
        ("overflowing number", json.dumps(VALID).replace('"peak": 20', '"peak": 1e999'), "peak"),
        ("not JSON", "{", "not JSON"),
        ("deep nesting", "[" * 100_000 + "]" * 100_000, "scenario"),
        (
            "nesting the reader takes",
            '{"name": "x", "pools": ' + "[" * 950 + "]" * 950 + "}",
            "scenario",
        ),
    ],
)
def test_non_finite_numbers_and_broken_json_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, raw: str, field: str
) -> None:
    code, out = run_file(tmp_path, None, raw)
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2, case
    assert len(lines) == 1, lines
    assert field in lines[0]
    assert not out.exists()


def test_an_integer_of_5001_digits_names_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = json.dumps(VALID).replace('"hours": 0.25', '"hours": ' + "1" * 5001)
    code, out = run_file(tmp_path, None, raw)
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert line.endswith("hours: an integer of 5,001 digits is out of range"), line
    assert not out.exists()


def test_an_over_long_value_is_shortened_and_the_reason_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out = run_file(tmp_path, with_change("services.0.source", "s" * 5000))
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert "services[0].source: 'sss" in line
    assert line.endswith("... is too long)"), line
    assert len(line) < 400


def test_the_trace_rule_is_what_the_replay_reads_with_hours_overriding_the_file() -> None:
    # capital-bikeshare: 672 hourly samples, the last at 671 h; day 27 starts at 648 h
    doc = with_change("loads.shop.first_day", 27)
    assert build(doc, hours=23) is not None  # reads samples 648..671
    with pytest.raises(InputError, match=r"loads\.shop\.first_day: 27 leaves 0\.96 days .*"):
        build(doc, hours=23.5)
    with pytest.raises(InputError) as refused:
        build(doc, hours=30)
    assert str(refused.value) == (
        "loads.shop.first_day: 27 leaves 0.96 days of trace capital-bikeshare (27.96 days), "
        "less than the 1.25 days of 30 simulated hours (--hours)"
    )
    # a week-long file replays day 22 for 24 hours, though not for its own 168
    week = {**with_change("loads.shop.first_day", 22), "hours": 168}
    with pytest.raises(InputError, match=r"first_day: 22 .* of 168 simulated hours$"):
        build(week)
    assert build(week, hours=24).duration == 24 * 3600
    # alibaba2018 (2,243 five-minute samples): day 5 holds a day, day 7 does not
    alibaba = {**with_change("loads.shop.trace", "alibaba2018"), "hours": 24}
    assert build({**alibaba, "loads": {"shop": {**alibaba["loads"]["shop"], "first_day": 5}}})
    with pytest.raises(
        InputError,
        match=re.escape(
            "loads.shop.first_day: 7 leaves 0.78 days of trace alibaba2018 (7.78 days)"
        ),
    ):
        build({**alibaba, "loads": {"shop": {**alibaba["loads"]["shop"], "first_day": 7}}})


def test_a_replay_reads_exactly_the_samples_the_rule_counts() -> None:
    series = trace_series("capital-bikeshare")
    replay = TraceReplay.of("capital-bikeshare", 648, 23 * 3600, 100.0)
    assert replay.samples == series[648:]
    assert replay(23 * 3600) == pytest.approx(100.0 * series[-1] / max(series[648:]))


def test_copies_past_the_trace_wrap_around_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    def app(first_day: int, copies: int) -> dict[str, Any]:
        entry = {"app": "php-apache", "copies": copies, "trace": "alibaba2018", "peak": 30}
        return {**VALID, "hours": 24, "applications": [{**entry, "first_day": first_day}]}

    def days(built: Scenario) -> list[tuple[float, ...]]:
        replays = [built.loads[f"php-apache-{i}"] for i in (1, 2, 3)]
        return [r.samples[:1] for r in replays if isinstance(r, TraceReplay)]

    series = trace_series("alibaba2018")
    with caplog.at_level(logging.WARNING, logger="tuner.sim.scenario_file"):
        assert days(build(app(4, 3))) == [series[d * 288 : d * 288 + 1] for d in (4, 5, 6)]
        assert not caplog.records  # the days 4, 0, 1 were a day too strict
        assert days(build(app(6, 3))) == [series[d * 288 : d * 288 + 1] for d in (6, 0, 1)]
    (record,) = caplog.records
    assert record.getMessage().startswith(
        "applications[0].copies: trace alibaba2018 holds 7 days to start a 24-hour replay on; "
        "copies 2 to 3 wrap around to day 0"
    )


def test_output_naming_an_existing_file_is_refused_before_simulating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "taken").write_text("keep me")
    code, taken = run_file(tmp_path, VALID, out="taken")
    assert code == 2
    captured = capsys.readouterr()
    assert "--output" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert captured.out == ""
    assert taken.read_text() == "keep me"


def test_valid_file_runs_every_strategy_with_its_seed_and_writes_only_into_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run_file(tmp_path, VALID)
    assert code == 0
    text = capsys.readouterr().out
    assert "### mine: mine (0.25 h, seed 4)" in text
    assert "| CA alone |" in text
    assert "| lower bound |" in text
    assert sorted(p.name for p in out.iterdir()) == ["mine.png", "results.json", "results.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "scenario.json"]


def test_the_file_builds_pools_pdbs_daemonsets_and_loads() -> None:
    built = build(VALID)
    assert [p.name for p in built.pools] == ["general", "memory"]
    assert built.pools[0].initial_nodes == 2
    assert built.autoscaler.expander == "least-waste"
    assert built.seed == 4
    search = next(s for s in built.services if s.name == "search")
    assert (search.cpu, search.memory, search.pdb_max_unavailable) == (1000, 2 * 2**30, 1)
    assert {"shop", "php-apache-1"} <= set(built.loads)
    assert any(s.name == "coredns" for s in built.services)  # EKS system pods
    assert not any(s.name == "coredns" for s in build({**VALID, "system_pods": False}).services)


def test_the_karpenter_key_sets_the_node_pools_disruption_and_defaults_to_karpenters() -> None:
    assert build(VALID).karpenter == KarpenterConfig()
    when_empty = {"consolidation_policy": "WhenEmpty", "consolidate_after_s": 60}
    built = build({**VALID, "karpenter": when_empty})
    assert (built.karpenter.consolidation_policy, built.karpenter.consolidate_after) == (
        WHEN_EMPTY,
        60.0,
    )
    assert built.compressed(4).karpenter == built.karpenter  # a controller's clock


def test_the_schema_lists_exactly_what_the_simulator_knows() -> None:
    defs = schema()["$defs"]
    assert defs["pool"]["properties"]["node_type"]["enum"] == list(NODE_TYPES)
    assert defs["application"]["properties"]["app"]["enum"] == list(APPLICATIONS)
    assert defs["trace"]["enum"] == list(TRACES)
    assert defs["pattern"]["enum"] == list(PATTERNS)


def test_the_real_cluster_scenarios_have_their_pools_traces_and_budgets() -> None:
    het = scenario("heterogeneous")
    assert [(p.name, p.node_type.name, p.zone) for p in het.pools] == [
        ("general-4-a", "e2-standard-4", "a"),
        ("general-4-b", "e2-standard-4", "b"),
        ("general-8-c", "e2-standard-8", "c"),
        ("highmem-4-c", "e2-highmem-4", "c"),
    ]
    assert het.autoscaler.expander == "least-waste"
    assert any("elastic/elasticsearch" in s for s in het.sources)
    es = next(s for s in het.services if s.name == "elasticsearch")
    assert (es.cpu, es.memory, es.replicas, es.pdb_max_unavailable) == (1000, 2 * 2**30, 3, 1)
    assert es.anti_affinity == HOSTNAME_KEY  # the chart's antiAffinity: hard
    spread = {s.namespace for s in het.services if s.spread}
    assert spread == {
        *(f"online-boutique-{i}" for i in (1, 2, 3)),
        "social-network-1",
        "social-network-2",
    }
    week = scenario("diurnal-week")
    assert week.duration == 7 * 86400
    assert week.system == "eks"
    shop = week.loads["sock-shop-1"]
    weekday = max(shop(h * 3600.0) for h in range(24))  # Monday (Columbus Day, 2018-10-15)
    night = min(shop(h * 3600.0) for h in range(24))
    assert night < 0.1 * weekday
    morning = [shop((day * 24 + 8) * 3600.0) for day in range(7)]  # 08:00: the commute
    assert max(morning[5:]) < 0.5 * min(morning[1:5])  # the weekend has none
    # Two weeks of the trace before the run are the tuner's history (a real Prometheus's).
    assert not np.isnan(served(week, np.array([-14 * 86400.0 + 1, -1.0]))).any()
    assert scenario("large").pools[0].max_nodes >= 100


@pytest.mark.parametrize(
    ("path", "text", "field"),
    [
        ("name", "shop\n", "name: 'shop\\n' has a control character"),
        ("pools.0.name", "general\n", "pools[0].name: 'general\\n' has a control"),
        ("title", "Shop \x1b[2J", "title: 'Shop \\x1b[2J' has a control character"),
        ("services.0.source", "chart\u2028values", "services[0].source: "),
    ],
)
def test_text_with_a_control_character_is_refused(path: str, text: str, field: str) -> None:
    with pytest.raises(InputError) as refused:
        build(with_change(path, text))
    assert str(refused.value).startswith(field), str(refused.value)
    with pytest.raises(InputError, match=r"^loads: key 'sh\\nop' has a control character$"):
        build({**VALID, "loads": {"sh\nop": {"constant": 1}}})


HELD_OUT = sorted((Path(__file__).parents[2] / "bench/scenarios/heldout").glob("*.json"))


@pytest.mark.parametrize("path", HELD_OUT, ids=[p.stem for p in HELD_OUT])
def test_every_held_out_file_builds_with_history_before_its_first_day(path: Path) -> None:
    doc = json.loads(path.read_text())
    built = build(doc)
    assert built.name == doc["name"] and built.name.startswith("heldout-")
    assert all(app.get("first_day", 0) >= 1 for app in doc["applications"])


def test_there_are_held_out_files() -> None:
    assert len(HELD_OUT) >= 3
