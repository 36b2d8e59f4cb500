"""The plan says how each migrated or added pod is placed: steered by a node label (the workload
is onboarded) or by eviction alone; the pod templates come from the dump or the live cluster."""

from __future__ import annotations

import random
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from testkit.builders import cluster, node, pod
from tuner.analyse.decision import analyse
from tuner.execute.affinity import with_preference
from tuner.model.cluster import Workload
from tuner.model.conventions import workload_label
from tuner.model.onboarding import Placement, placement
from tuner.monitor.dump import cluster_from_objects
from tuner.report.build import PlanReport, build_report
from tuner.report.text import render_text
from tuner.settings import Analyse, Execute, Pricing, Settings

PREFIX = "tuner.dev"
WEB = Workload("default", "Deployment", "web")
API = Workload("default", "Deployment", "api")


def _template(kind: str, name: str, affinity: dict[str, Any] | None) -> dict[str, Any]:
    spec = {"containers": [{"name": "c"}], **({"affinity": affinity} if affinity else {})}
    return {
        "kind": kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"template": {"spec": spec}},
    }


def test_the_dump_carries_each_templates_preferred_node_labels() -> None:
    onboarded = with_preference(None, workload_label(PREFIX, "default", "web"))
    c = cluster_from_objects(
        [
            _template("Deployment", "web", onboarded),
            _template("Deployment", "api", None),
            _template("ReplicaSet", "bare", onboarded),
        ]
    )
    assert placement(c, WEB, PREFIX) is Placement.LABEL
    assert placement(c, API, PREFIX) is Placement.EVICTION_ONLY
    # the label names the workload: web's preference does not steer the bare ReplicaSet
    assert placement(c, Workload("default", "ReplicaSet", "bare"), PREFIX) is (
        Placement.EVICTION_ONLY
    )
    assert placement(c, WEB, "other.prefix") is Placement.EVICTION_ONLY
    assert placement(c, Workload("default", "Deployment", "absent"), PREFIX) is None


def _report(templates: dict[Workload, frozenset[str]]) -> PlanReport:
    settings = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=0),
        execute=Execute(label_prefix=PREFIX),
    )
    c = cluster(
        [node("a"), node("b")],
        [
            pod("db-0", "a", kind="StatefulSet"),  # never moved: node b is the one to go
            pod("web-1", "b", workload="web"),
            pod("api-1", "b", workload="api"),
        ],
    )
    c = replace(c, preferred_labels=MappingProxyType(templates))
    return build_report(c, settings, analyse(c, settings, [], random.Random(0)))


def test_plan_json_and_table_mark_what_is_not_onboarded() -> None:
    report = _report({WEB: frozenset({workload_label(PREFIX, "default", "web")}), API: frozenset()})

    placed = {
        a["workload"]: a["placement"] for a in report.to_json()["actions"] if a["op"] == "migrate"
    }
    *table, drain = render_text(report).splitlines()
    rows = {line.split()[2]: line for line in table[-3:]}

    assert placed == {
        str(WEB): "node label",
        str(API): "not controlled (not onboarded): lands where the scheduler puts it",
    }
    assert rows["default/api-1"].endswith(
        "not controlled (not onboarded): lands where the scheduler puts it"
    )
    assert "onboarded" not in rows["default/web-1"]
    assert drain.startswith("before action 1: b cordoned and tainted, so that no pod lands there")
    assert "onboarded" not in rows["b"]  # remove_node: nothing is placed


def test_without_the_pod_template_the_plan_claims_nothing() -> None:
    report = _report({})

    actions = report.to_json()["actions"]

    assert [a["op"] for a in actions] == ["migrate", "migrate", "remove_node"]
    assert not any("placement" in a for a in actions)
    assert "onboarded" not in render_text(report)
