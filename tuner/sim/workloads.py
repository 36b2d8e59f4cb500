"""Workloads to simulate: published CPU/memory requests and HPAs, and a load-to-CPU model.

Each service has its published requests and HPA (where the project publishes one) and a
demand model: ``cpu_per_load`` millicores of CPU per unit of load (requests per second) plus
``fixed_cpu`` millicores. The requests and HPAs are read from the projects' manifests
(sources below); the CPU cost per request is *not* published anywhere and is an assumption,
chosen per service in proportion to how many calls one front-door request fans out to it.

Sources (read with the search tool; numbers only):

- php-apache, the 2019 thesis' benchmark: ``Gezzellig/DynamicTopologySelection``
  ``demo/php-apache-deployment.yaml`` (200m CPU) and ``demo/php-apache-hpa.yaml`` (1-50, 80 %).
- Online Boutique: ``GoogleCloudPlatform/microservices-demo`` ``release/kubernetes-manifests.yaml``.
  It ships no HPAs; we attach Sock Shop's published policy (1-10 at 50 %) to its stateless
  services. The load generator is left out (load comes from outside the cluster).
- Sock Shop: ``microservices-demo/microservices-demo`` ``deploy/kubernetes/complete-demo.yaml``
  and ``deploy/kubernetes/autoscaling/*-hsc.yaml`` (1-10 at 50 %). Its databases and queues
  declare no requests (0).
- Robot Shop: ``instana/robot-shop`` ``K8s/helm/templates/*-deployment.yaml`` and
  ``K8s/autoscale.sh`` (1-2 at 50 % on cart, catalogue, dispatch, payment, ratings, shipping,
  user, web); redis is a StatefulSet.
- DeathStarBench socialNetwork: ``delimitrou/DeathStarBench``
  ``socialNetwork/helm-chart/socialnetwork/values.yaml`` (every service 100m/128Mi; HPA 1-10 at
  60 % when enabled).
- GKE system pods: kube-proxy (100m) and fluentd-gcp (100m/200Mi) DaemonSets, kube-dns
  (260m/110Mi: kubedns 100m/70Mi + dnsmasq 150m/20Mi + sidecar 10m/20Mi), its autoscaler,
  heapster and metrics-server (with their addon-resizer nannies), l7-default-backend, from the
  ``kubernetes/kubernetes`` ``cluster/addons`` manifests of the GKE 1.11 era (as remembered,
  not re-read: treat them as approximate).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from tuner.model.cluster import Workload
from tuner.model.constraints import (
    Constraints,
    LabelSelector,
    PodAffinityTerm,
    SpreadConstraint,
    Toleration,
)

MIB = 2**20
GIB = 2**30


@dataclass(frozen=True, slots=True)
class HpaSpec:
    """A HorizontalPodAutoscaler on CPU utilization (of requests)."""

    min_replicas: int
    max_replicas: int
    target: float
    """Target average utilization, e.g. 0.8 for 80 %."""


TOLERATE_ALL = Constraints(tolerations=(Toleration(operator="Exists"),))
"""A DaemonSet pod's constraints: it tolerates every taint."""


class Spread(NamedTuple):
    """A topology spread constraint over a service's own pods."""

    topology_key: str
    max_skew: int = 1
    hard: bool = True
    """``whenUnsatisfiable: DoNotSchedule`` (else ``ScheduleAnyway``)."""


@dataclass(frozen=True, slots=True)
class Service:
    """One workload: kind, requests, replicas (initial, or fixed without HPA), demand model,
    and the placement rules its pods carry (spread and required anti-affinity among its own
    pods, selected by their ``app`` label)."""

    name: str
    cpu: int
    memory: int
    kind: str = "Deployment"
    replicas: int = 1
    hpa: HpaSpec | None = None
    cpu_per_load: float = 0.0
    """Millicores of CPU per unit of load."""
    fixed_cpu: float = 0.0
    namespace: str = "default"
    pdb_max_unavailable: int | None = None
    """``maxUnavailable`` of its PodDisruptionBudget; None: it has none."""
    spread: tuple[Spread, ...] = ()
    anti_affinity: str = ""
    """The topology key of a required anti-affinity among its own pods (``""``: none)."""
    _hash: int = field(init=False, repr=False, compare=False, default=0)
    _labels: Mapping[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)
    _rules: Constraints = field(init=False, repr=False, compare=False, default=Constraints())

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.namespace, self.kind, self.name)))
        object.__setattr__(self, "_labels", {"app": self.name})  # a dict: services are pickled
        own = LabelSelector((("app", self.name),))
        rules = Constraints(
            anti_affinity=(
                (PodAffinityTerm(own, (self.namespace,), self.anti_affinity),)
                if self.anti_affinity
                else ()
            ),
            spread=tuple(
                SpreadConstraint(s.max_skew, s.topology_key, own, hard=s.hard) for s in self.spread
            ),
        )
        object.__setattr__(self, "_rules", TOLERATE_ALL if self.kind == "DaemonSet" else rules)

    @property
    def labels(self) -> Mapping[str, str]:
        """Its pods' labels (read only)."""
        return self._labels

    @property
    def rules(self) -> Constraints:
        """Its pods' constraints (a DaemonSet's tolerate every taint)."""
        return self._rules

    def __hash__(self) -> int:
        """From its identity only, computed once (the simulator keys dicts by services on
        every tick; equal services have equal identities, so this agrees with equality)."""
        return self._hash

    @property
    def workload(self) -> Workload:
        """Its identity in the domain model."""
        return Workload(self.namespace, self.kind, self.name)

    def demand(self, load: float) -> float:
        """CPU demand in millicores at this load."""
        return self.fixed_cpu + self.cpu_per_load * load


