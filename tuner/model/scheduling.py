"""The fit rules of "does pod P fit on node N", one predicate each, over a pod's constraints
(:mod:`tuner.model.constraints`).

:func:`static_fit` (rules that do not depend on load), :func:`resource_room` (CPU, memory, pod
slots against what is free, for one node or for all at once) and
:class:`~tuner.model.census.Census` (the rules that count other pods: extended resources, host
ports, inter-pod affinity and anti-affinity, topology spread, with :func:`spread_eligible`,
:func:`global_minimum` and :func:`skew_limit`) are the only implementations of the rules:
:mod:`tuner.model.snapshot` batches them over all nodes (property tests hold the two to the
same answers), the simulator's scheduler, the take-back and the replay checker call them one
node at a time.

Modelled, as kube-scheduler's filter plugins decide them:

- cordon, taints (``NoSchedule``/``NoExecute``) against tolerations, ``nodeSelector``, required
  node affinity (In, NotIn, Exists, DoesNotExist, Gt, Lt);
- volume topology (VolumeBinding, VolumeZone): a pod whose PersistentVolumeClaim is bound to a
  PersistentVolume with ``nodeAffinity`` (zonal disks, ``local`` volumes) or zone/region labels
  only goes to nodes that match it (see :mod:`tuner.monitor.dump` for how claims are read);
- extended and other scalar resources (NodeResourcesFit): ``nvidia.com/gpu``,
  ``ephemeral-storage``, ``hugepages-*``: node allocatable minus its pods' requests, integers;
- host ports (NodePorts): a (hostIP, protocol, port) a pod asks for conflicts with one in use on
  the node with the same protocol and port when either IP is ``0.0.0.0`` or both are equal;
- inter-pod affinity (InterPodAffinity) on any topology key: the pod's required anti-affinity
  (no selected pod in the node's domain), every placed pod's required anti-affinity that
  selects the pod (both directions), the pod's required affinity (a pod matching all its terms
  in the node's domain for each term, or none anywhere and the pod matches them itself: the
  first of a group). Namespaces: the term's list, else its own; a ``namespaceSelector`` is read
  from the namespace's name (``kubernetes.io/metadata.name``, which every namespace carries);
  namespace labels are not in the input, so a selector on any other key is approximated: for
  anti-affinity as every namespace (it repels more), for affinity as none beyond the list (it
  attracts less);
- topology spread (PodTopologySpread), following "Pod Topology Spread Constraints"
  (kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints) and the
  plugin's filter: ``whenUnsatisfiable: DoNotSchedule`` constraints with ``maxSkew`` over any
  ``topologyKey``. Pods counted: in the incoming pod's namespace, selected by ``labelSelector``
  ANDed with the incoming pod's own values of ``matchLabelKeys`` (no ``labelSelector``: no pod).
  Eligible domains: the values of the topology key over the nodes that carry every hard
  constraint's key and, under ``nodeAffinityPolicy: Honor`` (the default), match the pod's
  nodeSelector and required node affinity, and, under ``nodeTaintsPolicy: Honor`` (not the
  default, ``Ignore``), have no untolerated ``NoSchedule``/``NoExecute`` taint (a cordoned node
  carries ``node.kubernetes.io/unschedulable``). A node passes when it carries the key and
  ``pods in its domain + (1 if the pod matches the selector) - global minimum <= maxSkew``,
  the global minimum being the least count over eligible domains, or 0 when there are fewer
  than ``minDomains`` (default 1) of them.

Soft rules, which kube-scheduler only scores:

- ``whenUnsatisfiable: ScheduleAnyway`` spread: *kept as close as it was*. The census records
  each such constraint's skew (most minus fewest matching pods over its eligible domains) as
  the cluster stood when it was built; a pod may then go to a node only if the domain it joins
  ends no further than ``max(maxSkew, that skew)`` above the global minimum, so no placement
  lifts the constraint's skew past the larger of the two. A pod the census never saw in the
  starting cluster gets ``maxSkew`` alone. Only the tuner's own plans keep this rule
  (``soft=True``); the simulated kube-scheduler and autoscalers do not, as the real ones do not.
- Preferred inter-pod affinity and anti-affinity: the snapshot *prefers* destinations that
  honour them (the highest total weight of honoured terms first, then the best fit); a plan
  is never refused for one.
- kube-scheduler's system default spreading (hostname maxSkew 3, zone maxSkew 5,
  ``ScheduleAnyway``, for pods of a Service, ReplicaSet or StatefulSet without constraints of
  their own) is *not modelled*: it is a score whose selector comes from Services, which the
  input does not hold, neither autoscaler simulates it, and keeping it "no worse" would cap
  every Deployment at three pods a node, which kube-scheduler itself does not do.

During a drain the node is cordoned but still a domain of its pods (``nodeTaintsPolicy``
Ignore), so for a hard constraint the census and snapshot count a node the plan closes, with
the pods it still has, until it is deleted (a pod the scheduler would leave Pending until then
is not planned); under Honor it stops being a domain once closed. A soft constraint is kept as
close as it was in the cluster the plan leaves, without the nodes it closes.

Not modelled: StorageClass ``allowedTopologies`` for claims not yet bound (a claim that waits
for its first consumer is provisioned where the pod lands: no rule), volume counts per node
(NodeVolumeLimits), the ``matchLabelKeys``/``mismatchLabelKeys`` of pod affinity terms beyond
what the API server has merged into their selectors, dynamic resource allocation.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, overload

from tuner.model.constraints import (
    CORDON,
    Constraints,
    HostPort,
    SpreadConstraint,
    Taint,
    selects_node,
)
from tuner.model.resources import Resources

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


class NodeTraits(Protocol):
    """The parts of a node that static fit rules read."""

    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def taints(self) -> tuple[Taint, ...]: ...
    @property
    def unschedulable(self) -> bool: ...


class NodeRoom(NodeTraits, Protocol):
    """A node as the census reads it: its traits and what it offers beyond CPU and memory."""

    @property
    def extended(self) -> Mapping[str, int]: ...


class PodTraits(Protocol):
    """The parts of a pod that the rules counting other pods read."""

    @property
    def namespace(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def constraints(self) -> Constraints: ...
    @property
    def key(self) -> str: ...


def untolerated(constraints: Constraints, taints: Iterable[Taint]) -> Taint | None:
    """The first ``NoSchedule``/``NoExecute`` taint the constraints do not tolerate."""
    for taint in taints:
        if taint.effect in ("NoSchedule", "NoExecute") and not any(
            t.tolerates(taint) for t in constraints.tolerations
        ):
            return taint
    return None


def affinity_fit(constraints: Constraints, labels: Mapping[str, str]) -> bool:
    """The pod's nodeSelector and required node affinity admit a node with these labels."""
    if not constraints.node_selector and not constraints.node_affinity:
        return True
    return all(labels.get(k) == v for k, v in constraints.node_selector) and (
        not constraints.node_affinity or selects_node(constraints.node_affinity, labels)
    )


