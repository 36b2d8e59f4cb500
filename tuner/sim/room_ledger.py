"""The room ledger: where a tuner's row leaves the room, by cause and by node
(``tuner simulate --ledger``).

At each tick after the warm-up the row's **uncaptured room** is its billed price per hour minus
the lower bound's at that tick (:mod:`tuner.sim.bound`, over CA alone's pods); over the run it
sums (times the tick) to the row's cost minus the bound's. The ledger attributes each tick's
uncaptured room twice:

- *by cause*: to the tuner's state at the tick, the outcome of its last cycle (:func:`cause`):
  a window not acted on (``window: unstable``, with the decline rule's refusal when it was
  asked: ``window: unstable, decline not-falling``), a stay with the removal option's refusal
  (``removal refused: no_candidate``, ``no_room``, ``forecast``, ``candidate_delay``,
  ``pool_at_minimum``, ...), or a change (``acted: remove_nodes``);
- *by node*: per pool, the row's nodes beyond the bound's count of that pool carry the room (a
  pool the bound holds more of than the row counts negative: the bound buys that type
  instead). Of a pool's nodes, those the tuner had the best chance to remove are taken as the
  ones beyond the bound (:func:`rank`), each with the tuner's verdict on it at its last
  analysed cycle (:func:`verdicts`): a removal ``candidate`` (``, hard spread`` when it holds a
  pod of a hard zone spread), ``fails the candidate check`` (the room left would not hold the
  forecast's demand, or the thresholds), ``pinned: <what>`` (it holds a pod the tuner may not
  move, the most lasting kind named: a StatefulSet's, a ``kube-system`` pod, one annotated so,
  one whose PodDisruptionBudget allows no disruption, one of a workload that changed during
  the window), ``node: <why>``
  (the node itself may not go: cordoned, taken back from the autoscaler, changed during the
  window), ``not judged yet`` (it joined, or became ready, after the tuner's last look).

So a ``no_candidate`` tells apart nothing movable (every node beyond the bound ``pinned``),
no room elsewhere (``fails the candidate check`` under the thresholds) and headroom for the
forecast (the same under a forecast, which the removal reports as ``forecast``). The ledger
only reads what the cycle reported: nothing it records changes a decision.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tuner.cycle import CycleReport, Outcome
from tuner.model.cluster import Cluster, Pod
from tuner.model.constraints import ZONE_KEY
from tuner.model.movability import DO_NOT_DISRUPT, MOVABLE_OWNERS, SAFE_TO_EVICT, Movability
from tuner.sim.engine import Simulation
from tuner.sim.strategies.tuner import ProjectTuner

NO_CYCLE = "no cycle yet"
CANDIDATE = "candidate"
FAILS_CHECK = "fails the candidate check"
UNJUDGED = "not judged yet"
PAST_END = "past the run's end"
"""The cause of the ticks a run goes on after the scenario's end while the tuner waits for a
provisioned node (:meth:`~tuner.sim.engine.Simulation.advance`): its cost counts in the row's,
no bound's beside it."""
BEYOND = "the bound's nodes beyond the row's"
"""The verdict of a pool the bound holds more nodes of than the row (negative room)."""
ACTED = frozenset({Outcome.ACTED, Outcome.FAILED, Outcome.HELD, Outcome.SKIPPED})


def cause(report: CycleReport) -> str:
    """The one outcome a cycle stands for in the ledger (see the module)."""
    if report.plan is not None:
        analysis = report.plan.analysis
        if report.outcome in ACTED:
            return f"{report.outcome.value}: {analysis.decision.value}"
        refusal = analysis.proposals[0].refusal
        if refusal is not None:
            return f"removal refused: {refusal.name.lower()}"
        return analysis.decision.value
    label = f"window: {report.outcome.value}"
    if report.decline is not None and not report.decline.holds:
        return f"{label}, decline {report.decline.kind}"
    return label


def _pinned_by(pod: Pod, cluster: Cluster, excluded: frozenset[str]) -> tuple[int, str]:
    """What keeps an unmovable pod in place (:func:`tuner.model.movability.pod_blocker`'s
    reasons, by kind), the most lasting first: its owner, its namespace, an annotation, a
    PodDisruptionBudget, a change during the window."""
    if pod.owner_kind not in MOVABLE_OWNERS:
        return 0, f"{pod.owner_kind or 'bare'} pod"
    if pod.namespace in excluded:
        return 1, f"{pod.namespace} pod"
    if pod.annotations.get(SAFE_TO_EVICT) == "false" or pod.annotations.get(DO_NOT_DISRUPT):
        return 2, "annotated pod"
    if any(p.disruptions_allowed < 1 and p.covers(pod) for p in cluster.pdbs):
        return 3, "PDB-blocked pod"
    return 4, "pod changed during the window"