@dataclass(frozen=True, slots=True)
class Application:
    """A set of services deployed together in one namespace."""

    name: str
    services: tuple[Service, ...]

    def in_namespace(self, namespace: str) -> tuple[Service, ...]:
        """The services placed in ``namespace``."""
        return tuple(replace(s, namespace=namespace) for s in self.services)


def _hpa(name: str, cpu: int, memory: int, policy: HpaSpec, per_load: float) -> Service:
    return Service(name, cpu, memory, hpa=policy, cpu_per_load=per_load, fixed_cpu=5.0)


def _fixed(name: str, cpu: int, memory: int, kind: str = "Deployment") -> Service:
    return Service(name, cpu, memory, kind=kind)


PHP_APACHE = Application(
    "php-apache",
    (Service("php-apache", 200, 0, hpa=HpaSpec(1, 50, 0.8), cpu_per_load=150.0),),
)
"""150m per request/s: the thesis' peak of 37 req/s at 80 % of 200m needs ~35 pods, which with
GKE's system pods and the monitoring stack fills the seven n1-standard-2 nodes the thesis reports
as its maximum (§5.1.3)."""

SOCK_SHOP_HPA = HpaSpec(1, 10, 0.5)
ONLINE_BOUTIQUE = Application(
    "online-boutique",
    (
        _hpa("frontend", 100, 64 * MIB, SOCK_SHOP_HPA, 8.0),
        _hpa("productcatalogservice", 100, 64 * MIB, SOCK_SHOP_HPA, 6.0),
        _hpa("currencyservice", 100, 64 * MIB, SOCK_SHOP_HPA, 6.0),
        _hpa("cartservice", 200, 64 * MIB, SOCK_SHOP_HPA, 4.0),
        _hpa("recommendationservice", 100, 220 * MIB, SOCK_SHOP_HPA, 3.0),
        _hpa("adservice", 200, 180 * MIB, SOCK_SHOP_HPA, 3.0),
        _hpa("checkoutservice", 100, 64 * MIB, SOCK_SHOP_HPA, 1.0),
        _hpa("shippingservice", 100, 64 * MIB, SOCK_SHOP_HPA, 1.0),
        _hpa("paymentservice", 100, 64 * MIB, SOCK_SHOP_HPA, 0.5),
        _hpa("emailservice", 100, 64 * MIB, SOCK_SHOP_HPA, 0.5),
        _fixed("redis-cart", 70, 200 * MIB),
    ),
)

SOCK_SHOP = Application(
    "sock-shop",
    (
        _hpa("front-end", 100, 300 * MIB, SOCK_SHOP_HPA, 8.0),
        _hpa("catalogue", 100, 100 * MIB, SOCK_SHOP_HPA, 5.0),
        _hpa("carts", 100, 200 * MIB, SOCK_SHOP_HPA, 4.0),
        _hpa("user", 100, 100 * MIB, SOCK_SHOP_HPA, 3.0),
        _hpa("orders", 100, 300 * MIB, SOCK_SHOP_HPA, 1.5),
        _hpa("payment", 99, 100 * MIB, SOCK_SHOP_HPA, 0.5),
        _hpa("shipping", 100, 300 * MIB, SOCK_SHOP_HPA, 0.5),
        _hpa("queue-master", 100, 300 * MIB, SOCK_SHOP_HPA, 0.5),
        _fixed("carts-db", 0, 0),
        _fixed("catalogue-db", 0, 0),
        _fixed("orders-db", 0, 0),
        _fixed("user-db", 0, 0),
        _fixed("session-db", 0, 0),
        _fixed("rabbitmq", 0, 0),
    ),
)