def static_fit(constraints: Constraints, node: NodeTraits) -> str | None:
    """Why the pod can never be placed on the node regardless of load, or None if it can."""
    if node.unschedulable:
        return "node is cordoned"
    taint = untolerated(constraints, node.taints)
    if taint is not None:
        return f"taint {taint.key}={taint.value}:{taint.effect} not tolerated"
    labels = node.labels
    for key, value in constraints.node_selector:
        if labels.get(key) != value:
            return f"nodeSelector {key}={value} not matched"
    if constraints.node_affinity and not selects_node(constraints.node_affinity, labels):
        return "required node affinity not matched"
    for volume in constraints.volumes:
        if not selects_node(volume.terms, labels):
            return f"{volume.volume} is not reachable from the node (volume node affinity)"
    return None


@overload
def resource_room(
    requests: Resources, cpu: int, memory: int, slots: int
) -> tuple[bool, bool, bool]: ...
@overload
def resource_room(
    requests: Resources,
    cpu: npt.NDArray[np.int64],
    memory: npt.NDArray[np.int64],
    slots: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_], npt.NDArray[np.bool_]]: ...
def resource_room(requests: Resources, cpu: Any, memory: Any, slots: Any) -> tuple[Any, Any, Any]:
    """Whether the free ``cpu``, ``memory`` and pod ``slots`` hold the requests' CPU, their
    memory and the pod: for one node (integers), or for every node at once (arrays, as the
    snapshot asks)."""
    return cpu >= requests.cpu, memory >= requests.memory, slots >= 1


def pods_room(
    requests: Resources,
    mask: npt.NDArray[np.bool_],
    cpu: npt.NDArray[np.int64],
    memory: npt.NDArray[np.int64],
    slots: npt.NDArray[np.int64],
) -> int:
    """How many pods asking ``requests`` the ``mask``'s nodes, with these free ``cpu``,
    ``memory`` and pod ``slots`` per node, hold placed one by one in any order (identical pods
    on independent nodes)."""
    most = slots[mask]
    for free, asked in ((cpu, requests.cpu), (memory, requests.memory)):
        if asked > 0:
            most = most.clip(max=free[mask] // asked)
    return int(most.clip(min=0).sum())


def resource_fit(requests: Resources, free: Resources, free_slots: int) -> str | None:
    """Why ``requests`` do not fit in ``free`` CPU, memory and pod slots now, or None."""
    cpu, memory, slot = resource_room(requests, free.cpu, free.memory, free_slots)
    if not cpu:
        return "not enough free CPU"
    if not memory:
        return "not enough free memory"
    if not slot:
        return "no free pod slot"
    return None


def extended_fit(constraints: Constraints, free: Callable[[str], int]) -> str | None:
    """Why the pod's extended-resource requests do not fit in what ``free`` says is left."""
    for name, amount in constraints.extended:
        if amount > free(name):
            return f"not enough free {name}"
    return None


def port_fit(constraints: Constraints, used: Iterable[HostPort]) -> str | None:
    """Why the pod's host ports clash with ``used`` ones on the node, or None."""
    taken = list(used)
    for port in constraints.host_ports:
        if any(port.conflicts(other) for other in taken):
            return f"host port {port} is in use"
    return None


def spread_eligible(
    constraints: Constraints, spread: SpreadConstraint, node: NodeTraits, cordoned: bool
) -> bool:
    """Whether the node's domain counts for ``spread`` (the node inclusion policies) — the
    node carrying every key is checked by the caller."""
    if spread.honor_node_affinity and not affinity_fit(constraints, node.labels):
        return False
    if spread.honor_taints:
        taints = (*node.taints, CORDON) if cordoned or node.unschedulable else node.taints
        if untolerated(constraints, taints) is not None:
            return False
    return True


def global_minimum(counts: Collection[int], min_domains: int) -> int:
    """The global minimum of a spread constraint over its eligible domains' counts (one per
    domain)."""
    return 0 if len(counts) < min_domains else min(counts)


def skew_limit(spread: SpreadConstraint, baseline: int) -> int:
    """How far above the global minimum the domain a pod joins may end: ``maxSkew``, for a soft
    constraint at least the skew it had when the census or snapshot was built (``baseline``)."""
    return spread.max_skew if spread.hard else max(spread.max_skew, baseline)
