"""The lower bound on a tick's cost: the **rule bound**, the cheapest set of whole nodes of the
scenario's pools on which the tick's pods could all run under the scheduling rules.

**What it counts.** Per tick, with ``x_p`` nodes of pool ``p`` (whole numbers between the pool's
minimum and maximum), it minimises the price per hour ``sum(price_p * x_p)`` subject to:

- *Room*: the nodes that hold pods offer, together, the non-DaemonSet pods' CPU requests, memory
  requests and pod count (a node offers its allocatable minus its DaemonSet pods' requests, and
  its pod slots minus its DaemonSet pods).
- *Domains*: pods run on ready nodes only, and kube-scheduler's topology spread counts the zones
  of the ready nodes (:class:`tuner.model.census.Census`, over the ready nodes:
  :meth:`tuner.sim.state.SimCluster.census`). The bound takes the set ``S`` of zones that have a
  ready node as a choice: every zone of ``S`` has a node; a pool of a zone outside ``S`` holds no
  pod (its nodes, at least its minimum, are paid and idle); a pool without a zone label is usable
  whatever ``S`` is. The bound is the cheapest over every ``S``.
- *Hard zone spread* (``whenUnsatisfiable: DoNotSchedule``, ``maxSkew`` k) of a service with n
  pods: its pods run only on zone-labelled nodes (a node without the key fails the filter), so
  in the zones of ``S``, and every set ``T`` of t zones of ``S`` holds at least
  :func:`least_in` (n, k, ``|S|``, t) of them (proof there); ``T``'s pools offer the room of what
  every spread service must put in it.
- *Required anti-affinity among a service's own pods*: per hostname, at most one on a node, so
  n nodes where it may run (and in ``T`` as many nodes as it must put there); per zone, at most
  one in each zone of ``S`` when no pool lacks the zone label (a node without the key does not
  count the term), so ``S`` has at least n zones and ``T`` holds at least ``n - (|S| - t)``.
- *Eligibility*: in the simulator no pool carries a taint and no workload a node selector or
  node affinity, so a pod may run on every pool but for the zone label its rules need; those are
  the only two classes (any pool; the zoned pools of ``S``).

**Why no strategy goes below it.** Take any run's tick whose placement satisfies the rules: let
``S`` be the zones with a ready node. Its billed nodes number ``x_p`` per pool, within the
pools' limits; its pods are on ready nodes, so in the pools of ``S`` and the unlabelled ones,
whose room therefore covers them; each spread service's counts per zone satisfy the skew rule,
so each ``T`` holds at least :func:`least_in` of them, whose requests its pools' room covers;
the anti-affinities hold by definition. So ``x`` is feasible for ``S``'s programme and costs at
least its optimum. The pods are the CA-alone run's at the tick, pending ones included (as the
run had asked for them), and the spread is taken as the scheduler leaves it when it places pods:
a ReplicaSet's scale-down deletes pods without regard to zones, so a run can hold a skew the
scheduler would not create, and a zone that gets its first ready node starts with none of a
spread service's pods (the pods already placed stay where they are) while one that loses its
last node has its pods placed again elsewhere; such placements are not covered. The pool
minimum is the Cluster Autoscaler's node-group limit, which every row but Karpenter's keeps;
the simulated Karpenter consolidates regardless of it. A tick whose pods no placement can hold
under the rules and within the pools' maximums (more pods of a per-zone anti-affinity than
zones, more pods than the largest pools hold: some stay pending in any run) is bounded by the
whole-node bound.

**What it ignores**: how pods split across nodes (each pool's room is pooled), spread and
anti-affinity over hostnames beyond the counts above, preferred rules, provisioning time, and
the run's own history (the bound takes each tick on its own).

Without the rules and the maximums it is the *whole-node bound* (:meth:`RuleBound.whole`, the
evaluation's bound before: room and the pools' minimums only), which it never undercuts: each of
its programmes is the whole-node programme with constraints added. Each integer
programme (one variable per pool) is solved exactly by SciPy's ``milp`` (HiGHS branch and bound,
no optimality gap allowed); its rounded solution is checked against the constraints in integers
before it is used. Results are cached per distinct demand.

**The pinned bound** is the rule bound of a run that never moves a *pinned* pod (:func:`pinned`:
a StatefulSet's pods, which the tuner never moves by the project's rule, and the ``kube-system``
pods no PodDisruptionBudget covers, which the Cluster Autoscaler's default
``--skip-nodes-with-system-pods=true`` never drains and the tuner never moves; DaemonSet pods
aside, and only of workloads without an HPA, whose pods no run creates or deletes). It takes,
per pool, what the pinned pods that have stayed on their nodes since the run's first measured
tick hold (:class:`Held`: the nodes they are on, and their requests) and adds to the rule
bound's programmes: each pool's minimum raised to its nodes that hold pinned pods; only the sets
``S`` that hold those nodes' zones; and in the row of each set ``T`` of zones, the requests of
the pinned pods in ``T``'s pools beside what the spread services must put there (pods of a
service whose zone rules the bound counts are left out of it: they are among that share). So a
pinned node counts its price and its room left after its pinned pods, which are part of the
tick's demand. *Why no such run goes below it*: take a run that starts, at the first measured
tick, with the pinned pods where the CA-alone run has them and never moves one. Their services
have fixed replica counts, so at every later tick each of those pods is still on its node, which
is billed and ready (its zone is in ``S``); the pods counted here are some of them (those the
CA-alone run kept), so the run's nodes per pool meet the raised minimums, its ``S`` holds their
zones, and each ``T``'s nodes hold both those pinned pods and (other pods) at least the spread's
share, so their room covers the sum; with every constraint of the rule bound (proved above), its
mix is feasible for one of the programmes and costs at least that programme's optimum. Each
programme is the rule bound's with constraints added, so the pinned bound is never below the
rule bound (nor is its fallback where no programme is feasible: the larger of the two is
taken). It says nothing of a run whose pinned pods start elsewhere (another scheduler profile,
Karpenter's own first nodes) or that moves them (Karpenter; the Cluster Autoscaler, whose drains
StatefulSet pods do not block): such a run can go below it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from tuner.model.constraints import HOSTNAME_KEY, ZONE_KEY
from tuner.model.movability import SYSTEM_NAMESPACE
from tuner.sim.pools import NodeGroup
from tuner.sim.workloads import Service


@dataclass(frozen=True, slots=True)
class Mix:
    """A node mix: its price per hour, its node count and its nodes per pool (in the pools'
    order)."""

    cost: float
    nodes: int
    pools: tuple[int, ...] = ()


def least_in(pods: int, skew: int, zones: int, inside: int) -> int:
    """The fewest of ``pods`` pods spread with ``maxSkew`` ``skew`` over ``zones`` domains that
    any ``inside`` of the domains hold together.

    Proof. The scheduler admits a pod to a domain only if that domain then holds at most
    ``skew`` more than the domains' minimum; pods only being added, the minimum never falls, so
    after every placement each count ``c`` lies in ``[m, m + skew]`` where ``m`` is the minimum.
    Then ``zones * m <= pods <= zones * (m + skew)``, i.e. ``m`` is between
    ``ceil(pods / zones) - skew`` (and 0) and ``floor(pods / zones)``. The ``inside`` domains hold
    at least ``inside * m`` (each at least ``m``) and at least ``pods - (zones - inside) * (m +
    skew)`` (the others at most ``m + skew`` each). So they hold at least the smallest, over that
    range of ``m``, of the larger of the two, which is what this returns. It is also attained
    (``tests/unit/test_sim_bound.py`` checks it against every spread placement of small
    cases), so the bound is as tight as the rule allows. With ``zones = 3``, ``skew = 1`` and 5
    pods, one zone holds at least 1 and two zones at least 3 (1, 2, 2)."""
    if inside <= 0 or pods <= 0:
        return 0
    if inside >= zones:
        return pods
    low, high = max(-(-pods // zones) - skew, 0), pods // zones
    return min(max(inside * m, pods - (zones - inside) * (m + skew)) for m in range(low, high + 1))


@dataclass(frozen=True, slots=True)
class Ruled:
    """What the rule bound counts of one service's hard rules."""

    cpu: int
    memory: int
    skew: int
    """The smallest ``maxSkew`` of its hard zone spreads (0: none)."""
    per_node: bool
    """A required anti-affinity among its pods per hostname."""
    per_zone: bool
    """A required anti-affinity among its pods per zone."""


