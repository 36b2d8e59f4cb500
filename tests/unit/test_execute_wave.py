"""A wave of migrations moving at once (``tuner.execute.actions.together``, the runner's waves,
each workload's allowance read fresh: ``tuner.execute.allowance``), over the in-memory double
(``testkit/fake_kube.py``); ``tests/cluster/test_wave.py`` runs it against a real control
plane."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from testkit import builders as b
from testkit.fake_kube import FakeKube
from tests.unit.test_execute_rollback import Events, marks_left
from tuner.cycle import TransitionResult
from tuner.execute.allowance import allowance
from tuner.execute.checks import new_pod_on
from tuner.execute.events import Event
from tuner.execute.retry import ActionFailed
from tuner.execute.runner import check_transition, run_transition
from tuner.model.cluster import Workload
from tuner.monitor.dump import current_utilisation
from tuner.plan.actions import Action, Migrate, RemoveNode
from tuner.settings import Execute

NS = "shop"
SOURCE, TARGET, OTHER = "node-1", "node-2", "node-3"


def kube(moves_at_once: int = 10) -> FakeKube:
    """Three nodes; the scheduler's favourite is the source (node-1)."""
    fake = FakeKube(
        Execute(eviction_retries=0, max_moves_at_once=moves_at_once, surge_lone_pods=False)
    )
    for name in (SOURCE, TARGET, OTHER):
        fake.add_node(name)
    fake.default_node = SOURCE
    return fake


def moves(fake: FakeKube, workload: str, target: str = TARGET) -> list[Action]:
    """Migrate every pod of ``workload`` on the source onto ``target``."""
    docs = sorted(fake.pod_docs.values(), key=lambda d: str(d["metadata"]["name"]))
    return [
        Migrate(b.pod(d["metadata"]["name"], SOURCE, namespace=NS, workload=workload), target)
        for d in docs
        if d["metadata"]["labels"]["app"] == workload and d["spec"]["nodeName"] == SOURCE
    ]


def run(fake: FakeKube, actions: list[Action]) -> tuple[TransitionResult, list[Event]]:
    events = Events()
    result = run_transition(fake, actions, events)  # type: ignore[arg-type]
    return result, events.recorded  # type: ignore[return-value]


def evicted_before_awaited(fake: FakeKube) -> int:
    """How many evictions came before the first read of a workload's pods after the first
    eviction (the first wait for a replacement)."""
    calls = fake.calls
    first = next(i for i, (call, _) in enumerate(calls) if call == "evict")
    waited = next((i for i in range(first, len(calls)) if calls[i][0] == "pods"), len(calls))
    return sum(call == "evict" for call, _ in calls[:waited])


def test_a_wave_of_two_workloads_evicts_both_before_awaiting_either() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    fake.add_deployment(NS, "api", [SOURCE])
    plan = [*moves(fake, "api"), *moves(fake, "web"), RemoveNode(SOURCE)]

    result, events = run(fake, plan)

    assert result.completed, result.reason
    assert evicted_before_awaited(fake) == 2
    assert [e.reason for e in events if e.action == "Migrate"] == ["Migrated", "Migrated"]
    assert all(d["spec"]["nodeName"] == TARGET for d in fake.pod_docs.values())
    assert [m for m in marks_left(fake) if not m.startswith(SOURCE)] == []  # node-1 handed over


def test_one_move_at_a_time_awaits_each_replacement_before_the_next_eviction() -> None:
    """``max_moves_at_once: 1``: the executor as it was (what the wave test above fails
    against)."""
    fake = kube(moves_at_once=1)
    fake.add_deployment(NS, "web", [SOURCE])
    fake.add_deployment(NS, "api", [SOURCE])

    result, _ = run(fake, [*moves(fake, "api"), *moves(fake, "web")])

    assert result.completed, result.reason
    assert evicted_before_awaited(fake) == 1


def test_a_failed_member_stops_the_transition_after_the_others_finished_marks_undone() -> None:
    """``api`` tolerates every taint and the scheduler's favourite is its source: its
    replacement goes back there and fails; ``web`` (onboarded, steered to node-2) was evicted
    in the same wave and is awaited and verified before the transition stops."""
    fake = kube()
    fake.add_deployment(NS, "api", [SOURCE], onboarded=False, tolerates_all=True)
    fake.add_deployment(NS, "web", [SOURCE])
    plan = [*moves(fake, "api"), *moves(fake, "web"), RemoveNode(SOURCE)]

    result, events = run(fake, plan)

    assert not result.completed
    assert result.reason.startswith("action 1/3 (") and "its source" in result.reason
    assert result.done == (plan[1],)
    reasons = [(e.reason, e.regarding.name[:3]) for e in events if e.action == "Migrate"]
    assert reasons == [("MigrationFailed", "api"), ("Migrated", "web")]
    web = [d for d in fake.pod_docs.values() if d["metadata"]["labels"]["app"] == "web"]
    assert [d["spec"]["nodeName"] for d in web] == [TARGET]
    assert marks_left(fake) == []  # the label, both cordons and the drain's taint undone
    assert SOURCE in fake.nodes


