"""What a removal or a replacement must leave room for (``analyse.headroom``).

- ``forecast`` with a forecast: the pods the HPAs would run at the upper edge of the forecast's
  peak (:func:`~tuner.model.demand.forecast_demand`) must fit in the nodes left — in total (the
  linear candidate check and the check after a drain, as the thresholds are checked), and, for
  up to :data:`FIT_LIMIT` added pods, one by one where the scheduler would put them in the
  drained snapshot (so that free room scattered in slivers over many nodes does not pass for
  room). The fixed thresholds do not apply: the forecast says how much room the next minutes
  need, where a threshold guesses it.
- ``forecast`` without one (forecast disabled, no history yet, Prometheus down), or with one
  not sure enough to plan by (:attr:`~tuner.model.forecast.Forecast.foresees`: under a day of
  history, or a band measured from too few past errors), and ``thresholds``: requests over
  allocatable and over usable capacity stay under ``analyse.thresholds`` (the 2019 rule).
- ``none``: nothing beyond the pods moved fitting now.

Under ``forecast`` and ``thresholds`` a change also leaves room for the **next step** of every
HPA-scaled workload, each on its own (:func:`~tuner.model.demand.next_steps`): the pods its HPA
adds at its smallest step up must fit, one by one, where the scheduler would put them. Free room
in total is not enough: a cluster packed until every node keeps less than one pod's request
free makes the next scale-up of any workload wait a node's start-up (on the large scenario the
removals left 3.6 free cores in slivers of at most 0.13 core, and every 0.2-core pod an HPA
added waited for a new node). Each step on its own is not enough either: every HPA that last
measured its metric at or above its target (not yet past its tolerance) is one small rise from
its next step, and those steps, all together, must fit where the scheduler would put them
(:func:`imminent_steps`). On the large scenario, with each step checked on its own only, the
removals left the nodes so full that the HPAs' ordinary steps up soon found no room: twelve
removals, ten nodes the Cluster Autoscaler added back, each after pods waited its start-up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tuner.analyse.usable import under_thresholds
from tuner.model.change import templates
from tuner.model.cluster import Cluster, Node, Pod
from tuner.model.conventions import Keys
from tuner.model.demand import Demand, decided_by, forecast_demand, next_step, next_steps
from tuner.model.forecast import Band, Forecast
from tuner.model.resources import Resources
from tuner.settings import Settings, Thresholds

FIT_LIMIT = 256
"""Up to this many pods added at the forecast's peak are fitted one by one after a drain; more
are checked in total only (each fit is one pass over the nodes, per drain tried)."""


def vanishing(pods: Iterable[Pod]) -> Resources:
    """The requests that go with a node when it goes (its DaemonSet and static pods)."""
    return Resources.total([p.requests for p in pods if p.follows_node])


@dataclass(frozen=True)
class Headroom:
    """The room a change must leave: the forecast's demand, or the thresholds."""

    thresholds: Thresholds
    demand: Demand | None = None
    """What the forecast's upper band asks for (None: the thresholds apply)."""
    band: Band | None = None
    """The forecast peak the demand comes from."""
    last: float = 0.0
    """The load now the peak was scaled from."""
    steps: tuple[tuple[Pod, int], ...] = ()
    """One pod of each HPA-scaled workload and the pods its next step adds, to fit each on its
    own (:func:`~tuner.model.demand.next_steps`; none under ``none``)."""
    imminent: tuple[tuple[Pod, int], ...] = ()
    """One pod and the next step of each workload whose HPA stands at or above its target, to
    fit all together (:func:`imminent_steps`; none under ``none``)."""

    @staticmethod
    def of(cluster: Cluster, settings: Settings, forecast: Forecast | None) -> Headroom:
        """The headroom the settings ask for, with the cycle's forecast (None: none)."""
        mode = settings.analyse.headroom
        if mode == "none":
            return Headroom(Thresholds())
        steps, imminent = next_steps(cluster), imminent_steps(cluster)
        forecast = decided_by(forecast, settings)
        if mode == "forecast" and forecast is not None and forecast.foresees:
            placeholder = Keys(settings.execute.label_prefix).placeholder
            demand, band = forecast_demand(cluster, forecast, placeholder)
            return Headroom(Thresholds(), demand, band, forecast.last, steps, imminent)
        return Headroom(settings.analyse.thresholds, steps=steps, imminent=imminent)

    def why(self, detail: str = "") -> str:
        """Why a change leaves too little room for the forecast, in the user's words."""
        extra = f": {detail}" if detail else ""
        if self.band is None:
            return f"the forecast needs the room{extra}"
        return (
            f"the forecast peak {self.band.upper:.6g} (expected {self.band.expected:.6g}, "
            f"now {self.last:.6g}) needs it{extra}"
        )

    def passes_check(
        self, requested: Resources, allocatable: Resources, node: Node, pods: Iterable[Pod]
    ) -> bool:
        """The linear candidate check: without ``node``'s allocatable and the requests of its
        pods that go with it, the cluster's requests (``requested`` now, or the forecast's
        demand) fit the allocatable left (within the thresholds)."""
        gone = vanishing(pods)
        left = allocatable - node.allocatable
        if self.demand is None:
            return under_thresholds(requested - gone, left, self.thresholds)
        return (self.demand.requests - gone).fits_in(left)

    def holds(
        self, requested: Resources, change: Resources, capacities: Iterable[Resources]
    ) -> bool:
        """Whether, after a change that changes the requests by ``change`` (new nodes' DaemonSet
        pods in, the drained nodes' out), the requests (``requested`` now, or the forecast's
        demand) fit each of ``capacities`` (the allocatable and the usable capacity left),
        within the thresholds."""
        if self.demand is None:
            after = requested + change
            return all(under_thresholds(after, c, self.thresholds) for c in capacities)
        needed = self.demand.requests + change
        return all(needed.fits_in(c) for c in capacities)

    def added_pods(self, cluster: Cluster) -> tuple[Pod, ...] | None:
        """One pod per pod each workload adds at the forecast's peak, as its pods are now (to fit
        one by one); None when there are more than :data:`FIT_LIMIT` or no forecast."""
        if self.demand is None:
            return None
        added = self.demand.added
        if sum(added.values()) > FIT_LIMIT:
            return None
        like = templates(cluster)
        return tuple(like[w] for w, n in added.items() for _ in range(n))


IMMINENT_RATIO = 1.0
"""An HPA whose last measured metric is at least this share of its target (at or above it, not
yet past its tolerance) is one small rise from its next step up."""


def imminent_steps(cluster: Cluster) -> tuple[tuple[Pod, int], ...]:
    """One pod and the next step up (:func:`~tuner.model.demand.next_step`) of every
    HPA-scaled workload whose HPA last measured its metric at or above its target
    (:data:`IMMINENT_RATIO`), the highest ratio first, up to :data:`FIT_LIMIT` pods in all."""
    counts = cluster.pods_per_workload
    like = templates(cluster)
    near = sorted(
        (h for h in cluster.hpas if h.usage_ratio is not None and h.usage_ratio >= IMMINENT_RATIO),
        key=lambda h: -(h.usage_ratio or 0.0),
    )
    steps: list[tuple[Pod, int]] = []
    left = FIT_LIMIT
    for hpa in near:
        added = min(next_step(counts.get(hpa.target, 0), hpa.max_replicas), left)
        if hpa.target in like and added > 0:
            steps.append((like[hpa.target], added))
            left -= added
    return tuple(steps)