def ruled(services: Sequence[Service]) -> tuple[Service, ...]:
    """The services whose hard rules the rule bound counts, in order."""
    return tuple(s for s in services if _rules(s) is not None)


def pinned(services: Sequence[Service]) -> tuple[Service, ...]:
    """The services whose pods the pinned bound keeps where they are, in order: StatefulSets
    (the project's rule: the tuner never moves their pods) and ``kube-system`` workloads without
    a PodDisruptionBudget (the Cluster Autoscaler FAQ, "What types of pods can prevent CA from
    removing a node?": kube-system pods that are not run on every node and have no PDB; the
    tuner excludes the namespace but for pods a PDB covers), DaemonSets aside and only those
    without an HPA (a fixed number of pods, the same in every run)."""
    return tuple(
        s
        for s in services
        if s.kind != "DaemonSet"
        and s.hpa is None
        and (
            s.kind == "StatefulSet"
            or (s.namespace == SYSTEM_NAMESPACE and s.pdb_max_unavailable is None)
        )
    )


def _rules(service: Service) -> Ruled | None:
    skews = [s.max_skew for s in service.spread if s.hard and s.topology_key == ZONE_KEY]
    per_node = service.anti_affinity == HOSTNAME_KEY
    per_zone = service.anti_affinity == ZONE_KEY
    if service.kind == "DaemonSet" or not (skews or per_node or per_zone):
        return None
    return Ruled(service.cpu, service.memory, min(skews, default=0), per_node, per_zone)