ROBOT_SHOP_HPA = HpaSpec(1, 2, 0.5)
ROBOT_SHOP = Application(
    "robot-shop",
    (
        _hpa("web", 100, 50 * MIB, ROBOT_SHOP_HPA, 6.0),
        _hpa("catalogue", 100, 50 * MIB, ROBOT_SHOP_HPA, 4.0),
        _hpa("cart", 100, 50 * MIB, ROBOT_SHOP_HPA, 3.0),
        _hpa("user", 100, 50 * MIB, ROBOT_SHOP_HPA, 2.0),
        _hpa("ratings", 100, 50 * MIB, ROBOT_SHOP_HPA, 2.0),
        _hpa("shipping", 100, 500 * MIB, ROBOT_SHOP_HPA, 1.0),
        _hpa("payment", 100, 50 * MIB, ROBOT_SHOP_HPA, 0.5),
        _hpa("dispatch", 100, 50 * MIB, ROBOT_SHOP_HPA, 0.5),
        _fixed("mongodb", 100, 50 * MIB),
        _fixed("mysql", 100, 700 * MIB),
        _fixed("rabbitmq", 100, 50 * MIB),
        _fixed("redis", 200, 150 * MIB, kind="StatefulSet"),
    ),
)

DSB_HPA = HpaSpec(1, 10, 0.6)
_DSB = 100, 128 * MIB
SOCIAL_NETWORK = Application(
    "social-network",
    (
        _hpa("nginx-thrift", *_DSB, DSB_HPA, 6.0),
        _hpa("home-timeline-service", *_DSB, DSB_HPA, 4.0),
        _hpa("user-timeline-service", *_DSB, DSB_HPA, 3.0),
        _hpa("post-storage-service", *_DSB, DSB_HPA, 4.0),
        _hpa("social-graph-service", *_DSB, DSB_HPA, 2.0),
        _hpa("compose-post-service", *_DSB, DSB_HPA, 1.5),
        _hpa("text-service", *_DSB, DSB_HPA, 1.0),
        _hpa("user-service", *_DSB, DSB_HPA, 1.0),
        _hpa("unique-id-service", *_DSB, DSB_HPA, 0.5),
        _hpa("url-shorten-service", *_DSB, DSB_HPA, 0.5),
        _hpa("user-mention-service", *_DSB, DSB_HPA, 0.5),
        _hpa("media-service", *_DSB, DSB_HPA, 0.5),
        _hpa("media-frontend", *_DSB, DSB_HPA, 0.5),
        *(
            _fixed(name, *_DSB)
            for name in (
                "post-storage-mongodb",
                "user-timeline-mongodb",
                "social-graph-mongodb",
                "url-shorten-mongodb",
                "user-mongodb",
                "media-mongodb",
                "post-storage-memcached",
                "user-memcached",
                "url-shorten-memcached",
                "media-memcached",
                "home-timeline-redis",
                "social-graph-redis",
                "user-timeline-redis",
                "jaeger",
            )
        ),
    ),
)

GKE_DAEMONSETS = (
    Service("kube-proxy", 100, 0, kind="DaemonSet", namespace="kube-system"),
    Service("fluentd-gcp", 100, 200 * MIB, kind="DaemonSet", namespace="kube-system"),
)
GKE_SYSTEM = (
    Service("kube-dns", 260, 110 * MIB, replicas=2, namespace="kube-system"),
    Service("kube-dns-autoscaler", 20, 10 * MIB, namespace="kube-system"),
    Service("heapster", 138, 204 * MIB, namespace="kube-system"),
    Service("metrics-server", 53, 154 * MIB, namespace="kube-system"),
    Service("l7-default-backend", 10, 20 * MIB, namespace="kube-system"),
)

THESIS_MONITORING = (
    Service("prometheus", 500, 1 * GIB, namespace="monitoring"),
    Service("grafana", 200, 256 * MIB, namespace="monitoring"),
    Service("node-exporter", 100, 50 * MIB, kind="DaemonSet", namespace="monitoring"),
)
"""The thesis ran Prometheus, Grafana and node-exporter next to php-apache and reports that with
no load they needed two nodes (§5.1.3); their requests are not published, these are assumed."""

EKS_DAEMONSETS = (
    Service("kube-proxy", 100, 0, kind="DaemonSet", namespace="kube-system"),
    Service("aws-node", 25, 0, kind="DaemonSet", namespace="kube-system"),
)
EKS_SYSTEM = (
    Service("coredns", 100, 70 * MIB, replicas=2, namespace="kube-system", pdb_max_unavailable=1),
)
"""EKS add-on defaults: kube-proxy 100m, the VPC CNI's aws-node 25m, CoreDNS 100m/70Mi x2 with
the PodDisruptionBudget (maxUnavailable 1) the CoreDNS add-on installs, so CoreDNS does not pin
its nodes; GKE's system Deployments above come without PodDisruptionBudgets (the Cluster
Autoscaler FAQ: "by default, kube-system pods prevent CA from removing nodes on which they are
running ... users can manually add PDBs"), so each pins its node."""
