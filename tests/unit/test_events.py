"""What the tuner's Kubernetes Events say: one per action carried out or failed, one per cycle,
each valid for events.k8s.io/v1 (the real API server accepts them: tests/cluster)."""

from __future__ import annotations

import random
import re

from testkit.builders import cluster, node, pod
from tuner.analyse.decision import analyse
from tuner.cycle import CycleReport, Outcome, TransitionResult
from tuner.daemon.cycle_events import REASONS, cycle_event
from tuner.execute.action_events import action_event, subject
from tuner.execute.events import Event, Ref
from tuner.execute.step import Done
from tuner.model.cluster import Workload
from tuner.model.resources import Resources
from tuner.plan.actions import Add, Migrate, RemoveNode
from tuner.report.build import build_report
from tuner.settings import Analyse, LeaderElectionSettings, Pricing, Settings

STAMP_NS = 1_700_000_000_000_000_000
LEASE = LeaderElectionSettings(namespace="tuner-system", name="deployment-tuner")


def test_an_event_about_a_node_goes_to_default_with_the_name_as_uid() -> None:
    event = Event(Ref.node("node-3"), "RemoveNode", "NodeRemoved", "deleted")

    body = event.body("tuner.dev/deployment-tuner", "tuner-0", STAMP_NS)

    assert event.namespace == "default"
    assert body["metadata"] == {"name": f"node-3.{STAMP_NS:x}", "namespace": "default"}
    assert body["regarding"] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "node-3",
        "uid": "node-3",
    }
    assert body["eventTime"] == "2023-11-14T22:13:20.000000Z"  # microseconds, always six digits
    assert body["type"] == "Normal"
    assert "related" not in body


def test_a_long_note_is_cut_to_the_apis_limit_in_bytes() -> None:
    event = Event(Ref("v1", "Pod", "p", "shop"), "Migrate", "Migrated", "é" * 1000)

    note = event.body("c/d", "i", STAMP_NS)["note"]

    assert len(note.encode()) <= 1024 and note == "é" * 512


def test_action_events_name_what_was_acted_on_and_where_it_landed() -> None:
    web = pod("web-1", "node-1", namespace="shop")
    migrate = Migrate(web, "node-2")
    regarding = subject(migrate)

    done = action_event(migrate, regarding, Done("pod web-2 is Ready on node-2", "node-2"))
    elsewhere = action_event(migrate, regarding, Done("pod web-3 is Ready on node-3", "node-3"))
    failed = action_event(migrate, regarding, "timed out")

    assert regarding == Ref("v1", "Pod", "web-1", "shop")
    assert (done.action, done.reason, done.warning) == ("Migrate", "Migrated", False)
    assert done.note == "migrate shop/web-1 node-1 -> node-2: pod web-2 is Ready on node-2"
    assert done.related == Ref.node("node-2")
    assert elsewhere.related == Ref.node("node-3")  # where it really landed, not the plan's
    assert (failed.reason, failed.warning) == ("MigrationFailed", True)
    assert failed.related == Ref.node("node-2")
    add = Add(Workload("shop", "Deployment", "web"), "node-2", Resources(100, 0))
    assert subject(add) == Ref("apps/v1", "Deployment", "web", "shop")
    assert action_event(add, subject(add), "x").reason == "AddFailed"
    assert action_event(RemoveNode("n"), Ref.node("n"), Done("x")).reason == "NodeRemoved"
    left = Done("left", reason="LeftForAutoscaler")
    assert action_event(RemoveNode("n"), Ref.node("n"), left).reason == "LeftForAutoscaler"


def _cycle(outcome: Outcome, result: TransitionResult | None = None) -> CycleReport:
    settings = Settings(
        pricing=Pricing(price_per_core=1.0, price_per_gb=0.0),
        analyse=Analyse(excluded_namespaces=frozenset(), candidate_delay_s=0),
    )
    c = cluster([node("a"), node("b")], [pod("w-1", "a"), pod("w-2", "b")])
    plan = build_report(c, settings, analyse(c, settings, [], random.Random(0)))
    return CycleReport(outcome, 0, 600, plan.analysis.reason, 600, plan=plan, result=result)


def test_a_cycle_event_names_the_decision_and_why_on_the_tuners_lease() -> None:
    acted = cycle_event(_cycle(Outcome.ACTED, TransitionResult((), True, "2 actions")), LEASE)
    failed = cycle_event(_cycle(Outcome.FAILED), LEASE)
    waiting = CycleReport(Outcome.WAITING, 0, 600, "a full window has not passed", 300)

    assert acted.regarding == Ref(
        "coordination.k8s.io/v1", "Lease", "deployment-tuner", "tuner-system"
    )
    assert (acted.reason, acted.warning) == ("RemovedNodes", False)
    assert re.fullmatch(r".+; 2 actions; cost 8\.0000 -> 4\.0000 USD/h", acted.note)
    assert (failed.reason, failed.warning) == ("TransitionFailed", True)
    assert cycle_event(waiting, LEASE).reason == "Waiting"
    assert cycle_event(waiting, LEASE).note == "a full window has not passed"
    assert cycle_event(_cycle(Outcome.STAYED), LEASE).reason == "Stayed"
    assert set(REASONS) == set(Outcome)  # every cycle has its Event
