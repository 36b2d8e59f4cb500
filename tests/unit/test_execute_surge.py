"""Surge moves (``tuner.execute.surge``, ``tuner.plan.rollout``): the lone pod of a one-replica
Deployment moved by restarting its rollout, over the in-memory double (``testkit/fake_kube.py``,
whose rollout starts the new pod first and deletes the old one once the new one is Ready);
``tests/cluster/test_surge.py`` runs it against a real control plane."""

from __future__ import annotations

import json

import pytest

from testkit import builders as b
from testkit.fake_kube import FakeKube
from tests.unit.test_execute_rollback import Events, marks_left
from tuner.execute.actions import check
from tuner.execute.journal import Journal
from tuner.execute.recover import recover
from tuner.execute.runner import run_transition
from tuner.execute.surge import Restart, SurgeMove
from tuner.plan.actions import Migrate
from tuner.plan.rollout import fenceposts, surges_first
from tuner.settings import Execute

NS = "shop"
SOURCE, TARGET = "node-1", "node-2"


def kube(*, surge: bool = True) -> FakeKube:
    fake = FakeKube(Execute(eviction_retries=0, surge_lone_pods=surge))
    for name in (SOURCE, TARGET):
        fake.add_node(name)
    fake.default_node = SOURCE
    return fake


def move(fake: FakeKube, workload: str = "web") -> Migrate:
    (doc,) = [
        d
        for d in fake.pod_docs.values()
        if d["metadata"]["labels"]["app"] == workload and d["spec"]["nodeName"] == SOURCE
    ][:1]
    return Migrate(b.pod(doc["metadata"]["name"], SOURCE, namespace=NS, workload=workload), TARGET)


def moved_at(fake: FakeKube, workload: str = "web") -> str | None:
    meta = fake.deployments[(NS, workload)]["spec"]["template"]["metadata"]
    value = (meta.get("annotations") or {}).get(fake.keys.moved_at)
    return None if value is None else str(value)


@pytest.mark.parametrize(
    ("surge", "unavailable", "replicas", "posts"),
    [
        (None, None, 1, (1, 0)),  # the defaults, 25 % each: up and down
        (None, None, 4, (1, 1)),
        (None, None, 10, (3, 2)),
        (0, 0, 3, (0, 1)),  # both 0: one unavailable
        ("50%", 0, 1, (1, 0)),
        ("0%", "100%", 1, (0, 1)),
        ("x%", 0, 1, None),
        ("1", 0, 1, None),  # a string must be a percentage
    ],
)
def test_the_rollout_fenceposts_are_resolved_as_the_deployment_controller_does(
    surge: int | str | None, unavailable: int | str | None, replicas: int, posts: object
) -> None:
    assert fenceposts(surge, unavailable, replicas) == posts


def test_only_a_lone_pod_of_a_rollout_that_surges_and_keeps_it_served_surges_first() -> None:
    assert surges_first(None, None, None, 1, False)
    assert surges_first("RollingUpdate", 1, 0, 1, False)
    assert not surges_first(None, None, None, 2, False)  # several pods: evicted
    assert not surges_first("Recreate", None, None, 1, False)
    assert not surges_first(None, None, None, 1, True)  # paused
    assert not surges_first(None, 1, 1, 1, False)  # the old pod may go first
    assert not surges_first(None, 0, None, 1, False)  # no surge: one unavailable


def test_a_lone_pod_moves_by_a_restart_its_new_pod_first_and_nothing_is_evicted() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    (old,) = fake.pod_docs

    result = run_transition(fake, [move(fake)], Events())  # type: ignore[arg-type]

    assert result.completed, result.reason
    assert not [c for c in fake.calls if c[0] == "evict"]
    assert moved_at(fake) is not None
    (doc,) = fake.pod_docs.values()
    assert doc["spec"]["nodeName"] == TARGET and (NS, doc["metadata"]["name"]) != old
    assert marks_left(fake) == []
    assert fake.config_maps == {}  # the journal, its restart record included, is gone


def test_with_surge_moves_off_the_lone_pod_is_evicted_and_its_template_untouched() -> None:
    fake = kube(surge=False)
    fake.add_deployment(NS, "web", [SOURCE])

    result = run_transition(fake, [move(fake)], Events())  # type: ignore[arg-type]

    assert result.completed, result.reason
    assert [c[0] for c in fake.calls if c[0] in ("evict", "patch_deployment")] == ["evict"]
    assert moved_at(fake) is None


@pytest.mark.parametrize(
    ("on", "strategy"),
    [
        ([SOURCE, TARGET], None),  # two replicas
        ([SOURCE], {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
        ([SOURCE], {"type": "Recreate"}),
    ],
)
def test_a_pod_whose_rollout_would_not_start_its_new_pod_first_is_evicted(
    on: list[str], strategy: dict[str, object] | None
) -> None:
    fake = kube()
    fake.add_deployment(NS, "web", on, strategy=strategy)

    step = check(fake, move(fake))  # type: ignore[arg-type]

    assert not isinstance(step, SurgeMove)
    assert "evict pod" in step.would()


def test_a_deployment_in_the_middle_of_a_rollout_is_not_restarted_again() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    fake.deployments[(NS, "web")]["metadata"]["generation"] = 2  # not observed yet

    assert not isinstance(check(fake, move(fake)), SurgeMove)  # type: ignore[arg-type]


def test_the_dry_run_says_it_restarts_the_rollout() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])

    said = check(fake, move(fake)).would()  # type: ignore[arg-type]

    assert f"restart the rollout of Deployment {NS}/web" in said
    assert f"cordon and taint node {SOURCE}" in said
    assert fake.mutations() == []


