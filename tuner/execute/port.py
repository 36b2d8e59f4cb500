"""The Kubernetes calls the executor makes, as a narrow port.

:class:`~tuner.execute.kube.Kube` implements it over the official client (retries, watches);
the unit tests' in-memory double (``testkit/fake_kube.py``) implements it too, so the
rollback and failure paths of the actions run without an API server. Objects are the
client's models (``V1Pod``, ``V1Node``...), typed ``Any`` as the client's own hints add nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from tuner.execute.marks import Patch
from tuner.execute.watch import Check, Verification
from tuner.model.conventions import Keys
from tuner.settings import Execute


class KubePort(Protocol):
    """Reads, writes and waits of the executor."""

    settings: Execute
    keys: Keys

    def stop_requested(self) -> bool:
        """True once a stop (SIGTERM) was requested: start no further action."""

    # reads
    def pod(self, namespace: str, name: str) -> Any | None:
        """The pod, or None when it is gone."""

    def node(self, name: str) -> Any | None:
        """The node, or None when it is gone."""

    def replica_set(self, namespace: str, name: str) -> Any | None:
        """The ReplicaSet, or None."""

    def deployment(self, namespace: str, name: str) -> Any | None:
        """The Deployment, or None."""

    def disruption_budgets(self, namespace: str) -> list[Any]:
        """The PodDisruptionBudgets of a namespace."""

    def pods(self, namespace: str, selector: str) -> list[Any]:
        """Pods of a namespace matching a label selector."""

    def pods_on(self, node: str) -> list[Any]:
        """Pods bound to a node."""

    def labelled_pods(self, selector: str) -> list[Any]:
        """Pods of every namespace matching a label selector."""

    def list_nodes(self, selector: str = "") -> list[Any]:
        """Every node, or those matching a label selector."""

    def priority_class(self, name: str) -> Any | None:
        """The PriorityClass, or None."""

    def hpa_scales(self, namespace: str, kind: str, name: str) -> str | None:
        """The name of an HPA scaling this workload, or None."""

    def hpa_utilisation(self, namespace: str, kind: str, name: str) -> float | None:
        """The highest utilisation (a share of requests) the HPA scaling this workload last
        measured, or None (no HPA, or nothing measured)."""

    def replicas(self, kind: str, namespace: str, name: str) -> int:
        """The desired replicas of a Deployment or ReplicaSet."""

    def serialize(self, obj: Any) -> dict[str, Any]:
        """A model object as its JSON dictionary."""

    def config_map(self, namespace: str, name: str) -> Any | None:
        """The ConfigMap, or None."""

    # writes
    def patch_node(self, name: str, build: Callable[[Any], Patch | None]) -> Any | None:
        """Read the node, build a patch from it, apply it; None when the node or patch is absent."""

    def patch_pod(
        self, namespace: str, name: str, build: Callable[[Any], Patch | None]
    ) -> Any | None:
        """Read the pod, build a patch from it, apply it; None when the pod or patch is absent."""

    def patch_deployment(
        self, namespace: str, name: str, build: Callable[[Any], Patch | None]
    ) -> Any | None:
        """Read the Deployment, build a patch from it, apply it; None when the Deployment or
        patch is absent."""

    def create_pod(self, namespace: str, body: Mapping[str, Any]) -> Any:
        """Create a pod."""

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete a pod at once (grace period 0; gone already is fine)."""

    def evict(self, pod: Any) -> None:
        """Evict a pod through the Eviction API (PodDisruptionBudgets apply)."""

    def scale(self, kind: str, namespace: str, name: str, expected: int, to: int) -> None:
        """Set replicas from ``expected`` to ``to``; fails when someone else scaled."""

    def delete_node(self, name: str) -> None:
        """Delete a Node object (gone already is fine)."""

    def put_config_map(self, namespace: str, body: Mapping[str, Any]) -> None:
        """Create the ConfigMap, or replace it when it exists."""

    def patch_config_map(self, namespace: str, name: str, patch: Patch) -> None:
        """Merge-patch a ConfigMap."""

    def delete_config_map(self, namespace: str, name: str) -> None:
        """Delete a ConfigMap (gone already is fine)."""

    # waits
    def wait_pods(
        self,
        namespace: str,
        selector: str,
        check: Check,
        what: str,
        *,
        rollback: bool = False,
        timeout_s: float | None = None,
    ) -> Verification:
        """Wait until ``check`` decides on the pods matching a selector, at most ``timeout_s``
        (default ``verify_timeout_s``); a ``rollback`` wait ignores the stop flag."""

    def wait_nodes(self, check: Check, what: str, timeout_s: float) -> Verification:
        """Wait until ``check`` decides on the nodes."""

    def wait_pods_on(self, node: str, check: Check, what: str) -> Verification:
        """Wait until ``check`` decides on the pods bound to a node."""

    def wait_node_gone(self, node: str, timeout_s: float) -> Verification:
        """Wait until the Node object is deleted."""