def test_a_failed_eviction_starts_no_later_member_and_awaits_the_earlier() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    fake.add_deployment(NS, "api", [SOURCE])
    fake.add_deployment(NS, "db", [SOURCE])
    plan = [*moves(fake, "web"), *moves(fake, "api"), *moves(fake, "db")]
    refused = plan[1]
    assert isinstance(refused, Migrate)
    real_evict = fake.evict

    def evict(pod: Any) -> None:
        if pod.metadata.name == refused.pod.name:
            fake.calls.append(("evict", pod.metadata.name))
            raise RuntimeError("connection reset")
        real_evict(pod)

    fake.evict = evict  # type: ignore[method-assign]

    result, events = run(fake, plan)

    assert not result.completed and result.done == (plan[0],)
    assert "action 2/3" in result.reason and "RuntimeError: connection reset" in result.reason
    assert [call for call, _ in fake.mutations()].count("evict") == 2  # db never evicted
    assert evicted_before_awaited(fake) == 2  # web's replacement awaited after api's refusal
    assert [e.reason for e in events if e.action == "Migrate"] == ["Migrated", "MigrationFailed"]
    assert marks_left(fake) == []


def test_every_wait_of_a_wave_ends_within_one_verification_timeout(monkeypatch: Any) -> None:
    """The replacements start together, so the wave's waits share one deadline: a first
    workload that used up ``verify_timeout_s`` leaves the next one only what is left, not a
    timeout of its own (ten workloads failing one after the other took ten timeouts)."""
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    fake.add_deployment(NS, "api", [SOURCE])
    clock = [1000.0]
    monkeypatch.setattr("tuner.execute.actions.monotonic", lambda: clock[0])
    given: list[float | None] = []
    real_wait = fake.wait_pods

    def wait_pods(*args: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        given.append(timeout_s)
        clock[0] += 150.0  # each wait takes 150 s of the 180
        return real_wait(*args, timeout_s=timeout_s, **kwargs)

    fake.wait_pods = wait_pods  # type: ignore[method-assign]

    result, _ = run(fake, [*moves(fake, "api"), *moves(fake, "web")])

    assert result.completed, result.reason
    assert given == [180.0, 30.0]


def test_a_member_refused_by_its_check_fails_the_wave_before_anything_starts() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    fake.add_deployment(NS, "api", [SOURCE])
    plan = [*moves(fake, "web"), *moves(fake, "api", OTHER)]
    fake.nodes[OTHER]["spec"]["unschedulable"] = True  # the second's destination closed now

    result, _ = run(fake, plan)

    assert not result.completed and result.reason.startswith("action 2/2 (")
    assert "is cordoned" in result.reason
    assert not [call for call in fake.mutations() if call[0] in ("evict", "patch_node")]


def test_two_pods_of_one_workload_need_two_new_pods() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE, SOURCE], strategy=rolling(2))

    result, events = run(fake, moves(fake, "web"))

    assert result.completed, result.reason
    assert evicted_before_awaited(fake) == 2
    notes = [e.note for e in events if e.reason == "Migrated"]
    assert len(notes) == 2 and len({n.split("pod ")[-1] for n in notes}) == 2  # one each
    assert [d["spec"]["nodeName"] for d in fake.pod_docs.values()] == [TARGET, TARGET]


def test_the_count_of_new_pods_is_awaited_one_gone_before_ready_counting_as_done() -> None:
    check = new_pod_on(frozenset({"old-1", "old-2"}), {"n1": "its source"}, count=2)
    assert check({"a": new_pod("a", "n2", ready=True)}) is None  # one of two: wait
    assert check({"a": new_pod("a", "n2", ready=True), "b": new_pod("b", "n3", False)}) is None
    verdict = check({"a": new_pod("a", "n2", ready=True)})  # b went before it was Ready
    assert verdict is not None and verdict.ok
    assert verdict.ready_on == (("a", "n2"),) and "went before it was Ready" in verdict.reason
    both = new_pod_on(frozenset(), {"n1": "its source"}, count=2)(
        {"a": new_pod("a", "n2", ready=True), "b": new_pod("b", "n3", ready=True)}
    )
    assert both is not None and both.ok and both.ready_on == (("a", "n2"), ("b", "n3"))


