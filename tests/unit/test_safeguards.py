"""The daemon's eviction ledger and pause switch over the executor's Kubernetes port (the
in-memory double of ``testkit/fake_kube.py``; tests/e2e/test_limits.py runs the same on the
real API server)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testkit.fake_kube import FakeKube
from tuner.daemon.safeguards import ClusterSafeguards
from tuner.errors import ServiceError
from tuner.execute.retry import ActionFailed
from tuner.model.limits import DAY_S, Limits, Spent
from tuner.settings import Execute

NAMESPACE = "tuner-system"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def guards(kube: FakeKube, clock: Clock) -> ClusterSafeguards:
    return ClusterSafeguards(kube, Limits(pause_config_map="deployment-tuner"), clock)


@pytest.fixture
def kube() -> FakeKube:
    return FakeKube(Execute(journal_namespace=NAMESPACE, eviction_retries=0))


def ledger_entries(kube: FakeKube) -> list[dict[str, Any]]:
    doc = kube.config_maps[(NAMESPACE, "tuner-dev-evictions")]
    entries: list[dict[str, Any]] = json.loads(doc["data"]["evictions"])
    return entries


def test_a_transition_is_written_before_and_replaced_by_what_ran(
    kube: FakeKube,
) -> None:
    clock = Clock()
    ledger = guards(kube, clock)
    assert ledger.spent() == ()
    ledger.begin({"shop": 3, "web": 1})
    assert ledger_entries(kube) == [{"at": clock.now, "namespaces": {"shop": 3, "web": 1}}]
    clock.now += 120
    ledger.end({"shop": 2})
    assert ledger.spent() == (Spent(clock.now, (("shop", 2),)),)
    clock.now += DAY_S - 1
    assert [s.total for s in ledger.spent()] == [2]  # still within the day
    clock.now += 1
    ledger.begin({"web": 1})  # a day old at the next write: dropped
    assert ledger_entries(kube) == [{"at": clock.now, "namespaces": {"web": 1}}]


def test_an_unreadable_ledger_is_an_error_never_a_silent_reset(kube: FakeKube) -> None:
    body = {"metadata": {"name": "tuner-dev-evictions"}, "data": {"evictions": '[{"at": 1}'}}
    kube.put_config_map(NAMESPACE, body)
    with pytest.raises(ServiceError, match="delete the ConfigMap to reset the count"):
        guards(kube, Clock()).spent()


@pytest.mark.parametrize(
    ("annotations", "paused"),
    [
        (None, False),  # no ConfigMap
        ({}, False),
        ({"tuner.dev/paused": "false"}, False),
        ({"tuner.dev/paused": "FALSE "}, False),
        ({"tuner.dev/paused": "true"}, True),
        ({"tuner.dev/paused": "yes, until the release"}, True),
        ({"tuner.dev/paused": ""}, True),
        ({"other.dev/paused": "true"}, False),
    ],
)
def test_the_pause_annotation(
    kube: FakeKube, annotations: dict[str, str] | None, paused: bool
) -> None:
    if annotations is not None:
        meta = {"name": "deployment-tuner", "annotations": annotations}
        kube.put_config_map(NAMESPACE, {"metadata": meta, "data": {}})
    why = guards(kube, Clock()).paused()
    assert (why is not None) == paused
    if why is not None:
        assert why.endswith(f"on ConfigMap {NAMESPACE}/deployment-tuner")


def test_an_api_failure_is_a_service_error(kube: FakeKube, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> None:
        raise ActionFailed("read configmap: Forbidden")

    monkeypatch.setattr(kube, "config_map", refuse)
    monkeypatch.setattr(kube, "put_config_map", refuse)
    safeguards = guards(kube, Clock())
    for call in (safeguards.paused, safeguards.spent, lambda: safeguards.begin({"a": 1})):
        with pytest.raises(ServiceError, match="Forbidden"):
            call()
