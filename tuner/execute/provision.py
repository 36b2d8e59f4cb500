"""Obtaining a node from a pool (the ``provision_node`` action of a replace), and binding the
plan's provisional name (``general-8+1``: a ``+`` no Kubernetes node name has) to it.

``execute.node_provision``:

- ``autoscaler``: a *placeholder pod* in ``execute.journal_namespace`` makes the pool's Cluster
  Autoscaler add a node. It has the PriorityClass ``execute.placeholder_priority_class``
  (``deploy/priorityclass.yaml``: -10, the Cluster Autoscaler's default
  ``--expendable-pods-priority-cutoff``, so the lowest priority that still triggers a scale-up,
  and ``preemptionPolicy: Never``: it never evicts anything), the action's requests capped to
  the pool template's allocatable, the pool's node selector, tolerations of the template's
  taints, and a required node affinity that keeps it off every node that exists now: only a
  new node satisfies it. Once it is bound to a Ready node of the pool, the provisional name is
  bound to that node and the placeholder is deleted (verified gone).
- ``command``: ``execute.node_provision_command`` runs with ``TUNER_POOL``, ``TUNER_NODE_TYPE``
  and ``TUNER_NODE`` in its environment; then a Ready node of the pool that did not exist
  before (nor is bound already) is bound.

Both wait (watch) at most ``execute.provision_timeout_s``; on a timeout or any failure the
placeholder is deleted and the action fails. The placeholder's name is journaled before it is
created, and it carries the label ``<prefix>/placeholder``, by which
:func:`remove_placeholders` finds any left behind by a crash.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from typing import Any

from tuner.execute.command import run_command
from tuner.execute.events import Ref, Sink
from tuner.execute.journal import Journal
from tuner.execute.port import KubePort
from tuner.execute.retry import ActionFailed
from tuner.execute.step import Done
from tuner.execute.watch import Check, Verification
from tuner.model.conventions import Keys
from tuner.model.pools import NodePool
from tuner.model.quantity import GIB
from tuner.model.resources import Resources
from tuner.plan.actions import Action, Add, Migrate, ProvisionNode, provisional
from tuner.settings import Execute

log = logging.getLogger(__name__)

PAUSE_IMAGE = "registry.k8s.io/pause:3.9"
"""The placeholder's container: does nothing, uses nothing."""
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_LABEL_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def pending_target(action: Action) -> str | None:
    """The provisional node a migrate or add still names (not bound yet), or None."""
    match action:
        case Migrate(target=target) | Add(target=target) if provisional(target):
            return target
    return None


# ------------------------------------------------------------------------ pure parts --
def selector_refusal(pool: NodePool) -> str | None:
    """Why the pool's node selector cannot steer a new node, or None."""
    if not pool.selector:
        return f"pool {pool.name} has no node selector: a placeholder could grow any pool"
    for key, value in sorted(pool.selector.items()):
        prefix, _, name = key.rpartition("/")
        if (
            not name
            or not _LABEL_NAME.match(name)
            or (prefix and not _LABEL_PREFIX.match(prefix))
            or not _LABEL_NAME.match(value)
        ):
            return f"pool {pool.name}: node selector {key}={value!r} is not a valid label"
    return None


def in_pool(node: Any, pool: NodePool) -> bool:
    """The node carries every label of the pool's selector."""
    labels = node.metadata.labels or {}
    return all(labels.get(k) == v for k, v in pool.selector.items())


def node_ready(node: Any) -> bool:
    """Ready, schedulable and not tainted not-ready."""
    conditions = node.status.conditions if node.status else None
    taints = {t.key for t in node.spec.taints or ()}
    return (
        any(c.type == "Ready" and c.status == "True" for c in conditions or ())
        and not node.spec.unschedulable
        and "node.kubernetes.io/not-ready" not in taints
    )


def placeholder_name(keys: Keys, node: str) -> str:
    """A fresh placeholder pod name for the provisional ``node`` (a valid label value too)."""
    slug = re.sub(r"[^a-z0-9]+", "-", node.lower()).strip("-")[:24].strip("-")
    return f"{keys.placeholder_pod_prefix}{slug}-{secrets.token_hex(3)}"


def placeholder_pod(
    keys: Keys, settings: Execute, name: str, action: ProvisionNode, existing: tuple[str, ...]
) -> dict[str, Any]:
    """The placeholder pod asking the pool's autoscaler for a node that is none of
    ``existing``."""
    pool = action.pool
    requests = action.placeholder_requests
    affinity: dict[str, Any] = {}
    if existing:
        term = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": existing}]}
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    tolerations = [
        {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect}
        for t in pool.template.taints
    ]
    return {
        "metadata": {
            "name": name,
            "labels": {keys.placeholder: name},
            "annotations": {keys.provisional: action.node},
        },
        "spec": {
            "priorityClassName": settings.placeholder_priority_class,
            "preemptionPolicy": "Never",
            "nodeSelector": dict(pool.selector),
            "tolerations": tolerations,
            "affinity": affinity,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "placeholder",
                    "image": PAUSE_IMAGE,
                    "resources": {
                        "requests": {"cpu": f"{requests.cpu}m", "memory": str(requests.memory)}
                    },
                }
            ],
        },
    }