def _hard_spread(pod: Pod) -> bool:
    return any(s.hard and s.topology_key == ZONE_KEY for s in pod.constraints.spread)


def verdicts(
    cluster: Cluster, movability: Movability, candidates: frozenset[str], excluded: frozenset[str]
) -> dict[str, str]:
    """The tuner's verdict on each node of an analysed cycle (see the module)."""
    found: dict[str, str] = {}
    for node in cluster.nodes:
        pods = cluster.pods_by_node[node.name]
        reason = movability.node_reasons.get(node.name)
        if reason is not None:
            pins = [
                _pinned_by(p, cluster, excluded) for p in pods if p.key in movability.pod_reasons
            ]
            node_why = reason.split(":")[0]
            found[node.name] = f"pinned: {min(pins)[1]}" if pins else f"node: {node_why}"
        elif node.name not in candidates:
            found[node.name] = FAILS_CHECK
        elif any(_hard_spread(p) for p in pods if movability.movable(p)):
            found[node.name] = f"{CANDIDATE}, hard spread"
        else:
            found[node.name] = CANDIDATE
    return found


def rank(verdict: str) -> int:
    """Which of a pool's nodes are taken as those beyond the bound: the ones the tuner had the
    best chance to remove first (candidates, then nodes failing the check, then those it has
    not judged, then nodes it may not remove now, then nodes pinned by a pod)."""
    if verdict.startswith(CANDIDATE):
        return 0 if verdict == CANDIDATE else 1
    order = (FAILS_CHECK, UNJUDGED, "node: ", "pinned: pod changed")
    return next((2 + i for i, start in enumerate(order) if verdict.startswith(start)), 6)


@dataclass(frozen=True, slots=True)
class Segment:
    """Consecutive ticks with the same cause and the same nodes by pool, price and verdict."""

    ticks: int
    cause: str
    nodes: tuple[tuple[str, float, str, int], ...]
    """(pool, price per hour, verdict, how many), sorted."""


@dataclass
class RoomTrace:
    """What the ledger records of one run, one entry a tick, run-length coded."""

    segments: list[Segment] = field(default_factory=list)

    def add(self, cause: str, nodes: tuple[tuple[str, float, str, int], ...]) -> None:
        """One more tick."""
        last = self.segments[-1] if self.segments else None
        if last is not None and last.cause == cause and last.nodes == nodes:
            self.segments[-1] = Segment(last.ticks + 1, cause, nodes)
        else:
            self.segments.append(Segment(1, cause, nodes))

    @property
    def ticks(self) -> int:
        """Ticks recorded."""
        return sum(s.ticks for s in self.segments)


class LedgerRecorder:
    """Records a tuner's run for the ledger: each cycle's cause and verdicts (a watcher of the
    tuner), each tick's nodes (a watcher of the simulation)."""

    def __init__(self, sim: Simulation, tuner: ProjectTuner) -> None:
        self.sim = sim
        self.excluded = tuner.settings.analyse.excluded_namespaces
        self.trace = RoomTrace()
        self.cause = NO_CYCLE
        self.verdicts: dict[str, str] = {}
        tuner.watchers.append(self.cycle)
        sim.watchers.append(self.tick)

    def cycle(self, _now: float, report: CycleReport) -> None:
        """Keep the cycle's cause and, when it analysed the cluster, its verdicts."""
        self.cause = cause(report)
        if report.plan is not None and report.cluster is not None:
            analysis = report.plan.analysis
            self.verdicts = verdicts(
                report.cluster, analysis.movability, analysis.candidates, self.excluded
            )

    def tick(self) -> None:
        """Record the tick: the cause and the billed nodes by pool, price and verdict."""
        counts = Counter(
            (n.pool, n.type.price, self.verdicts.get(name, UNJUDGED))
            for name, n in self.sim.cluster_state.nodes.items()
        )
        self.trace.add(self.cause, tuple(sorted((*k, c) for k, c in counts.items())))


@dataclass(frozen=True)
class Ledger:
    """One row's uncaptured room over a run, by cause and by node (module docstring)."""

    scenario: str
    strategy: str
    currency: str
    ca_cost: float
    row_cost: float
    bound_cost: float
    by_cause: Mapping[str, float]
    """Uncaptured cost per cause."""
    hours: Mapping[str, float]
    """Hours spent in each cause."""
    by_node: Mapping[tuple[str, str], float]
    """Uncaptured cost per (pool, verdict)."""
    by_cause_node: Mapping[tuple[str, str], float]
    """Uncaptured cost per (cause, verdict)."""
    pool_types: Mapping[str, str] = field(default_factory=dict)
    """Each pool's node type."""

    @property
    def uncaptured(self) -> float:
        """The row's cost minus the bound's."""
        return self.row_cost - self.bound_cost


