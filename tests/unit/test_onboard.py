"""``tuner onboard``'s pure parts: the patch, the rollout check, the confirmation, the tuner's
own namespace; ``tests/cluster/test_onboard.py`` runs the command on a real control plane."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from kubernetes.client import ApiClient

from tuner.errors import InputError
from tuner.execute.affinity import with_preference
from tuner.execute.onboard import _confirmed, change, own_namespaces, rolled_out
from tuner.model.conventions import Keys
from tuner.settings import settings_from_dict

KEYS = Keys()
LABEL = KEYS.workload_label("shop", "web")
SERIALIZE = ApiClient().sanitize_for_serialization


def deployment(affinity: dict[str, Any] | None = None, **status: Any) -> Any:
    spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app"}]}
    if affinity:
        spec["affinity"] = affinity
    doc = {
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7", "generation": 2},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": spec},
        },
        "status": status,
    }
    return ApiClient().deserialize(json.dumps(doc), "V1Deployment", "application/json")


def test_the_patch_adds_the_preference_guarded_by_the_resource_version() -> None:
    found = change(deployment(), KEYS, remove=False, serialize=SERIALIZE)

    assert found is not None and found.key == "shop/web" and found.label == LABEL
    test, add, *annotation = found.patch
    assert test == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    assert add == {
        "op": "add",
        "path": "/spec/template/spec/affinity",
        "value": with_preference(None, LABEL),
    }
    assert annotation[-1]["path"] == "/metadata/annotations/tuner.dev~1onboarded"


def test_nothing_to_patch_when_already_onboarded_or_offboarded() -> None:
    onboarded = deployment(with_preference(None, LABEL))
    assert change(onboarded, KEYS, remove=False, serialize=SERIALIZE) is None
    assert change(deployment(), KEYS, remove=True, serialize=SERIALIZE) is None
    off = change(onboarded, KEYS, remove=True, serialize=SERIALIZE)
    assert off is not None and {"op": "remove", "path": "/spec/template/spec/affinity"} in off.patch


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (
            {"observedGeneration": 1, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 3},
            None,
        ),
        (
            {"observedGeneration": 2, "updatedReplicas": 2, "replicas": 3, "availableReplicas": 3},
            None,
        ),
        (
            {"observedGeneration": 2, "updatedReplicas": 3, "replicas": 4, "availableReplicas": 3},
            None,
        ),
        (
            {"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 2},
            None,
        ),
        (
            {"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 3},
            True,
        ),
        (
            {
                "observedGeneration": 2,
                "updatedReplicas": 1,
                "conditions": [
                    {
                        "type": "Progressing",
                        "status": "False",
                        "reason": "ProgressDeadlineExceeded",
                        "message": 'ReplicaSet "web-2" has timed out progressing.',
                    }
                ],
            },
            False,
        ),
    ],
)
def test_a_rollout_is_complete_only_as_kubectl_rollout_status_says(
    status: dict[str, Any], verdict: bool | None
) -> None:
    found = rolled_out(2)({"uid": deployment(**status)})
    assert (None if found is None else found.ok) is verdict
    if verdict is False:
        assert found is not None and "timed out progressing" in found.reason


def test_a_deleted_deployment_fails_the_rollout() -> None:
    found = rolled_out(2)({})
    assert found is not None and not found.ok


def test_all_asks_on_a_terminal_and_refuses_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert _confirmed("onboard", 3, yes=True)
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # a pipe: no terminal
    with pytest.raises(InputError, match=r"onboard --all: confirm the 3 Deployment\(s\) .* --yes"):
        _confirmed("onboard", 3, yes=False)
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    assert _confirmed("onboard", 3, yes=False)
    monkeypatch.setattr("sys.stdin", Terminal("\n"))
    assert not _confirmed("onboard", 3, yes=False)  # the default is no


def test_the_tuners_own_namespaces_come_from_its_settings() -> None:
    assert own_namespaces(settings_from_dict({})) == {"tuner-system"}
    settings = settings_from_dict(
        {
            "execute": {"journal_namespace": "platform"},
            "daemon": {"leader_election": {"namespace": "ops"}},
        }
    )
    assert own_namespaces(settings) == {"platform", "ops"}