def test_a_budget_that_allows_no_disruption_refuses_the_move_as_it_would_the_eviction() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    fake.add_budget(NS, "web", 0)

    result = run_transition(fake, [move(fake)], Events())  # type: ignore[arg-type]

    assert not result.completed
    assert "allows no disruption" in result.reason
    assert moved_at(fake) is None
    assert [d["spec"]["nodeName"] for d in fake.pod_docs.values()] == [SOURCE]


def test_a_new_pod_never_ready_fails_the_move_and_the_restart_is_set_back() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    (old,) = fake.pod_docs
    fake.ready = False

    result = run_transition(fake, [move(fake)], Events())  # type: ignore[arg-type]

    assert not result.completed
    assert "set back" in result.reason
    assert moved_at(fake) is None
    assert list(fake.pod_docs) == [old]  # the new pod gone, the old one never went
    assert marks_left(fake) == []


def _interrupted(fake: FakeKube, after: str) -> None:
    """A journal left by a run that died after a surge move's restart."""
    journal = Journal(fake)  # type: ignore[arg-type]
    journal.begin([move(fake)])
    restart = Restart(NS, "web", fake.keys.moved_at, None, after)
    journal.restarting(restart.record())
    fake.deployments[(NS, "web")]["spec"]["template"]["metadata"]["annotations"] = {
        fake.keys.moved_at: after
    }


def test_recovery_sets_back_a_restart_whose_rollout_did_not_complete() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    _interrupted(fake, "2026-12-07T12:00:00Z")
    fake.deployments[(NS, "web")]["status"]["updatedReplicas"] = 0

    said = recover(fake)  # type: ignore[arg-type]

    assert moved_at(fake) is None
    assert any("set back" in line for line in said), said
    assert fake.config_maps == {}


def test_recovery_leaves_a_restart_whose_rollout_completed() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    _interrupted(fake, "2026-12-07T12:00:00Z")

    said = recover(fake)  # type: ignore[arg-type]

    assert moved_at(fake) == "2026-12-07T12:00:00Z"
    assert any("left as it is: its rollout completed" in line for line in said), said


def test_recovery_leaves_a_restart_someone_changed_since_and_says_so() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    _interrupted(fake, "2026-12-07T12:00:00Z")
    template = fake.deployments[(NS, "web")]["spec"]["template"]
    template["metadata"]["annotations"] = {fake.keys.moved_at: "2026-12-07T12:05:00Z"}
    fake.deployments[(NS, "web")]["status"]["updatedReplicas"] = 0

    said = recover(fake)  # type: ignore[arg-type]

    assert moved_at(fake) == "2026-12-07T12:05:00Z"
    assert any("left as it is: someone changed" in line for line in said), said


def test_recovery_says_an_unreadable_restart_record_and_changes_nothing() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    journal = Journal(fake)  # type: ignore[arg-type]
    journal.begin([move(fake)])
    journal._patch({"restarted": json.dumps({"namespace": NS})})

    said = recover(fake)  # type: ignore[arg-type]

    assert any("unreadable" in line for line in said), said
    assert not [c for c in fake.calls if c[0] == "patch_deployment"]


def _wave(fake: FakeKube) -> list[Migrate]:
    """web (two replicas: one pod evicted) and then api (one: a surge), both off the source."""
    fake.add_deployment(NS, "web", [SOURCE, TARGET])
    fake.add_deployment(NS, "api", [SOURCE])
    return [move(fake, "web"), move(fake, "api")]


def test_a_surge_member_of_a_wave_is_moved_after_the_evictions_were_awaited() -> None:
    fake = kube()
    plan = _wave(fake)

    result = run_transition(fake, plan, Events())  # type: ignore[arg-type]

    assert result.completed, result.reason
    calls = [c[0] for c in fake.calls if c[0] in ("evict", "patch_deployment")]
    assert calls == ["evict", "patch_deployment"]
    assert moved_at(fake, "api") is not None and moved_at(fake, "web") is None


def test_a_surge_member_after_a_failed_eviction_is_not_started() -> None:
    fake = kube()
    plan = _wave(fake)
    fake.refuse_evictions = True

    result = run_transition(fake, plan, Events())  # type: ignore[arg-type]

    assert not result.completed and "refused" in result.reason
    assert not [c for c in fake.calls if c[0] == "patch_deployment"]
    assert marks_left(fake) == []


def test_a_surge_member_that_fails_in_a_wave_fails_the_transition_without_raising() -> None:
    fake = kube()
    plan = _wave(fake)
    fake.room[TARGET] = 2  # web's pod and its replacement fill it: api's new pod fits nowhere

    result = run_transition(fake, plan, Events())  # type: ignore[arg-type]

    assert not result.completed and "set back" in result.reason
    assert result.done == (plan[0],)  # web's move, verified, stays done
    assert moved_at(fake, "api") is None
    assert marks_left(fake) == []