def _placed(name: str, found: list[str]) -> Check:
    """Check: the placeholder is bound to a node (appended to ``found``)."""

    def check(pods: Mapping[str, Any]) -> Verification | None:
        pod = next((p for p in pods.values() if p.metadata.name == name), None)
        if pod is None or pod.metadata.deletion_timestamp:
            return Verification(False, f"placeholder pod {name} was deleted by someone else")
        if pod.spec.node_name:
            found.append(pod.spec.node_name)
            return Verification(True, f"placeholder pod {name} scheduled on {pod.spec.node_name}")
        return None

    return check


def _ready_in_pool(name: str, pool: NodePool) -> Check:
    """Check: node ``name`` is Ready and in the pool."""

    def check(nodes: Mapping[str, Any]) -> Verification | None:
        node = next((n for n in nodes.values() if n.metadata.name == name), None)
        if node is None:
            return Verification(False, f"node {name} is gone")
        if not in_pool(node, pool):
            return Verification(False, f"node {name} is not a node of pool {pool.name}")
        return Verification(True, f"node {name} is Ready") if node_ready(node) else None

    return check


def _new_in_pool(before: frozenset[str], pool: NodePool, found: list[str]) -> Check:
    """Check: a Ready node of the pool none of ``before`` (appended to ``found``)."""

    def check(nodes: Mapping[str, Any]) -> Verification | None:
        new = sorted(
            n.metadata.name
            for n in nodes.values()
            if n.metadata.name not in before and in_pool(n, pool) and node_ready(n)
        )
        if not new:
            return None
        found.append(new[0])
        return Verification(True, f"node {new[0]} of pool {pool.name} is Ready")

    return check


def _amount(requests: Resources) -> str:
    return f"{requests.cpu}m CPU, {requests.memory / GIB:.3g} GiB"


# ---------------------------------------------------------------------------- step --
def missing_priority_class(kube: KubePort) -> str | None:
    """Why a placeholder cannot be created: its PriorityClass does not exist (else None)."""
    name = kube.settings.placeholder_priority_class
    if kube.priority_class(name) is None:
        return f"PriorityClass {name} not found (deploy/priorityclass.yaml)"
    return None


def check_provision(
    kube: KubePort, action: ProvisionNode, bindings: MutableMapping[str, str]
) -> Provisioning:
    """The pool's selector is sane and the pool below its maximum; with ``autoscaler`` the
    placeholders' PriorityClass exists."""
    pool, settings = action.pool, kube.settings
    refusal = selector_refusal(pool)
    if refusal:
        raise ActionFailed(refusal)
    nodes = kube.list_nodes()
    size = sum(1 for n in nodes if in_pool(n, pool))
    if pool.max_size is not None and size >= pool.max_size:
        raise ActionFailed(f"pool {pool.name} is at its maximum size ({size} nodes)")
    if settings.node_provision == "autoscaler" and (missing := missing_priority_class(kube)):
        raise ActionFailed(missing)
    existing = tuple(sorted(n.metadata.name for n in nodes))
    return Provisioning(action, settings.node_provision, existing, bindings)


