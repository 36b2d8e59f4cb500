"""A refused Kubernetes request is one line naming what was refused and what to check. (A unit
double of the API server's 403 body; tests/e2e/test_chart_install.py gets the real one.)"""

from __future__ import annotations

import json

from kubernetes.client.exceptions import ApiException

from tuner.execute.retry import describe
from tuner.monitor.kube import api_refusal

FORBIDDEN = {
    "kind": "Status",
    "status": "Failure",
    "reason": "Forbidden",
    "code": 403,
    "message": 'nodes is forbidden: User "system:serviceaccount:ops:nobody" cannot list '
    'resource "nodes" in API group "" at the cluster scope',
}


def refused(status: int, body: object) -> ApiException:
    err = ApiException(status=status, reason="Forbidden" if status == 403 else "Unauthorized")
    err.body = json.dumps(body).encode()
    return err


def test_a_403_names_the_user_verb_and_resource_and_hints_at_rbac() -> None:
    line = api_refusal(refused(403, FORBIDDEN))
    assert line.startswith("403 Forbidden: nodes is forbidden: User ")
    assert 'cannot list resource "nodes"' in line
    assert line.endswith(
        "; hint: the tuner's RBAC lacks this permission: its ServiceAccount needs the rules of "
        "charts/deployment-tuner or deploy/rbac.yaml (exactly what the tuner calls)"
    )
    assert describe(refused(403, FORBIDDEN)) == line  # an action's failure says the same


def test_a_401_hints_at_the_credentials_and_a_body_that_is_not_json_is_left_out() -> None:
    err = ApiException(status=401, reason="Unauthorized")
    err.body = b"<html>"
    assert api_refusal(err) == (
        "401 Unauthorized; hint: the API server refused the credentials (an expired token, "
        "or a kubeconfig for another cluster?)"
    )
    conflict = ApiException(status=409, reason="Conflict")
    assert api_refusal(conflict) == "409 Conflict"
