"""An in-memory double of the executor's Kubernetes calls (:class:`tuner.execute.port.KubePort`).

A fast unit-test double only: the real-control-plane tests in ``tests/cluster/`` run the same
actions, rollbacks and journal against an API server. It models just enough of the
controllers for the actions' verifications: scaling a Deployment up creates pods of its one
ReplicaSet, scaling down deletes the pod with the lowest pod-deletion-cost (the newest on a
tie), an eviction deletes the pod and creates its replacement; a new pod of an onboarded
workload lands on a node that carries the workload's label (unless
:attr:`FakeKube.preference_outscored`), else where
:attr:`FakeKube.default_node` says the scheduler puts it (never on a cordoned or NoSchedule
tainted node, unless the pod tolerates every taint; never on a node :attr:`FakeKube.room` says is
full), and is Ready when :attr:`FakeKube.ready`
says so. A wait decides on the state at once: a check that would keep
waiting times out. Every call is recorded in :attr:`FakeKube.calls`. A bare pod with a node
selector (a placeholder) stays Pending, unless :attr:`FakeKube.grows` names a node to add, as a
Cluster Autoscaler would, with the selector's labels; the pod is then bound to it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from kubernetes.client import ApiClient

from tuner.execute.affinity import with_preference
from tuner.execute.marks import DELETION_COST, Patch
from tuner.execute.retry import ActionFailed
from tuner.execute.watch import Check, Verification
from tuner.model.conventions import Keys
from tuner.model.onboarding import preferred_labels
from tuner.settings import Execute

MUTATING = frozenset(
    {
        "patch_node",
        "patch_pod",
        "patch_deployment",
        "evict",
        "scale",
        "delete_node",
        "put_config_map",
        "patch_config_map",
        "delete_config_map",
        "create_pod",
        "delete_pod",
    }
)
"""The calls that change the cluster."""

MODELS = {
    "node": "V1Node",
    "pod": "V1Pod",
    "priority_class": "V1PriorityClass",
    "rs": "V1ReplicaSet",
    "deploy": "V1Deployment",
    "cm": "V1ConfigMap",
    "pdb": "V1PodDisruptionBudget",
}


def merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Apply a JSON merge patch (RFC 7386) in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = json.loads(json.dumps(value))


class FakeKube:
    """Nodes, one-ReplicaSet Deployments and their pods, HPAs and ConfigMaps, in memory."""

    def __init__(self, settings: Execute | None = None) -> None:
        self.settings = settings or Execute(eviction_retries=0, surge_lone_pods=False)
        """No retries; the lone pods of its one-replica Deployments are evicted (surge moves
        only where a test's settings turn them on)."""
        self.keys = Keys(self.settings.label_prefix)
        self.ready = True
        """Whether new pods become Ready."""
        self.default_node: str | None = None
        """The scheduler's favourite node for a new pod no label steers (None: no node fits, the
        pod stays Pending); when the pod may not go there, the next node (in the order added)
        it may go to."""
        self.preference_outscored = False
        """The scheduler's other scores outweigh an onboarded pod's preference for its workload's
        label (it is only a score): the pod goes where :attr:`default_node` says."""
        self.newest_goes = False
        """Scale-down ignores pod-deletion-cost and deletes the newest pod (a misbehaving
        controller: the remove must notice and roll back)."""
        self.refuse_evictions = False
        """Every eviction is refused (as a PodDisruptionBudget would)."""
        self.room: dict[str, int] = {}
        """Nodes that hold at most this many pods (the others: any number); a full node fits no
        new pod, as the scheduler's resource fit would say."""
        self.grows: str | None = None
        """The node an autoscaler adds for a placeholder pod (None: the pod stays Pending)."""
        self.priority_classes: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        self.nodes: dict[str, dict[str, Any]] = {}
        self.pod_docs: dict[tuple[str, str], dict[str, Any]] = {}
        self.deployments: dict[tuple[str, str], dict[str, Any]] = {}
        self.hpas: dict[tuple[str, str, str], str] = {}
        self.utilisations: dict[tuple[str, str, str], float] = {}
        """(namespace, kind, name) -> the utilisation its HPA last measured."""
        self.config_maps: dict[tuple[str, str], dict[str, Any]] = {}
        self.budgets: dict[tuple[str, str], dict[str, Any]] = {}
        """PodDisruptionBudgets (:meth:`add_budget`)."""
        self._serial = 0
        self._client = ApiClient()

    # ------------------------------------------------------------------ setup --
    def add_node(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """A schedulable, Ready node."""
        self.nodes[name] = {
            "metadata": {"name": name, "uid": f"node-{name}", "labels": dict(labels or {})},
            "spec": {},
            "status": {
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }

    def add_deployment(
        self,
        namespace: str,
        name: str,
        on: list[str],
        *,
        onboarded: bool = True,
        tolerates_all: bool = False,
        strategy: Mapping[str, Any] | None = None,
    ) -> None:
        """A Deployment with one pod on each node of ``on`` (selector ``app=<name>``);
        ``onboarded``: its pod template prefers its workload label; ``tolerates_all``: its pods
        tolerate every taint (a cordon and the tuner's taint included); ``strategy``: its
        ``spec.strategy`` (none: the API server's default, a RollingUpdate of 25 %)."""
        spec: dict[str, Any] = {"containers": [{"name": "app", "image": "app"}]}
        if onboarded:
            spec["affinity"] = with_preference(None, self.keys.workload_label(namespace, name))
        if tolerates_all:
            spec["tolerations"] = [{"operator": "Exists"}]
        replicas = len(on)
        self.deployments[(namespace, name)] = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"deploy-{name}",
                "generation": 1,
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
                **({} if strategy is None else {"strategy": dict(strategy)}),
            },
            "status": {
                "observedGeneration": 1,
                "replicas": replicas,
                "updatedReplicas": replicas,
                "availableReplicas": replicas,
            },
        }
        for node in on:
            self._spawn(namespace, name, node)

    def add_budget(self, namespace: str, workload: str, allowed: int) -> None:
        """A PodDisruptionBudget over the workload's pods that allows ``allowed`` disruptions
        now (its status; evictions are refused only by :attr:`refuse_evictions`)."""
        self.budgets[(namespace, workload)] = {
            "metadata": {"name": workload, "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": workload}}},
            "status": {
                "disruptionsAllowed": allowed,
                "currentHealthy": 0,
                "desiredHealthy": 0,
                "expectedPods": 0,
            },
        }

    # ------------------------------------------------------------------ state --
    def mutations(self) -> list[tuple[str, str]]:
        """The calls that changed something."""
        return [call for call in self.calls if call[0] in MUTATING]

    def live_pods(self, namespace: str, workload: str) -> list[Any]:
        """The workload's pods."""
        return [self._model(d, "pod") for d in self._docs(namespace, {"app": workload})]

    def _model(self, doc: Mapping[str, Any], kind: str) -> Any:
        return self._client.deserialize(json.dumps(doc), MODELS[kind], "application/json")

    def _docs(self, namespace: str, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        return [
            d
            for (ns, _), d in self.pod_docs.items()
            if ns == namespace and labels.items() <= d["metadata"]["labels"].items()
        ]

    def _spawn(self, namespace: str, workload: str, node: str | None = None) -> None:
        self._serial += 1
        name = f"{workload}-rs-{self._serial:05d}"
        hour, rest = divmod(self._serial, 3600)
        minute, second = divmod(rest, 60)
        spec = json.loads(json.dumps(self.deployments[(namespace, workload)]["spec"]["template"]))
        where = node or self._scheduled(spec["spec"], namespace, workload)
        ready = "True" if self.ready or node else "False"
        self.pod_docs[(namespace, name)] = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{self._serial:05d}",
                "labels": {"app": workload, TEMPLATE_HASH: _hashed(spec)},
                "creationTimestamp": f"2026-01-01T{hour:02d}:{minute:02d}:{second:02d}Z",
                "ownerReferences": [_owner("ReplicaSet", f"{workload}-rs")],
            },
            "spec": {**spec["spec"], "nodeName": where},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        }

    def _scheduled(self, spec: Mapping[str, Any], namespace: str, workload: str) -> str | None:
        """Where the scheduler puts a new pod of the workload (None: Pending)."""
        tolerant = bool(spec.get("tolerations"))

        def fits(name: str) -> bool:
            node = self.nodes[name]
            closed = node["spec"].get("unschedulable") or any(
                t["effect"] == "NoSchedule" for t in node["spec"].get("taints") or ()
            )
            full = sum(d["spec"].get("nodeName") == name for d in self.pod_docs.values())
            return (tolerant or not closed) and full < self.room.get(name, full + 1)

        label = self.keys.workload_label(namespace, workload)
        if not self.preference_outscored and label in preferred_labels(spec.get("affinity")):
            steered = [n for n, d in self.nodes.items() if label in _labels(d) and fits(n)]
            if steered:
                return steered[0]
        if self.default_node is None:
            return None
        order = list(self.nodes)
        start = order.index(self.default_node) if self.default_node in order else 0
        return next((n for n in order[start:] + order[:start] if fits(n)), None)

    def _reconcile(self, namespace: str, workload: str) -> None:
        docs = self._docs(namespace, {"app": workload})
        wanted = self.deployments[(namespace, workload)]["spec"]["replicas"]
        for _ in range(wanted - len(docs)):
            self._spawn(namespace, workload)
        if wanted < len(docs):

            def order(d: dict[str, Any]) -> tuple[int, str]:
                cost = int(d["metadata"].get("annotations", {}).get(DELETION_COST, "0"))
                newest = d["metadata"]["creationTimestamp"]
                return (0 if self.newest_goes else cost, _negate(newest))

            for doc in sorted(docs, key=order)[: len(docs) - wanted]:
                del self.pod_docs[(namespace, doc["metadata"]["name"])]

    # ------------------------------------------------------------------ reads --
    def stop_requested(self) -> bool:
        return False

    def pod(self, namespace: str, name: str) -> Any | None:
        self.calls.append(("pod", f"{namespace}/{name}"))
        doc = self.pod_docs.get((namespace, name))
        return None if doc is None else self._model(doc, "pod")

    def node(self, name: str) -> Any | None:
        self.calls.append(("node", name))
        doc = self.nodes.get(name)
        return None if doc is None else self._model(doc, "node")

    def replica_set(self, namespace: str, name: str) -> Any | None:
        self.calls.append(("replica_set", f"{namespace}/{name}"))
        workload = name.removesuffix("-rs")
        if (namespace, workload) not in self.deployments:
            return None
        current = _hashed(self.deployments[(namespace, workload)]["spec"]["template"])
        doc = {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"rs-{workload}",
                "ownerReferences": [_owner("Deployment", workload)],
            },
            "spec": {"selector": {"matchLabels": {"app": workload, TEMPLATE_HASH: current}}},
        }
        return self._model(doc, "rs")

    def deployment(self, namespace: str, name: str) -> Any | None:
        self.calls.append(("deployment", f"{namespace}/{name}"))
        doc = self.deployments.get((namespace, name))
        return None if doc is None else self._model(doc, "deploy")

    def disruption_budgets(self, namespace: str) -> list[Any]:
        self.calls.append(("disruption_budgets", namespace))
        docs = [d for (ns, _), d in self.budgets.items() if ns == namespace]
        return [self._model(d, "pdb") for d in docs]

    def pods(self, namespace: str, selector: str) -> list[Any]:
        self.calls.append(("pods", f"{namespace}?{selector}"))
        labels = dict(part.split("=", 1) for part in selector.split(",") if part)
        return [self._model(d, "pod") for d in self._docs(namespace, labels)]

    def pods_on(self, node: str) -> list[Any]:
        self.calls.append(("pods_on", node))
        docs = self.pod_docs.values()
        return [self._model(d, "pod") for d in docs if d["spec"].get("nodeName") == node]

    def labelled_pods(self, selector: str) -> list[Any]:
        self.calls.append(("labelled_pods", selector))
        docs = self.pod_docs.values()
        return [self._model(d, "pod") for d in docs if selector in d["metadata"]["labels"]]

    def list_nodes(self, selector: str = "") -> list[Any]:
        """Every node, or those carrying the label ``selector`` names (a key alone)."""
        self.calls.append(("list_nodes", selector))
        docs = self.nodes.values()
        return [self._model(d, "node") for d in docs if not selector or selector in _labels(d)]

    def priority_class(self, name: str) -> Any | None:
        self.calls.append(("priority_class", name))
        doc = {"metadata": {"name": name}, "value": -10}
        return self._model(doc, "priority_class") if name in self.priority_classes else None

    def hpa_scales(self, namespace: str, kind: str, name: str) -> str | None:
        self.calls.append(("hpa_scales", f"{namespace}/{kind}/{name}"))
        return self.hpas.get((namespace, kind, name))

    def hpa_utilisation(self, namespace: str, kind: str, name: str) -> float | None:
        self.calls.append(("hpa_utilisation", f"{namespace}/{kind}/{name}"))
        return self.utilisations.get((namespace, kind, name))

    def replicas(self, kind: str, namespace: str, name: str) -> int:
        self.calls.append(("replicas", f"{kind} {namespace}/{name}"))
        return int(self.deployments[(namespace, name)]["spec"]["replicas"])

    def serialize(self, obj: Any) -> dict[str, Any]:
        serialized: dict[str, Any] = self._client.sanitize_for_serialization(obj)
        return serialized

    def config_map(self, namespace: str, name: str) -> Any | None:
        self.calls.append(("config_map", f"{namespace}/{name}"))
        doc = self.config_maps.get((namespace, name))
        return None if doc is None else self._model(doc, "cm")

    # ----------------------------------------------------------------- writes --
    def patch_node(self, name: str, build: Callable[[Any], Patch | None]) -> Any | None:
        doc = self.nodes.get(name)
        patch = None if doc is None else build(self._model(doc, "node"))
        # Only a patch applied is a write: with none to make, the real adapter only read.
        self.calls.append(("node" if patch is None else "patch_node", name))
        if doc is None or patch is None:
            return None
        merge(doc, patch)
        return self._model(doc, "node")

    def patch_pod(
        self, namespace: str, name: str, build: Callable[[Any], Patch | None]
    ) -> Any | None:
        self.calls.append(("patch_pod", f"{namespace}/{name}"))
        doc = self.pod_docs.get((namespace, name))
        patch = None if doc is None else build(self._model(doc, "pod"))
        if doc is None or patch is None:
            return None
        merge(doc, patch)
        return self._model(doc, "pod")

    def patch_deployment(
        self, namespace: str, name: str, build: Callable[[Any], Patch | None]
    ) -> Any | None:
        self.calls.append(("patch_deployment", f"{namespace}/{name}"))
        doc = self.deployments.get((namespace, name))
        patch = None if doc is None else build(self._model(doc, "deploy"))
        if doc is None or patch is None:
            return None
        merge(doc, patch)
        self._roll(namespace, name)
        return self._model(doc, "deploy")

    def _roll(self, namespace: str, workload: str) -> None:
        """A rolling update of surge 1 and none unavailable: pods of the current template up to
        the replicas, and one pod of another template deleted per new one Ready (a pod of the
        template set back counts as new: the rollout turns around)."""
        deployment = self.deployments[(namespace, workload)]
        current = _hashed(deployment["spec"]["template"])

        def split() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            docs = self._docs(namespace, {"app": workload})
            new = [d for d in docs if d["metadata"]["labels"].get(TEMPLATE_HASH) == current]
            return new, [d for d in docs if d not in new]

        for _ in range(deployment["spec"]["replicas"] - len(split()[0])):
            self._spawn(namespace, workload)
        new, old = split()
        for doc in old[: sum(_ready(d) for d in new)]:
            del self.pod_docs[(namespace, doc["metadata"]["name"])]

    def create_pod(self, namespace: str, body: Mapping[str, Any]) -> Any:
        name = body["metadata"]["name"]
        self.calls.append(("create_pod", f"{namespace}/{name}"))
        doc = json.loads(json.dumps(body))
        doc["metadata"].update(namespace=namespace, uid=f"uid-{name}")
        if self.grows is not None:
            self.add_node(self.grows, doc["spec"].get("nodeSelector"))
            doc["spec"]["nodeName"] = self.grows
        self.pod_docs[(namespace, name)] = doc
        return self._model(doc, "pod")

    def delete_pod(self, namespace: str, name: str) -> None:
        self.calls.append(("delete_pod", f"{namespace}/{name}"))
        self.pod_docs.pop((namespace, name), None)

    def evict(self, pod: Any) -> None:
        namespace, name = pod.metadata.namespace, pod.metadata.name
        self.calls.append(("evict", f"{namespace}/{name}"))
        if self.refuse_evictions:
            raise ActionFailed(f"eviction of {namespace}/{name} refused (PodDisruptionBudget)")
        doc = self.pod_docs.pop((namespace, name), None)
        if doc is not None:
            self._spawn(namespace, doc["metadata"]["labels"]["app"])

    def scale(self, kind: str, namespace: str, name: str, expected: int, to: int) -> None:
        self.calls.append(("scale", f"{kind} {namespace}/{name} {expected}->{to}"))
        spec = self.deployments[(namespace, name)]["spec"]
        if spec["replicas"] == to:
            return
        if spec["replicas"] != expected:
            raise ActionFailed(f"{kind} {namespace}/{name} has {spec['replicas']} replicas")
        spec["replicas"] = to
        self._reconcile(namespace, name)

    def delete_node(self, name: str) -> None:
        self.calls.append(("delete_node", name))
        self.nodes.pop(name, None)

    def put_config_map(self, namespace: str, body: Mapping[str, Any]) -> None:
        self.calls.append(("put_config_map", f"{namespace}/{body['metadata']['name']}"))
        self.config_maps[(namespace, body["metadata"]["name"])] = json.loads(json.dumps(body))

    def patch_config_map(self, namespace: str, name: str, patch: Patch) -> None:
        self.calls.append(("patch_config_map", f"{namespace}/{name}"))
        if (namespace, name) not in self.config_maps:
            raise ActionFailed(f"configmap {namespace}/{name} not found")
        merge(self.config_maps[(namespace, name)], patch)

    def delete_config_map(self, namespace: str, name: str) -> None:
        self.calls.append(("delete_config_map", f"{namespace}/{name}"))
        self.config_maps.pop((namespace, name), None)

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
        pods = {p.metadata.uid: p for p in self.pods(namespace, selector)}
        return check(pods) or Verification(False, f"timed out waiting for {what}")

    def wait_pods_on(self, node: str, check: Check, what: str) -> Verification:
        pods = {p.metadata.uid: p for p in self.pods_on(node)}
        return check(pods) or Verification(False, f"timed out waiting for {what}")

    def wait_nodes(self, check: Check, what: str, timeout_s: float) -> Verification:
        self.calls.append(("wait_nodes", what))
        nodes = {n.metadata.uid: n for n in self.list_nodes()}
        return check(nodes) or Verification(
            False, f"timed out after {timeout_s:g} s waiting for {what}"
        )

    def wait_node_gone(self, node: str, timeout_s: float) -> Verification:
        self.calls.append(("wait_node_gone", node))
        if node in self.nodes:
            return Verification(False, f"timed out waiting for node {node} to be deleted")
        return Verification(True, f"node {node} deleted")


TEMPLATE_HASH = "pod-template-hash"


def _hashed(template: Mapping[str, Any]) -> str:
    """A pod template's hash, as the Deployment controller labels its ReplicaSet's pods (an
    empty map counts as none, as the API serves it)."""
    return hashlib.sha256(json.dumps(_pruned(template), sort_keys=True).encode()).hexdigest()[:10]


def _pruned(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    kept = {k: _pruned(v) for k, v in value.items()}
    return {k: v for k, v in kept.items() if v != {}}


def _ready(doc: Mapping[str, Any]) -> bool:
    conditions = doc.get("status", {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _labels(doc: Mapping[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = doc["metadata"].get("labels") or {}
    return labels


def _owner(kind: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": name,
        "uid": f"{kind}-{name}",
        "controller": True,
    }


def _negate(stamp: str) -> str:
    """Sorts timestamps newest first."""
    return "".join(chr(0x10FFFF - ord(c)) for c in stamp)