@dataclass
class Provisioning:
    """Obtain a node of the pool, verified Ready, and bind the provisional name to it (in
    ``bindings``); :attr:`subject` is what the action's Event is about once something real
    exists (the placeholder pod, then the node)."""

    action: ProvisionNode
    mode: str
    existing: tuple[str, ...]
    bindings: MutableMapping[str, str]
    subject: Ref | None = field(default=None)

    def would(self) -> str:
        """What :meth:`apply` would do."""
        action = self.action
        pool = action.pool
        selector = ",".join(f"{k}={v}" for k, v in sorted(pool.selector.items()))
        bind = f"bind {action.node} to it"
        if self.mode == "command":
            return (
                f"would run the provision command for pool {pool.name} ({pool.node_type}), "
                f"wait for a new Ready node of the pool, {bind}"
            )
        requests = action.placeholder_requests
        return (
            f"would create a placeholder pod ({_amount(requests)}, nodeSelector {selector}, "
            f"off the {len(self.existing)} existing nodes) for the autoscaler to grow pool "
            f"{pool.name} ({pool.node_type}), wait for the new node to be Ready, {bind}, "
            "delete the placeholder"
        )

    def apply(self, kube: KubePort, events: Sink) -> Done:
        """Obtain the node, verified; the placeholder is deleted whatever happens."""
        timeout = kube.settings.provision_timeout_s
        deadline = time.monotonic() + timeout
        if self.mode == "command":
            node = self._by_command(kube, deadline)
        else:
            node = self._by_autoscaler(kube, deadline)
        self.bindings[self.action.node] = node
        self.subject = Ref.node(node)
        pool = self.action.pool.name
        return Done(f"node {node} of pool {pool} is Ready, bound as {self.action.node}")

    def _by_command(self, kube: KubePort, deadline: float) -> str:
        action, pool = self.action, self.action.pool
        before = frozenset(self.existing) | frozenset(self.bindings.values())
        provision_command(kube.settings, pool, action.node, _left(deadline))
        found: list[str] = []
        verdict = kube.wait_nodes(
            _new_in_pool(before, pool, found),
            f"a new Ready node of pool {pool.name}",
            _left(deadline),
        )
        if not verdict.ok:
            raise ActionFailed(_late(verdict, deadline, kube.settings, pool).reason)
        return found[0]

    def _by_autoscaler(self, kube: KubePort, deadline: float) -> str:
        action, keys, pool = self.action, kube.keys, self.action.pool
        namespace = kube.settings.journal_namespace
        name = placeholder_name(keys, action.node)
        journal = Journal(kube)
        journal.placeholder(name)
        self.subject = Ref("v1", "Pod", name, namespace)
        body = placeholder_pod(keys, kube.settings, name, action, self.existing)
        found: list[str] = []
        try:
            created = kube.create_pod(namespace, body)
            self.subject = replace(self.subject, uid=str(created.metadata.uid or ""))
            verdict = kube.wait_pods(
                namespace,
                f"{keys.placeholder}={name}",
                _placed(name, found),
                f"a node of pool {pool.name} for placeholder pod {name}",
                timeout_s=_left(deadline),
            )
            if verdict.ok:
                verdict = kube.wait_nodes(
                    _ready_in_pool(found[0], pool), f"node {found[0]} Ready", _left(deadline)
                )
        except ActionFailed as err:
            verdict = Verification(False, str(err))
        finally:  # also when something unexpected broke the wait
            gone = delete_placeholder(kube, namespace, name)
        verdict = _late(verdict, deadline, kube.settings, pool)
        if not verdict.ok:
            raise ActionFailed(f"{verdict.reason}; {gone.reason}")
        if not gone.ok:
            raise ActionFailed(gone.reason)
        try:
            journal.placeholder(None)
        except ActionFailed as err:  # the end of the transition drops the journal anyway
            log.warning("the journal still names the deleted placeholder %s: %s", name, err)
        return found[0]


def provision_command(settings: Execute, pool: NodePool, node: str, timeout_s: float) -> None:
    """Run ``execute.node_provision_command`` for a new node of ``pool`` (provisional name
    ``node``), with ``TUNER_POOL``, ``TUNER_NODE_TYPE`` and ``TUNER_NODE`` in its environment."""
    env = {"TUNER_POOL": pool.name, "TUNER_NODE_TYPE": pool.node_type, "TUNER_NODE": node}
    run_command(settings.node_provision_command, "node provision command", timeout_s, env)


def _late(
    verdict: Verification, deadline: float, settings: Execute, pool: NodePool
) -> Verification:
    """A failed wait past the deadline, said in the setting's terms."""
    if verdict.ok or time.monotonic() < deadline:
        return verdict
    timeout = settings.provision_timeout_s
    return Verification(
        False, f"no new Ready node of pool {pool.name} within {timeout:g} s (provision_timeout_s)"
    )


def _left(deadline: float) -> float:
    """Seconds to the deadline (at least a moment: a spent budget times out at once)."""
    return max(deadline - time.monotonic(), 0.001)


def delete_placeholder(kube: KubePort, namespace: str, name: str) -> Verification:
    """Delete the placeholder and verify (watch) it is gone."""

    def gone(pods: Mapping[str, Any]) -> Verification | None:
        return None if pods else Verification(True, "gone")

    try:
        kube.delete_pod(namespace, name)
        verdict = kube.wait_pods(
            namespace,
            f"{kube.keys.placeholder}={name}",
            gone,
            f"placeholder pod {name} to be deleted",
            rollback=True,
        )
    except ActionFailed as err:
        verdict = Verification(False, str(err))
    if verdict.ok:
        return Verification(True, f"placeholder pod {namespace}/{name} deleted")
    log.error("placeholder pod %s/%s not deleted (the next recovery will)", namespace, name)
    return Verification(False, f"placeholder pod {namespace}/{name} not deleted: {verdict.reason}")


def remove_placeholders(kube: KubePort) -> list[str]:
    """Delete every placeholder pod (found by its label, whatever the journal says); one
    line per pod deleted."""
    lines = []
    for pod in kube.labelled_pods(kube.keys.placeholder):
        namespace, name = pod.metadata.namespace, pod.metadata.name
        outcome = delete_placeholder(kube, namespace, name)
        if not outcome.ok:
            raise ActionFailed(outcome.reason)
        provisional_name = (pod.metadata.annotations or {}).get(kube.keys.provisional, "?")
        lines.append(f"{outcome.reason} (it asked for a node for {provisional_name})")
    return lines
