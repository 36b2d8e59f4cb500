"""The room to hold ahead of a forecast rise: a pure decision, the same for the daemon's keeper
and the simulator's.

1. The demand the rise asks for *by the time a node started now could serve and the next cycle
   could start another* (:func:`lead_edge`): the forecast's expected load over ``(now, now +
   forecast.node_startup_s + windows.retry_s]`` (its path), never above the upper edge of its
   band. A rise due later is the business of a later cycle (a cycle runs at least every
   ``windows.retry_s`` while reserving is on: :func:`~tuner.cycle.run_cycle`); holding room for
   it now only pays for a node before anything needs it. The pods each HPA-scaled workload
   adds by then (:func:`~tuner.model.demand.demand_for`) beyond those its HPA asks at the load
   now (:func:`rise_adds`: a step it takes at the load there is now is the autoscaler's to
   meet as its pods come), each like one of its pods now (its requests and scheduling rules).
2. In a fork of the cluster's scheduling simulation (:class:`~tuner.model.snapshot.Snapshot`,
   every rule of the real scheduler), the pods pending now are placed first where they fit
   (they take room before the forecast's pods; those that fit nowhere are their autoscaler's
   business already), then the added pods, largest first, by best fit on the nodes there are.
3. What fits nowhere is packed, largest first, onto new nodes: a pod goes to a new node opened
   already where it fits, else opens one of the cheapest pool whose template runs it (the
   template with the DaemonSet pods that would start there, as a replace sees a new node) and
   that may still grow, unless another such pool holds the pod for markedly less per hour
   (:data:`MARKEDLY_CHEAPER`; its node's price times the share of the node's room the pod
   takes): then that pool's. A larger node pays for all its room while the rise has not
   filled it, and a false alarm pays all of it, so a node type only slightly cheaper per pod
   is not worth that (``diurnal-week``: m5.xlarge holds a pod for 5 to 8 % less than m5.large;
   opening it took the reserve row from 46 % to 27 % of the room); one much cheaper is
   (``heldout-bikeshare``: e2-standard-8 for 29 % less than n1-standard-2, whose nodes the
   cheapest-node rule kept opening where the bound runs on e2-standard-8). One
   :class:`~tuner.model.reserve.ReservedNode` per new node, asking the requests of the pods
   packed there (never more than the template's allocatable).
4. At most ``forecast.reserve_max_nodes`` nodes (0: nothing is ever reserved); the reserve holds
   until the end of the forecast's horizon, and a keeper removes each placeholder the next
   reserve no longer asks for (:func:`matched`).
5. A placeholder removed that way leaves the node it was bound to empty when no real pod took
   it: a false alarm. With ``execute.node_removal: command`` or ``delete-node`` the keeper
   releases that node at once (cordon, verified empty but DaemonSet pods, removed as a drained
   node is) instead of leaving it to the autoscaler's unneeded time
   (:func:`releases` says when it may). One still pending then waits for the node it asked
   for, at most a node's start-up and two retries after it was made (:func:`awaits_its_node`):
   the autoscaler is adding that node already, and it is released once the placeholder is
   bound to it.

The rise the forecast expects is held for, not only one its band's lower edge confirms: while
reserving, a release by a proven forecast leaves room only for the band over the lead
(:func:`~tuner.model.demand.decided_by`), counting on the reserve for a rise due later, so the
reserve must provision the rise the release did not keep room for. (Asking the lower edge to be
above the load now, and its pods to fit nowhere, held nothing on a noisy load, whose lower edge
is a quarter under the expected load: on ``diurnal`` only a spike of the day before, while the
removals the shorter headroom allowed left the rises waiting.) A false alarm pays a node's
start-up and a retry or two: its node is released at once (5.) when no real pod took it.

Only a forecast that foresees (:attr:`~tuner.model.forecast.Forecast.foresees`): one seasonal
(by day or week) whose band was measured from at least
:data:`~tuner.model.forecast.MIN_ERRORS` past errors. A forecast on the recent level only
(less than a day of history), or with a band widened for want of measured errors, has an upper
edge that says how little it knows (at least +50 %), not a rise: holding room for it would buy
half the HPAs' pods again, all the time, for nothing foreseen. And only a forecast that has
proven it calls rises (:attr:`~tuner.model.forecast.Forecast.proven`): re-made from the past
times whose outcome is known, at least :data:`~tuner.model.forecast.MIN_CONFIRMED` of its calls
of a rise over the lead (more than the HPAs' 10 % tolerance above the load then) came true (the
load rose at least half the called rise). A load whose rises the forecast has not yet seen come
(a day of history, a calm week) gets no node ahead (measured: docs/concepts.md, provisioning
ahead).

Placeholders standing (pods labelled ``<prefix>/placeholder``) are the reserve itself, not
demand: they are left out, and a node one is bound to counts as reserved (closed to the pods
placed in step 2: it is there only because the reserve asked for it), so the same forecast asks
for the same nodes again and the keeper keeps their placeholders until the real pods come.

Both keepers (the daemon's :mod:`tuner.execute.reserve`, the simulator's
:mod:`tuner.sim.reserve`) match the placeholders standing to a reserve the same way
(:func:`matched`, :func:`still_wanted`): per pool, whatever their requests; one preempted by the
real pods is not made again while the reserve that made it holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from tuner.model.change import NewNode, daemon_pods, templates
from tuner.model.cluster import Cluster, Pod, Workload
from tuner.model.conventions import Keys
from tuner.model.demand import demand_for, lead_band
from tuner.model.forecast import MIN_CONFIRMED, Forecast
from tuner.model.movability import disruption_blocker
from tuner.model.pools import NodePool, Pools
from tuner.model.price import node_price
from tuner.model.reserve import Placeholder, Reserve, ReservedNode
from tuner.model.resources import Resources
from tuner.model.snapshot import Snapshot
from tuner.settings import Settings

MARKEDLY_CHEAPER = 0.2
"""How much less a pool must cost per pod held than the cheapest node's pool for a new node of it
to be opened instead: a larger node pays for all its room while the rise has not filled it."""


def plan_reserve(
    cluster: Cluster, pools: Pools, forecast: Forecast | None, settings: Settings, now: float
) -> Reserve:
    """The nodes to hold for the rise ``forecast`` (made at ``now``) expects; none when there is
    no forecast, when it foresees nothing, when the demand at the load it expects over the lead
    fits, or when reserving is off."""
    cap = settings.forecast.reserve_max_nodes
    if forecast is None:
        return Reserve(now, now, reason="no forecast: nothing reserved")
    until = forecast.at + forecast.horizon_s
    if cap <= 0:
        return Reserve(forecast.at, until, reason="forecast.reserve_max_nodes is 0: off")
    placeholder = Keys(settings.execute.label_prefix).placeholder
    lead = settings.forecast.lead(settings.windows)
    edge = lead_edge(forecast, lead)
    peak = (
        f"forecast {edge:.4g} expected over the next {lead:.0f} s (upper band "
        f"{forecast.peak.upper:.4g}) against {forecast.last:.4g} now"
    )
    if not forecast.foresees:
        why = f"{peak}: nothing foreseen ({forecast.confidence})"
        return Reserve(forecast.at, until, reason=why)
    if not forecast.proven:
        why = (
            f"{peak}: no rise call proven yet ({forecast.confirmed} of its {forecast.calls} "
            f"past rise calls confirmed, {MIN_CONFIRMED} needed)"
        )
        return Reserve(forecast.at, until, reason=why)
    held = {p.node for p in cluster.pods if placeholder in p.labels and p.node is not None}
    cluster = replace(cluster, pods=tuple(p for p in cluster.pods if placeholder not in p.labels))
    added = rise_adds(cluster, forecast, edge)
    if not added:
        return Reserve(forecast.at, until, reason=f"{peak}: the rise adds no pod")
    arriving, unfit, snapshot = _unfit(cluster, held, added)
    what = f"{peak}: {len(arriving)} pods added"
    if not unfit:
        return Reserve(forecast.at, until, reason=f"{what}, all fit in the nodes there are")
    packing = _Packing(snapshot, cluster, pools, settings)
    for pod in unfit:
        packing.pack(pod, cap)
    nodes = tuple(
        ReservedNode(new.pool.name, Resources.total([p.requests for p in packing.pods[new.name]]))
        for new in packing.opened
    )
    left = len(unfit) - sum(len(p) for p in packing.pods.values())
    reason = f"{what}, {len(unfit)} fit in no node there is: {len(nodes)} new node(s)"
    reserve = Reserve(forecast.at, until, nodes)
    if nodes:
        reason += f" ({pools_text(reserve)})"
    if left:
        reason += f"; {left} pod(s) left out: {packing.why_not}"
    return replace(reserve, reason=reason)


def _unfit(
    cluster: Cluster, held: set[str], added: Mapping[Workload, int]
) -> tuple[list[Pod], list[Pod], Snapshot]:
    """The pods ``added`` (each like one of its workload's pods, largest first), those of them
    that fit in no node there is, and the snapshot they were placed in: the nodes a placeholder
    is bound to (``held``) closed, the pending pods placed first."""
    like = templates(cluster)
    arriving = [
        replace(like[w], name=f"{like[w].name}+{i}", node=None)
        for w, count in added.items()
        for i in range(1, count + 1)
    ]
    arriving.sort(key=lambda p: (-p.requests.cpu, -p.requests.memory, p.key))
    snapshot = Snapshot(cluster, arriving)
    for node in sorted(held):
        snapshot.close(node, removed=False)
    for pod in cluster.pods:
        if pod.node is None:
            _place_where_it_fits(snapshot, pod)
    return arriving, [pod for pod in arriving if not _place_where_it_fits(snapshot, pod)], snapshot


def rise_adds(cluster: Cluster, forecast: Forecast, edge: float) -> dict[Workload, int]:
    """The pods each HPA-scaled workload adds at the load ``edge`` beyond those its HPA asks at
    the load now (:attr:`~tuner.model.forecast.Forecast.last`): a step the HPA takes at the
    load there is now is the autoscaler's to meet as the pods come, not a rise foreseen."""
    then = demand_for(cluster, forecast, edge).workloads
    now = demand_for(cluster, forecast, forecast.last).workloads
    adds = {w: r.then - max(r.now, now[w].then) for w, r in then.items()}
    return {w: n for w, n in adds.items() if n > 0}


def lead_edge(forecast: Forecast, lead: float) -> float:
    """The load to hold room for: the highest the forecast expects over ``(at, at + lead]`` (its
    path; its expected peak when it has none), never above its band's upper edge."""
    near = lead_band(forecast, lead)
    return min(near.expected, near.upper)


def still_wanted(
    reserve: Reserve, taken: Sequence[Placeholder], now: float
) -> tuple[ReservedNode, ...]:
    """The reserve's nodes less, per pool, one for each placeholder ``taken`` (preempted by the
    real pods it held room for) while the reserve that made it holds; nothing once ``reserve``
    ended."""
    if reserve.until <= now:
        return ()
    pools = [h.pool for h in taken if h.until > now]
    wanted = []
    for node in reserve.nodes:
        if node.pool in pools:
            pools.remove(node.pool)
        else:
            wanted.append(node)
    return tuple(wanted)


def matched(
    wanted: Sequence[ReservedNode], standing: Sequence[Placeholder]
) -> tuple[list[Placeholder], list[Placeholder], list[ReservedNode]]:
    """Per pool, the standing placeholders kept for the nodes asked (bound ones first, then the
    oldest name), those no longer asked for, and the nodes no placeholder holds yet. A
    placeholder is kept whatever its requests: a new one would only ask the autoscaler for
    another node."""
    keep: list[Placeholder] = []
    missing: list[ReservedNode] = []
    free = sorted(standing, key=lambda h: (h.node is None, h.name))
    for node in wanted:
        found = next((h for h in free if h.pool == node.pool), None)
        if found is None:
            missing.append(node)
        else:
            free.remove(found)
            keep.append(found)
    return keep, free, missing


def awaits_its_node(
    held: Placeholder, made: float | None, now: float, settings: Settings, removal: str
) -> bool:
    """Whether a placeholder no reserve asks for any more is kept until the node it asked for
    joins, to be released with it (:func:`releases`) rather than left empty to the autoscaler:
    with a removal that releases at once, while it is pending and was made (at ``made``; None:
    not by this keeper) at most a node's start-up and two retries ago (the hold after its node
    joined finds it bound). Past that its node is not coming: it goes as any other."""
    if removal == "autoscaler" or held.node is not None or made is None:
        return False
    windows = settings.windows
    return now - made <= settings.forecast.lead(windows) + windows.retry_s


def releases(
    leaving: Sequence[Placeholder], cluster: Cluster, pools: Pools, settings: Settings, removal: str
) -> dict[str, str | None]:
    """Per node one of the placeholders ``leaving`` is bound to, why it may not be released
    through ``removal`` (``execute.node_removal``) once they are gone, or None: it may. Nothing
    with ``autoscaler`` (the autoscaler removes an empty node in its own time). Released is a
    node no real pod took: only DaemonSet (and mirror) pods and leaving placeholders on it, no
    pending pod that would fit there once they are gone (it would have preempted them: that is
    what the node was for), nobody holding it (:func:`~tuner.model.movability.
    disruption_blocker`), and its pool above its minimum with the nodes released before it."""
    if removal == "autoscaler":
        return {}
    label = Keys(settings.execute.label_prefix).placeholder
    names = {h.name for h in leaving}
    real = replace(cluster, pods=tuple(p for p in cluster.pods if label not in p.labels))
    pending = [p for p in real.pods if p.node is None]
    snapshot = Snapshot(real) if pending else None
    spare: dict[str, int] = {}
    verdicts: dict[str, str | None] = {}
    for name in dict.fromkeys(h.node for h in leaving if h.node is not None):
        why = _kept(cluster, name, names, label, snapshot, pending)
        pool = pools.of(name)
        if why is None and pool is not None:
            left = spare.setdefault(pool.name, pools.spare(pool.name))
            why = f"pool {pool.name} is at its minimum" if left <= 0 else None
            spare[pool.name] = left - 1
        verdicts[name] = why
    return verdicts


def _kept(
    cluster: Cluster,
    name: str,
    leaving: set[str],
    label: str,
    snapshot: Snapshot | None,
    pending: Sequence[Pod],
) -> str | None:
    """Why node ``name`` is kept whatever its pool: gone, holding a pod that is neither a
    DaemonSet (or mirror) pod nor a placeholder ``leaving``, held by someone, or a pending pod
    fits there (``snapshot``: the cluster without placeholders); None: none of these."""
    node = cluster.node_by_name.get(name)
    if node is None:
        return f"node {name} is gone"
    for pod in cluster.pods_by_node.get(name, ()):
        ours = label in pod.labels
        if not pod.follows_node and not (ours and pod.name in leaving):
            return f"node {name} holds " + ("another placeholder" if ours else f"pod {pod.key}")
    blocker = disruption_blocker(node, removing=True)
    if blocker is not None:
        return f"node {name}: {blocker}"
    fits = next((p for p in pending if snapshot and snapshot.why_not(p, name) is None), None)
    return None if fits is None else f"pending pod {fits.key} fits on node {name}"


def per_pool(reserve: Reserve) -> dict[str, int]:
    """How many nodes the reserve asks of each pool, by pool name."""
    return dict(sorted(Counter(n.pool for n in reserve.nodes).items()))


def pools_text(reserve: Reserve) -> str:
    """``2 of small, 1 of large`` (``no node`` for an empty reserve)."""
    return ", ".join(f"{c} of {p}" for p, c in per_pool(reserve).items()) or "no node"


def _place_where_it_fits(snapshot: Snapshot, pod: Pod) -> bool:
    """Place the pod by best fit on a node it fits (True), or nowhere (False)."""
    mask = snapshot.fit_mask(pod)
    if not mask.any():
        return False
    snapshot.place(pod, snapshot.best_fit(pod, mask))
    return True


class _Packing:
    """New nodes opened in the snapshot for the pods that fit nowhere, and what each holds."""

    def __init__(self, snapshot: Snapshot, cluster: Cluster, pools: Pools, settings: Settings):
        self.snapshot = snapshot
        self.cluster = cluster
        self.pools = pools
        self.room = {name: pools.room(name) for name in pools.by_name}
        self.price = {n: node_price(p.template, settings.pricing) for n, p in pools.by_name.items()}
        self.by_price = sorted(pools.by_name.values(), key=lambda p: (self.price[p.name], p.name))
        self.usable: dict[str, Resources] = {}
        """Per pool, the room a new node offers pods: allocatable less its DaemonSet pods."""
        self.opened: list[NewNode] = []
        self.pods: dict[str, list[Pod]] = {}
        self.why_not = ""

    def pack(self, pod: Pod, cap: int) -> None:
        """Put the pod on a new node opened already, else on a new one of the cheapest pool
        that runs it (while fewer than ``cap`` are open); else say why not."""
        snapshot = self.snapshot
        if self.opened:
            mask = snapshot.fit_mask(pod) & snapshot.mask_of(n.name for n in self.opened)
            if mask.any():
                target = snapshot.best_fit(pod, mask)
                snapshot.place(pod, target)
                self.pods[target].append(pod)
                return
        if len(self.opened) >= cap:
            self.why_not = f"forecast.reserve_max_nodes {cap} reached"
            return
        for pool in self._preferred(pod):
            if self._opens(pool, pod):
                return
        self.why_not = f"no pool that may grow has a node that would run {pod.workload}"

    def _preferred(self, pod: Pod) -> list[NodePool]:
        """The pools in the order a new node for ``pod`` is tried: the cheapest node first,
        unless a pool holds the pod for at least :data:`MARKEDLY_CHEAPER` less per hour (its
        node's price times the share of the node's room the pod takes): that pool first."""
        held = [(c, p) for p in self.by_price if (c := self._holding(p, pod)) is not None]
        if not held:
            return self.by_price
        best_cost, best = min(held, key=lambda h: h[0])
        if best_cost > (1 - MARKEDLY_CHEAPER) * held[0][0]:
            return self.by_price
        return [best, *(p for p in self.by_price if p is not best)]

    def _holding(self, pool: NodePool, pod: Pod) -> float | None:
        """What holding ``pod`` on a new node of ``pool`` costs per hour: the node's price times
        the largest share of its room (allocatable less its DaemonSet pods) the pod asks; None
        when it does not fit."""
        room = self.usable.get(pool.name)
        if room is None:
            node = pool.template
            daemons = Resources.total([d.requests for d in daemon_pods(self.cluster, node)])
            room = self.usable[pool.name] = node.allocatable - daemons
        if room.cpu <= 0 or room.memory <= 0:
            return None
        share = max(pod.requests.cpu / room.cpu, pod.requests.memory / room.memory)
        if share > 1:
            return None
        return self.price[pool.name] * share

    def _opens(self, pool: NodePool, pod: Pod) -> bool:
        """Open a new node of ``pool`` with ``pod`` on it, if the pool may grow and the pod
        fits there (else leave the snapshot as it was)."""
        room = self.room[pool.name]
        if room is not None and room <= 0:
            return False
        snapshot = self.snapshot
        new = NewNode(f"{pool.name}+reserve-{len(self.opened) + 1}", pool)
        with snapshot.forked() as fork:
            snapshot.add_nodes([new.node])
            for daemon in daemon_pods(self.cluster, new.node):
                snapshot.place(daemon, new.name)
            if snapshot.why_not(pod, new.name) is not None:
                return False
            snapshot.place(pod, new.name)
            fork.commit()
        self.opened.append(new)
        self.pods[new.name] = [pod]
        if room is not None:
            self.room[pool.name] = room - 1
        return True
