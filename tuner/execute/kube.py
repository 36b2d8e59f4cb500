"""The thin adapter between the actions and the Kubernetes API (official client).

Every call retries transient errors (:mod:`tuner.execute.retry`); every write is a merge
patch built by :mod:`tuner.execute.marks` from a fresh read, so a retry after a conflict
re-reads first. Every mutating request the executor makes goes through this class, except
its Kubernetes Events (:mod:`tuner.execute.events`: best effort, never retried).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes import client
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from tuner.execute.marks import Patch
from tuner.execute.retry import ActionFailed, Retry, describe
from tuner.execute.watch import Check, Verification, wait_until
from tuner.model.conventions import Keys
from tuner.monitor.dump import current_utilisation
from tuner.settings import Execute

MERGE_PATCH = "application/merge-patch+json"
MAX_EVICTION_DELAY_S = 60.0


class Kube:
    """Reads and writes of the executor, with retries and a stop flag."""

    def __init__(self, api: ApiClient, settings: Execute, stop: threading.Event) -> None:
        self.settings = settings
        self.keys = Keys(settings.label_prefix)
        self.retry = Retry(settings.api_retry_s, stop)
        self.rollback_retry = Retry(settings.api_retry_s)
        """For the waits of a rollback: it finishes after a stop request too (each wait is
        bounded by ``verify_timeout_s``)."""
        # The client's partial type hints (Optional everywhere) add nothing here: Any.
        self.core: Any = client.CoreV1Api(api)
        self.apps: Any = client.AppsV1Api(api)
        self.autoscaling: Any = client.AutoscalingV2Api(api)
        self.scheduling: Any = client.SchedulingV1Api(api)
        self.policy: Any = client.PolicyV1Api(api)

    def stop_requested(self) -> bool:
        """True once a stop (SIGTERM) was requested."""
        return self.retry.stop.is_set()

    # ------------------------------------------------------------------ reads --
    def get_or_none(self, what: str, fn: Callable[[], Any]) -> Any | None:
        """``fn()``, or None on 404."""

        def attempt() -> Any | None:
            try:
                return fn()
            except ApiException as err:
                if err.status == 404:
                    return None
                raise

        return self.retry.call(what, attempt)

    def pod(self, namespace: str, name: str) -> Any | None:
        """The pod, or None when it is gone."""
        return self.get_or_none(
            f"read pod {namespace}/{name}", lambda: self.core.read_namespaced_pod(name, namespace)
        )

    def node(self, name: str) -> Any | None:
        """The node, or None when it is gone."""
        return self.get_or_none(f"read node {name}", lambda: self.core.read_node(name))

    def replica_set(self, namespace: str, name: str) -> Any | None:
        """The ReplicaSet, or None."""
        return self.get_or_none(
            f"read replicaset {namespace}/{name}",
            lambda: self.apps.read_namespaced_replica_set(name, namespace),
        )

    def deployment(self, namespace: str, name: str) -> Any | None:
        """The Deployment, or None."""
        return self.get_or_none(
            f"read deployment {namespace}/{name}",
            lambda: self.apps.read_namespaced_deployment(name, namespace),
        )

    def disruption_budgets(self, namespace: str) -> list[Any]:
        """The PodDisruptionBudgets of a namespace."""
        listing = self.retry.call(
            f"list PodDisruptionBudgets in {namespace}",
            lambda: self.policy.list_namespaced_pod_disruption_budget(namespace),
        )
        return list(listing.items)

    def pods(self, namespace: str, selector: str) -> list[Any]:
        """Pods of a namespace matching a label selector."""
        listing = self.retry.call(
            f"list pods in {namespace}",
            lambda: self.core.list_namespaced_pod(namespace, label_selector=selector),
        )
        return list(listing.items)

    def pods_on(self, node: str) -> list[Any]:
        """Pods bound to a node."""
        listing = self.retry.call(
            f"list pods on {node}",
            lambda: self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}"),
        )
        return list(listing.items)

    def labelled_pods(self, selector: str) -> list[Any]:
        """Pods of every namespace matching a label selector."""
        listing = self.retry.call(
            f"list pods {selector}",
            lambda: self.core.list_pod_for_all_namespaces(label_selector=selector),
        )
        return list(listing.items)

    def list_nodes(self, selector: str = "") -> list[Any]:
        """Every node, or those matching a label selector."""
        if not selector:
            return list(self.retry.call("list nodes", self.core.list_node).items)
        listing = self.retry.call(
            f"list nodes {selector}", lambda: self.core.list_node(label_selector=selector)
        )
        return list(listing.items)

    def priority_class(self, name: str) -> Any | None:
        """The PriorityClass, or None."""
        return self.get_or_none(
            f"read priorityclass {name}", lambda: self.scheduling.read_priority_class(name)
        )

    def hpa_scales(self, namespace: str, kind: str, name: str) -> str | None:
        """The name of an HPA scaling this workload, or None."""
        hpa = self._hpa_of(namespace, kind, name)
        return None if hpa is None else str(hpa.metadata.name)

    def hpa_utilisation(self, namespace: str, kind: str, name: str) -> float | None:
        """The highest utilisation (a share of requests) the HPA scaling this workload last
        measured, or None (no HPA, or nothing measured)."""
        hpa = self._hpa_of(namespace, kind, name)
        if hpa is None:
            return None
        status = self.serialize(hpa).get("status") or {}
        return current_utilisation(status.get("currentMetrics"))

    def _hpa_of(self, namespace: str, kind: str, name: str) -> Any | None:
        listing = self.retry.call(
            f"list HPAs in {namespace}",
            lambda: self.autoscaling.list_namespaced_horizontal_pod_autoscaler(namespace),
        )
        for hpa in listing.items:
            ref = hpa.spec.scale_target_ref
            if ref.kind == kind and ref.name == name:
                return hpa
        return None

    def serialize(self, obj: Any) -> dict[str, Any]:
        """A model object as its JSON dictionary."""
        serialized: dict[str, Any] = self.core.api_client.sanitize_for_serialization(obj)
        return serialized

    def config_map(self, namespace: str, name: str) -> Any | None:
        """The ConfigMap, or None."""
        return self.get_or_none(
            f"read configmap {namespace}/{name}",
            lambda: self.core.read_namespaced_config_map(name, namespace),
        )

    # ----------------------------------------------------------------- writes --
    def put_config_map(self, namespace: str, body: Mapping[str, Any]) -> None:
        """Create the ConfigMap, or replace it when it exists."""
        name = body["metadata"]["name"]

        def write() -> None:
            try:
                self.core.create_namespaced_config_map(namespace, body)
            except ApiException as err:
                if err.status != 409:
                    raise
                self.core.replace_namespaced_config_map(name, namespace, body)

        self.retry.call(f"write configmap {namespace}/{name}", write)

    def patch_config_map(self, namespace: str, name: str, patch: Patch) -> None:
        """Merge-patch a ConfigMap."""
        self.retry.call(
            f"update configmap {namespace}/{name}",
            lambda: self.core.patch_namespaced_config_map(
                name, namespace, patch, _content_type=MERGE_PATCH
            ),
        )

    def delete_config_map(self, namespace: str, name: str) -> None:
        """Delete a ConfigMap (gone already is fine)."""
        self.get_or_none(
            f"delete configmap {namespace}/{name}",
            lambda: self.core.delete_namespaced_config_map(name, namespace),
        )

    def patch_node(self, name: str, build: Callable[[Any], Patch | None]) -> Any | None:
        """Read the node, build a patch from it, apply it; None when the node or patch is absent."""
        core = self.core
        return self._patched(f"node {name}", core.read_node, core.patch_node, (name,), build)

    def patch_pod(
        self, namespace: str, name: str, build: Callable[[Any], Patch | None]
    ) -> Any | None:
        """Read the pod, build a patch from it, apply it; None when the pod or patch is absent."""
        read, write = self.core.read_namespaced_pod, self.core.patch_namespaced_pod
        return self._patched(f"pod {namespace}/{name}", read, write, (name, namespace), build)

    def patch_deployment(
        self, namespace: str, name: str, build: Callable[[Any], Patch | None]
    ) -> Any | None:
        """Read the Deployment, build a patch from it, apply it; None when the Deployment or
        patch is absent."""
        read, write = self.apps.read_namespaced_deployment, self.apps.patch_namespaced_deployment
        return self._patched(
            f"deployment {namespace}/{name}", read, write, (name, namespace), build
        )

    def _patched(
        self,
        what: str,
        read: Callable[..., Any],
        write: Callable[..., Any],
        names: tuple[str, ...],
        build: Callable[[Any], Patch | None],
    ) -> Any | None:
        """Read an object (the client's ``read(*names)``), build a merge patch from it and
        apply it (``write``), retried; None when it is gone (404) or there is nothing to patch."""

        def attempt() -> Any | None:
            try:
                patch = build(read(*names))
                return None if patch is None else write(*names, patch, _content_type=MERGE_PATCH)
            except ApiException as err:
                if err.status == 404:
                    return None
                raise

        return self.retry.call(f"patch {what}", attempt)

    def create_pod(self, namespace: str, body: Mapping[str, Any]) -> Any:
        """Create a pod (an earlier attempt whose answer was lost counts: 409 reads it)."""
        name = body["metadata"]["name"]

        def create() -> Any:
            try:
                return self.core.create_namespaced_pod(namespace, body)
            except ApiException as err:
                if err.status != 409:
                    raise
                return self.core.read_namespaced_pod(name, namespace)

        return self.retry.call(f"create pod {namespace}/{name}", create)

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete a pod at once (grace period 0; gone already is fine); retried after a stop
        request too, as it undoes a change."""
        self.rollback_retry.call(
            f"delete pod {namespace}/{name}",
            lambda: self._missing_ok(
                lambda: self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            ),
        )

    @staticmethod
    def _missing_ok(fn: Callable[[], Any]) -> None:
        try:
            fn()
        except ApiException as err:
            if err.status != 404:
                raise

    def evict(self, pod: Any) -> None:
        """Evict a pod through the Eviction API; a PDB's 429 is retried with backoff up to
        ``eviction_retries`` times, then the action fails. A pod already gone counts as evicted.
        """
        namespace, name = pod.metadata.namespace, pod.metadata.name
        body = client.V1Eviction(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(uid=pod.metadata.uid)
            ),
        )
        delay = self.settings.eviction_backoff_s
        for attempt in range(self.settings.eviction_retries + 1):
            try:
                self.retry.call(
                    f"evict pod {namespace}/{name}",
                    lambda: self._evict_once(name, namespace, body),
                )
                return
            except ActionFailed as failed:
                cause = failed.__cause__
                if not (isinstance(cause, ApiException) and cause.status == 429):
                    raise
                if attempt == self.settings.eviction_retries:
                    raise ActionFailed(
                        f"eviction of {namespace}/{name} refused "
                        f"{attempt + 1} times (PodDisruptionBudget): {describe(cause)}"
                    ) from cause
            if self.retry.stop.wait(delay):
                raise ActionFailed(f"stop requested while evicting {namespace}/{name}")
            delay = min(delay * 2, MAX_EVICTION_DELAY_S)

    def _evict_once(self, name: str, namespace: str, body: Any) -> None:
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body)
        except ApiException as err:
            # 404: already gone; 409: the uid precondition failed (a different pod now).
            if err.status == 404 or (err.status == 409 and "precondition" in describe(err).lower()):
                return
            if err.status == 429:
                # A PDB refusal: not for the generic retry, the caller backs off and counts.
                raise ActionFailed(describe(err)) from err
            raise

    def scale(self, kind: str, namespace: str, name: str, expected: int, to: int) -> None:
        """Set replicas from ``expected`` to ``to`` through the scale subresource.

        Each attempt re-reads the scale: already at ``to`` means an earlier attempt (whose
        answer was lost) applied it; anything but ``expected`` means someone else scaled.
        """
        read, patch = self._scale_calls(kind)

        def attempt() -> None:
            current = read(name, namespace)
            replicas = current.spec.replicas
            if replicas == to:
                return
            if replicas != expected:
                raise ActionFailed(
                    f"{kind} {namespace}/{name} has {replicas} replicas, expected {expected}"
                )
            body = {
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "spec": {"replicas": to},
            }
            patch(name, namespace, body, _content_type=MERGE_PATCH)

        self.retry.call(f"scale {kind} {namespace}/{name} to {to}", attempt)

    def _scale_calls(self, kind: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
        if kind == "Deployment":
            return (
                self.apps.read_namespaced_deployment_scale,
                self.apps.patch_namespaced_deployment_scale,
            )
        if kind == "ReplicaSet":
            return (
                self.apps.read_namespaced_replica_set_scale,
                self.apps.patch_namespaced_replica_set_scale,
            )
        raise ActionFailed(f"cannot scale a {kind}")

    def replicas(self, kind: str, namespace: str, name: str) -> int:
        """The desired replicas of a Deployment or ReplicaSet."""
        read, _ = self._scale_calls(kind)
        scale = self.retry.call(f"read scale of {namespace}/{name}", lambda: read(name, namespace))
        return int(scale.spec.replicas or 0)

    def delete_node(self, name: str) -> None:
        """Delete a Node object (gone already is fine)."""
        self.get_or_none(f"delete node {name}", lambda: self.core.delete_node(name))

    # ------------------------------------------------------------------ waits --
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
        """Wait (watch) until ``check`` decides on the pods matching a selector, at most
        ``timeout_s`` (default ``verify_timeout_s``); a ``rollback`` wait ignores the stop
        flag."""
        return wait_until(
            self.core.list_namespaced_pod,
            check,
            timeout_s=self.settings.verify_timeout_s if timeout_s is None else timeout_s,
            retry=self.rollback_retry if rollback else self.retry,
            what=what,
            namespace=namespace,
            label_selector=selector,
        )

    def wait_pods_on(self, node: str, check: Check, what: str) -> Verification:
        """Wait (watch) until ``check`` decides on the pods bound to a node."""
        return wait_until(
            self.core.list_pod_for_all_namespaces,
            check,
            timeout_s=self.settings.verify_timeout_s,
            retry=self.retry,
            what=what,
            field_selector=f"spec.nodeName={node}",
        )

    def wait_nodes(self, check: Check, what: str, timeout_s: float) -> Verification:
        """Wait (watch) until ``check`` decides on the nodes."""
        return wait_until(
            self.core.list_node, check, timeout_s=timeout_s, retry=self.retry, what=what
        )

    def wait_node_gone(self, node: str, timeout_s: float) -> Verification:
        """Wait (watch) until the Node object is deleted."""

        def gone(nodes: Mapping[str, Any]) -> Verification | None:
            return None if nodes else Verification(True, f"node {node} deleted")

        return wait_until(
            self.core.list_node,
            gone,
            timeout_s=timeout_s,
            retry=self.retry,
            what=f"node {node} to be deleted",
            field_selector=f"metadata.name={node}",
        )


def now_iso() -> str:
    """UTC now, RFC 3339 (for annotations)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