class Held(NamedTuple):
    """What the pinned pods hold in one pool: its nodes that hold one, and the requests (CPU,
    memory, pod count) of those pinned pods whose services no zone rule of the bound counts."""

    nodes: int
    cpu: int = 0
    memory: int = 0
    pods: int = 0


def held(pools: Sequence[str], placed: Iterable[tuple[str, str, Service]]) -> tuple[Held, ...]:
    """Per pool (in the order of ``pools``' names), what the pinned pods hold, from the pool,
    node and service of each."""
    nodes: dict[str, set[str]] = {}
    requests: dict[str, tuple[int, int, int]] = {}
    for pool, node, service in placed:
        nodes.setdefault(pool, set()).add(node)
        rules = _rules(service)
        if rules is None or not (rules.skew or rules.per_zone):
            cpu, memory, count = requests.get(pool, (0, 0, 0))
            requests[pool] = (cpu + service.cpu, memory + service.memory, count + 1)
    return tuple(Held(len(nodes.get(pool, ())), *requests.get(pool, (0, 0, 0))) for pool in pools)


class Fixed(NamedTuple):
    """What the pinned pods fix of the pinned bound's programmes."""

    least: np.ndarray
    """Each pool's least nodes: its minimum, or its nodes that hold pinned pods if more."""
    zones: frozenset[int]
    """The zones of the nodes that hold pinned pods (every ``S`` holds them)."""
    requests: np.ndarray
    """Per pool (columns), the requests of its pinned pods no zone rule counts (rows: CPU,
    memory, pod slots)."""