def test_allowance_is_the_rollouts_max_unavailable_within_the_budgets() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [OTHER] * 8)  # the default: 25 % of 8
    fake.add_deployment(NS, "half", [OTHER] * 4, strategy=rolling("50%"))
    fake.add_deployment(NS, "three", [OTHER] * 4, strategy=rolling(3))
    fake.add_deployment(NS, "again", [OTHER] * 4, strategy={"type": "Recreate"})
    fake.add_deployment(NS, "small", [OTHER] * 2)  # 25 % of 2 rounds down to 0: at least 1
    fake.add_budget(NS, "three", 1)
    fake.add_budget(NS, "half", 0)  # none now: still one (the eviction's 429 is retried)
    of = allowance(fake)

    got = {name: of(Workload(NS, "Deployment", name)) for name in ("web", "half", "three")}
    got |= {name: of(Workload(NS, "Deployment", name)) for name in ("again", "small")}

    assert got == {"web": 2, "half": 1, "three": 1, "again": 1, "small": 1}
    assert of(Workload(NS, "ReplicaSet", "bare")) == 1
    of(Workload(NS, "Deployment", "web"))
    assert fake.calls.count(("deployment", f"{NS}/web")) == 1  # read once per wave


def test_a_busy_workload_spares_only_what_its_other_pods_can_stand_in_for() -> None:
    """At 90 % of its requests (its HPA's last measurement) none of eight pods is spare: one at
    a time; at 50 % the rollout's two may go; no HPA measurement leaves the rollout's."""
    fake = kube()
    for name in ("busy", "idle", "unmeasured"):
        fake.add_deployment(NS, name, [OTHER] * 8, strategy=rolling(4))
    fake.utilisations[(NS, "Deployment", "busy")] = 0.9
    fake.utilisations[(NS, "Deployment", "idle")] = 0.5
    of = allowance(fake)

    got = {name: of(Workload(NS, "Deployment", name)) for name in ("busy", "idle", "unmeasured")}

    assert got == {"busy": 1, "idle": 4, "unmeasured": 4}


def test_the_utilisation_is_the_highest_its_hpa_status_measured() -> None:
    """``status.currentMetrics`` as the API serves it (what ``Kube.hpa_utilisation`` reads; a
    real HPA's is read in ``tests/cluster/test_replay.py``)."""
    cpu = {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 73}}}
    memory = {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "1"}}}
    assert current_utilisation([cpu, memory]) == 0.73
    assert current_utilisation([memory]) is None
    assert current_utilisation(None) is None


def test_an_allowance_that_cannot_be_read_moves_the_workload_one_pod_at_a_time() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE] * 4, strategy=rolling(4))

    def unreadable(namespace: str) -> list[Any]:
        raise ActionFailed("list PodDisruptionBudgets: 403 Forbidden")

    fake.disruption_budgets = unreadable  # type: ignore[method-assign]

    assert allowance(fake)(Workload(NS, "Deployment", "web")) == 1
    result, _ = run(fake, moves(fake, "web"))
    assert result.completed and evicted_before_awaited(fake) == 1


def test_a_budget_bounds_the_wave_of_a_workload() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE] * 3, strategy=rolling(3))
    fake.add_budget(NS, "web", 2)

    result, _ = run(fake, moves(fake, "web"))

    assert result.completed, result.reason
    assert evicted_before_awaited(fake) == 2


def test_the_dry_run_says_which_actions_would_move_at_once() -> None:
    fake = kube()
    fake.add_deployment(NS, "web", [SOURCE])
    fake.add_deployment(NS, "api", [SOURCE])
    lines: list[str] = []

    result = check_transition(fake, [*moves(fake, "web"), *moves(fake, "api")], lines.append)

    assert result.completed
    assert lines[0].startswith("dry run: actions 1-2 would move at once (a wave: ")
    assert lines[1].startswith("dry run: action 1/2 (migrate shop/web-")
    assert lines[2].startswith("dry run: action 2/2 (migrate shop/api-") and len(lines) == 3
    assert not fake.mutations()


def rolling(max_unavailable: int | str) -> dict[str, Any]:
    """A RollingUpdate strategy."""
    return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}}


def new_pod(name: str, node: str, ready: bool) -> SimpleNamespace:
    condition = SimpleNamespace(type="Ready", status="True" if ready else "False")
    return SimpleNamespace(
        metadata=SimpleNamespace(uid=name, name=name, deletion_timestamp=None),
        spec=SimpleNamespace(node_name=node),
        status=SimpleNamespace(conditions=[condition], phase="Running"),
    )