def beyond_bound(
    nodes: Iterable[tuple[str, float, str, int]],
    bound: Mapping[str, int],
    prices: Mapping[str, float],
) -> dict[tuple[str, str], float]:
    """Price per hour of the row's nodes beyond the bound's, by (pool, verdict); a pool the bound
    holds more of counts negative."""
    by_pool: dict[str, list[tuple[str, float, int]]] = defaultdict(list)
    for pool, price, verdict, count in nodes:
        by_pool[pool].append((verdict, price, count))
    split: dict[tuple[str, str], float] = defaultdict(float)
    for pool in sorted(set(by_pool) | set(bound)):
        held = sorted(by_pool.get(pool, []), key=lambda v: (rank(v[0]), v[0]))
        excess = sum(c for _, _, c in held) - bound.get(pool, 0)
        if excess < 0:
            split[pool, BEYOND] += excess * prices[pool]
        for verdict, price, count in held:
            taken = min(count, max(excess, 0))
            if taken:
                split[pool, verdict] += taken * price
            excess -= taken
    return split


def room_ledger(
    strategy: str,
    trace: RoomTrace,
    row_costs: list[float],
    ca_cost: float,
    bound: Iterable[tuple[float, tuple[int, ...]]],
    pools: Iterable[tuple[str, float, str]],
    tick: float,
    names: tuple[str, str] = ("", ""),
) -> Ledger:
    """The ledger of one row: ``trace`` and ``row_costs`` (price per hour at each tick) of its
    run, CA alone's cost, the bound per tick (price per hour, nodes per pool in the order of
    ``pools``: (name, price per hour, node type)), the tick in seconds; ``names``: scenario,
    currency."""
    pool_list = list(pools)
    prices = {name: price for name, price, _ in pool_list}
    order = [name for name, _, _ in pool_list]
    hour = tick / 3600
    by_cause: dict[str, float] = defaultdict(float)
    hours: dict[str, float] = defaultdict(float)
    by_node: dict[tuple[str, str], float] = defaultdict(float)
    by_cause_node: dict[tuple[str, str], float] = defaultdict(float)
    memo: dict[tuple[int, tuple[int, ...]], dict[tuple[str, str], float]] = {}
    bounds = list(bound)
    if trace.ticks != len(row_costs) or len(row_costs) < len(bounds):
        raise ValueError(
            f"the trace has {trace.ticks} ticks, the run {len(row_costs)}, the bound {len(bounds)}"
        )
    past = (0.0, (0,) * len(order))
    bound_cost = 0.0
    at = 0
    for index, segment in enumerate(trace.segments):
        for _ in range(segment.ticks):
            rate, counts = bounds[at] if at < len(bounds) else past
            name = segment.cause if at < len(bounds) else PAST_END
            bound_cost += rate * hour
            by_cause[name] += (row_costs[at] - rate) * hour
            hours[name] += hour
            key = (index, counts)
            if key not in memo:
                memo[key] = beyond_bound(
                    segment.nodes, dict(zip(order, counts, strict=True)), prices
                )
            for (pool, verdict), price in memo[key].items():
                by_node[pool, verdict] += price * hour
                by_cause_node[name, verdict] += price * hour
            at += 1
    row_cost = sum(row_costs) * hour
    return Ledger(
        names[0],
        strategy,
        names[1],
        ca_cost,
        row_cost,
        bound_cost,
        dict(by_cause),
        dict(hours),
        dict(by_node),
        dict(by_cause_node),
        {name: kind for name, _, kind in pool_list},
    )


def _share(part: float, whole: float) -> str:
    return f"{part / whole * 100:.0f} %" if whole else "—"


def _pool_name(ledger: Ledger, pool: str) -> str:
    """A pool as the tables name it: with its node type when that is not its name."""
    kind = ledger.pool_types.get(pool, "")
    return f"{pool} ({kind})" if kind and kind != pool else pool


