"""deploy/ on a real API server: every manifest is accepted, and the ServiceAccount may do exactly
what the code needs (checked by the API server's own RBAC authorizer)."""

from __future__ import annotations

from kubernetes import client

from testkit.cluster_fixture import ClusterHarness
from tests.e2e.harness import kubectl
from tests.unit.test_deploy import DEPLOY, NAMESPACE, SERVICE_ACCOUNT, needed

USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


def allowed(api: client.ApiClient, group: str, resource: str, verb: str, namespace: str) -> bool:
    resource, _, sub = resource.partition("/")
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=USER,
            groups=["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"],
            resource_attributes=client.V1ResourceAttributes(
                group=group,
                resource=resource,
                subresource=sub or None,
                verb=verb,
                namespace=namespace,
            ),
        )
    )
    answer = client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(answer.status.allowed)


def test_manifests_are_accepted_and_grant_exactly_what_the_code_needs(
    kube_harness: ClusterHarness,
) -> None:
    created = kubectl(kube_harness, "apply", "-f", str(DEPLOY / "namespace.yaml"))
    assert created.returncode == 0, created.stderr
    dry = kubectl(kube_harness, "apply", "--dry-run=server", "-k", str(DEPLOY))
    assert dry.returncode == 0, dry.stderr
    for name in ("serviceaccount.yaml", "rbac.yaml"):
        applied = kubectl(kube_harness, "apply", "-f", str(DEPLOY / name))
        assert applied.returncode == 0, applied.stderr
    with kube_harness.new_api() as api:
        cluster_wide = needed(own_namespace=False)
        own = needed(own_namespace=True)
        for group, resource, verb in cluster_wide:
            assert allowed(api, group, resource, verb, "shop"), (group, resource, verb)
        for group, resource, verb in own:
            assert allowed(api, group, resource, verb, NAMESPACE), (group, resource, verb)
            assert not allowed(api, group, resource, verb, "default"), (group, resource, verb)
        for group, resource, verb in (
            ("apps", "deployments", "delete"),
            ("apps", "deployments", "update"),
            ("", "pods", "delete"),
            ("", "pods", "create"),
            ("", "secrets", "get"),
            ("", "nodes", "update"),
            ("", "namespaces", "delete"),
        ):
            assert not allowed(api, group, resource, verb, "shop"), (group, resource, verb)