class RuleBound:
    """The rule bound per tick demand (requests, pod count and the pods of each service of
    :func:`ruled`), and the pinned bound (with the nodes holding pinned pods per pool), cached."""

    def __init__(
        self,
        pools: tuple[NodeGroup, ...],
        daemonsets: tuple[Service, ...],
        services: Sequence[Service] = (),
    ) -> None:
        self.pools = pools
        self.prices = np.array([p.node_type.price for p in pools])
        self.least = np.array([p.min_nodes for p in pools], dtype=np.int64)
        self.most = np.array([p.max_nodes for p in pools], dtype=np.int64)
        self.room = np.array(
            [
                [
                    p.node_type.allocatable.cpu - sum(d.cpu for d in daemonsets),
                    p.node_type.allocatable.memory - sum(d.memory for d in daemonsets),
                    p.node_type.max_pods - len(daemonsets),
                ]
                for p in pools
            ],
            dtype=np.int64,
        ).T
        """Rows: CPU, memory, pod slots; one column per pool."""
        self.zones = tuple(sorted({p.zone for p in pools if p.zone}))
        self.zone_of = np.array([self.zones.index(p.zone) if p.zone else -1 for p in pools])
        self.rules = tuple(r for s in services if (r := _rules(s)) is not None)
        self._whole: dict[tuple[int, ...], tuple[Mix, np.ndarray]] = {}
        self._cache: dict[tuple[int | Held, ...], Mix] = {}

    def whole(self, cpu: int, memory: int, pods: int) -> Mix:
        """The whole-node bound: the cheapest mix of whole nodes (at least each pool's minimum,
        any maximum) whose room holds these requests, no rule counted."""
        return self._whole_mix(np.array((cpu, memory, pods), dtype=np.int64), self.least)[0]

    def __call__(
        self,
        cpu: int,
        memory: int,
        pods: int,
        counts: Sequence[int] = (),
        pinned: Sequence[Held] = (),
    ) -> Mix:
        """The rule bound; ``counts``: the pods of each service of :func:`ruled`, in order.
        With ``pinned``, what the pinned pods hold in each pool (in the pools' order), the
        pinned bound (see the module's docstring)."""
        if len(counts) != len(self.rules):
            raise ValueError(f"{len(counts)} pod counts for {len(self.rules)} ruled services")
        if pinned and len(pinned) != len(self.pools):
            raise ValueError(f"{len(pinned)} pinned pools for {len(self.pools)} pools")
        key: tuple[int | Held, ...] = (cpu, memory, pods, *counts, *pinned)
        if key not in self._cache:
            demand = np.array((cpu, memory, pods), dtype=np.int64)
            mix = self._solve(demand, tuple(counts), self._fixed(pinned))
            rule = self(cpu, memory, pods, counts) if pinned else mix
            self._cache[key] = max(mix, rule, key=lambda m: m.cost)
        return self._cache[key]

    def _fixed(self, pinned: Sequence[Held]) -> Fixed:
        """What the pinned pods fix of the programmes (nothing without them)."""
        if not pinned:
            return Fixed(self.least, frozenset(), np.zeros_like(self.room))
        nodes = np.array([h.nodes for h in pinned], dtype=np.int64)
        zones = frozenset(int(z) for z in self.zone_of[nodes > 0] if z >= 0)
        requests = np.array([(h.cpu, h.memory, h.pods) for h in pinned], dtype=np.int64).T
        return Fixed(np.maximum(self.least, nodes), zones, requests)

    def _whole_mix(self, demand: np.ndarray, least: np.ndarray) -> tuple[Mix, np.ndarray]:
        """The whole-node programme's optimum with these per-pool minimums."""
        key = (*(int(d) for d in demand), *(int(n) for n in least))
        if key not in self._whole:
            unlimited = np.full(len(least), np.inf)
            nodes = _cheapest(self.prices, self.room, demand, least, unlimited)
            if nodes is None:
                raise ValueError(f"no mix of the pools' nodes holds requests {tuple(demand)}")
            self._whole[key] = (_mix(self.prices, nodes), nodes)
        return self._whole[key]

    def _solve(self, demand: np.ndarray, counts: tuple[int, ...], fixed: Fixed) -> Mix:
        """The cheapest programme's optimum over the zone sets that hold the pinned nodes'
        zones, each pool at least at its minimum and its pinned nodes."""
        mix, nodes = self._whole_mix(demand, fixed.least)
        held = frozenset(int(z) for z in self.zone_of[nodes > 0] if z >= 0)
        rows = self._rows(held, demand, counts, fixed.requests)
        if rows is not None and (rows[0] @ nodes >= rows[1]).all() and (nodes <= self.most).all():
            return mix  # the whole-node optimum keeps the rules and limits: nothing does better
        best: Mix | None = None
        for zones in self._zone_sets(fixed):
            rows = self._rows(zones, demand, counts, fixed.requests)
            if rows is None:
                continue
            found = _cheapest(self.prices, rows[0], rows[1], fixed.least, self.most)
            if found is not None and (best is None or self.prices @ found < best.cost):
                best = _mix(self.prices, found)
                if best.cost <= mix.cost:
                    break  # nothing goes below the whole-node bound
        return mix if best is None else best

    def _zone_sets(self, fixed: Fixed) -> list[frozenset[int]]:
        """Every set of zones with a ready node that holds the pinned nodes' zones, but one of
        each set of alike zones (zones whose pools have the same node types, minimums and
        maximums, none pinned, are interchangeable: the programme counts only how many zones a
        set has and which pools they hold)."""
        alike: dict[tuple[bool, tuple[tuple[str, int, int], ...]], list[int]] = {}
        for zone in range(len(self.zones)):
            shape = tuple(
                sorted(
                    (p.node_type.name, int(n), p.max_nodes)
                    for p, z, n in zip(self.pools, self.zone_of, fixed.least, strict=True)
                    if z == zone
                )
            )
            alike.setdefault((zone in fixed.zones, shape), []).append(zone)
        groups = [(pinned, zones) for (pinned, _), zones in alike.items()]
        return [
            frozenset(z for (_, group), n in zip(groups, taken, strict=True) for z in group[:n])
            for taken in itertools.product(
                *(range(len(g) if pinned else 0, len(g) + 1) for pinned, g in groups)
            )
        ]

    def _rows(
        self,
        held: frozenset[int],
        demand: np.ndarray,
        counts: tuple[int, ...],
        pinned: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The constraints ``A @ x >= b`` of the programme in which ``held`` are the zones with
        a ready node (see the module's docstring), or None when no placement meets the rules
        there; ``pinned``: the requests of the pinned pods no zone rule counts, per pool (rows:
        CPU, memory, pod slots)."""
        zone_of = self.zone_of
        unzoned = zone_of < 0
        usable = unzoned | np.isin(zone_of, list(held))
        per_zone_confined = not unzoned.any()
        size = len(held)
        matrix: list[np.ndarray] = [self.room * usable]
        bound: list[np.ndarray] = [demand]
        ones = np.ones(len(zone_of), dtype=np.int64)
        for zone in held:
            matrix.append((zone_of == zone)[None, :].astype(np.int64))
            bound.append(np.array([1]))
        nodes_needed = max(
            (n for r, n in zip(self.rules, counts, strict=True) if r.per_node), default=0
        )
        if nodes_needed:
            matrix.append((ones * usable)[None, :])
            bound.append(np.array([nodes_needed]))
        for rule, n in zip(self.rules, counts, strict=True):
            if n and rule.skew and not size:
                return None  # spread pods need a zone-labelled ready node
            if n > size and rule.per_zone and per_zone_confined:
                return None
        for inside in range(1, size + 1):
            for chosen in itertools.combinations(sorted(held), inside):
                need = np.zeros(3, dtype=np.int64)
                nodes = 0
                for rule, n in zip(self.rules, counts, strict=True):
                    share = least_in(n, rule.skew, size, inside) if rule.skew else 0
                    if rule.per_zone and (rule.skew or per_zone_confined):
                        share = max(share, n - (size - inside))
                    need += share * np.array((rule.cpu, rule.memory, 1), dtype=np.int64)
                    if rule.per_node:
                        nodes = max(nodes, share)
                within = np.isin(zone_of, chosen)
                need += pinned[:, within].sum(axis=1)
                if not need.any() and not nodes:
                    continue
                matrix.append(self.room * within)
                bound.append(need)
                if nodes:
                    matrix.append(within[None, :].astype(np.int64))
                    bound.append(np.array([nodes]))
        return np.vstack(matrix), np.concatenate(bound)


def _mix(prices: np.ndarray, nodes: np.ndarray) -> Mix:
    return Mix(float(prices @ nodes), int(nodes.sum()), tuple(int(n) for n in nodes))


def _cheapest(
    prices: np.ndarray,
    matrix: np.ndarray,
    demand: np.ndarray,
    least: np.ndarray,
    most: np.ndarray,
) -> np.ndarray | None:
    """The cheapest whole ``x`` between ``least`` and ``most`` with ``matrix @ x >= demand``
    (checked in integers), or None when there is none."""
    if (least > most).any():
        return None
    if (matrix @ least >= demand).all():
        return least.copy()
    top = np.maximum(np.abs(matrix).max(axis=1), 1).astype(float)
    """Each row in units of its largest coefficient (the solver sees rooms in nodes)."""
    if ((matrix * (most > 0)).max(axis=1, initial=0) <= 0)[demand > 0].any():
        return None  # a row no usable pool contributes to
    result = milp(
        prices,
        constraints=LinearConstraint(matrix / top[:, None], lb=demand / top),
        integrality=np.ones(len(prices)),
        bounds=Bounds(least, most),
        options={"mip_rel_gap": 0.0},
    )
    if result.x is None:
        return None
    nodes: np.ndarray = np.round(result.x).astype(np.int64)
    if not (matrix @ nodes >= demand).all():
        raise ArithmeticError(f"the solver's mix {tuple(nodes)} misses {tuple(demand)}")
    return nodes