def ledger_table(ledger: Ledger, top: int = 3) -> str:
    """The ledger as Markdown: by cause (with the verdicts on the nodes carrying it), then by
    pool and verdict."""
    room = ledger.ca_cost - ledger.bound_cost
    left = ledger.uncaptured
    currency = ledger.currency
    lines = [
        f"#### {ledger.scenario}, {ledger.strategy}: {left:.3f} {currency} of the room left "
        f"({_share(left, room)} of CA alone above the bound: CA alone {ledger.ca_cost:.3f}, "
        f"the row {ledger.row_cost:.3f}, the bound {ledger.bound_cost:.3f})",
        "",
        "| the tuner's last cycle | hours | room left | share | carried by (nodes beyond the "
        "bound, by the tuner's verdict) |",
        "|---|---:|---:|---:|---|",
    ]
    for name, cost in sorted(ledger.by_cause.items(), key=lambda c: -abs(c[1])):
        carried = sorted(
            ((v, c) for (k, v), c in ledger.by_cause_node.items() if k == name and abs(c) > 5e-4),
            key=lambda vc: -abs(vc[1]),
        )
        shown = "; ".join(f"{v} {c:.3f}" for v, c in carried[:top])
        more = f"; {len(carried) - top} more" if len(carried) > top else ""
        lines.append(
            f"| {name} | {ledger.hours[name]:.2f} | {cost:.3f} | {_share(cost, left)} "
            f"| {shown}{more} |"
        )
    lines += ["", "| pool | the tuner's verdict | room left | share |", "|---|---|---:|---:|"]
    for (pool, verdict), cost in sorted(ledger.by_node.items(), key=lambda c: -abs(c[1])):
        if abs(cost) > 5e-4:
            lines.append(
                f"| {_pool_name(ledger, pool)} | {verdict} | {cost:.3f} | {_share(cost, left)} |"
            )
    return "\n".join(lines)


SUMMARY_BEGIN = "<!-- ledger:begin -->"
SUMMARY_END = "<!-- ledger:end -->"
"""The markers of the summary table in a document (``tuner simulate --ledger-doc``)."""
SUMMARY_HEADER = (
    "| scenario | row | room left (share of the room CA alone leaves) | by cause (share of "
    "what is left, hours) | carried by (the row's nodes beyond the bound, cost) |",
    "|---|---|---|---|---|",
)
NEGLIGIBLE = 5e-4
"""Costs below this (in the scenario's currency) are not shown."""


def _money(value: float) -> str:
    if abs(value) < NEGLIGIBLE:
        return "0"
    return f"{value:.3f}" if abs(value) < 1 else f"{value:.2f}"


def _largest(items: Iterable[tuple[str, float]], top: int) -> str:
    """The ``top`` items of largest magnitude, then how many more."""
    shown = sorted((i for i in items if abs(i[1]) > NEGLIGIBLE), key=lambda i: -abs(i[1]))
    more = f"; {len(shown) - top} more" if len(shown) > top else ""
    return "; ".join(text for text, _ in shown[:top]) + more or "—"


def summary_row(ledger: Ledger, top: int = 4) -> str:
    """The ledger as one row of the summary table (:data:`SUMMARY_HEADER`): the room left,
    the ``top`` causes and the ``top`` (pool, verdict) pairs carrying it, largest first."""
    room = ledger.ca_cost - ledger.bound_cost
    left = ledger.uncaptured
    share = _share(left, room) if abs(room) > NEGLIGIBLE else "CA alone is at the bound"
    cells = [
        ledger.scenario,
        ledger.strategy,
        f"{_money(left)} of {_money(room)} {ledger.currency} ({share})",
        "—",
        "—",
    ]
    if abs(left) > NEGLIGIBLE:
        cells[3] = _largest(
            (
                (f"`{name}` {_share(cost, left)} ({ledger.hours[name]:.1f} h)", cost)
                for name, cost in ledger.by_cause.items()
            ),
            top,
        )
        cells[4] = _largest(
            (
                (f"{_pool_name(ledger, pool)} `{verdict}` {_money(cost)}", cost)
                for (pool, verdict), cost in ledger.by_node.items()
            ),
            top,
        )
    return "| " + " | ".join(cells) + " |"


def merged_summary(old: str, rows: Sequence[str], header: Sequence[str] = SUMMARY_HEADER) -> str:
    """The table (``header`` and rows) of ``old``'s rows (the text between the markers:
    another run's table, or anything else, which is dropped) with ``rows`` in place of those
    of the same scenario and row, new ones appended: runs over different scenario files fill
    one table."""
    table: dict[tuple[str, ...], str] = {}
    lines = old.splitlines()
    if tuple(lines[: len(header)]) == tuple(header):
        table = {_row_key(line): line for line in lines[len(header) :] if line.strip()}
    for row in rows:
        table[_row_key(row)] = row
    return "\n".join((*header, *table.values()))


def _row_key(row: str) -> tuple[str, ...]:
    """A summary row's scenario and row."""
    return tuple(cell.strip() for cell in row.strip().strip("|").split("|")[:2])
