"""Each of the snapshot's batched checks against the one-node rule it batches, one rule at a
time (hypothesis): the resource mask against :func:`~tuner.model.scheduling.resource_fit` at
the boundaries (free exactly the request, no slot left, overcommitted nodes), the two
anti-affinity masks and the topology spread mask (tainted and closed nodes under both node
inclusion policies) against the census's rules, and :meth:`Snapshot.refusal` against
:meth:`Snapshot.fit_mask`.

``test_properties`` holds every rule together on rich random clusters; here each rule is alone,
so a fault in one cannot hide behind another that already rules the node out, and the numbers
are drawn to land on the edges the coarse shapes there rarely reach.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.builders import cluster, node, pod
from tests.unit.test_properties import clusters, fits_alone, move_in_both
from tuner.model import constraints as rules
from tuner.model import scheduling
from tuner.model.census import Census
from tuner.model.cluster import Cluster, Pod
from tuner.model.resources import Resources
from tuner.model.snapshot import Snapshot

APPS = ["a", "b", "c"]
ZONES = ["x", "y"]
ROOMY = ("64", "256Gi")
"""Nodes with room for anything the anti-affinity tests place: only the pod rules decide."""


@st.composite
def loaded(draw: st.DrawFn) -> tuple[Cluster, Pod, str | None]:
    """Nodes with pods placed regardless of fit (some overcommitted), and a pod to place: new,
    or one of them leaving its node."""
    nodes = [
        node(
            f"n{i}",
            f"{draw(st.integers(0, 4)) * 250}m",
            f"{draw(st.integers(0, 4)) * 256}Mi",
            max_pods=draw(st.integers(0, 3)),
        )
        for i in range(draw(st.integers(1, 5)))
    ]
    sizes = st.tuples(st.integers(0, 4), st.integers(0, 4))
    pods = [
        pod(f"p-{i}", f"n{draw(st.integers(0, len(nodes) - 1))}", f"{c * 250}m", f"{m * 256}Mi")
        for i, (c, m) in enumerate(draw(st.lists(sizes, max_size=8)))
    ]
    c = cluster(nodes, pods)
    if pods and draw(st.booleans()):
        moving = draw(st.sampled_from(pods))
        return c, moving, moving.node
    cpu, mem = draw(sizes)
    return c, pod("new-0", None, f"{cpu * 250}m", f"{mem * 256}Mi"), None


@settings(max_examples=300, deadline=None)
@given(loaded(), st.integers(0, 2**32))
def test_the_resource_mask_is_resource_fit_on_every_node(
    case: tuple[Cluster, Pod, str | None], seed: int
) -> None:
    """A pod without constraints fits a node, batched and asked alone, exactly when
    ``resource_fit`` admits it in what the node's other pods leave free; a closed node takes
    nothing."""
    c, candidate, leaving = case
    rng = random.Random(seed)
    snapshot = Snapshot(c)
    closed = {i for i in range(len(c.nodes)) if rng.random() < 0.2}
    for i in closed:
        snapshot.close(c.nodes[i].name)
    mask = snapshot.fit_mask(candidate, leaving=leaving)
    for i, n in enumerate(c.nodes):
        others = [p for p in c.pods_by_node[n.name] if p.key != candidate.key]
        free = n.allocatable - Resources.total([p.requests for p in others])
        expected = (
            i not in closed
            and scheduling.resource_fit(candidate.requests, free, n.max_pods - len(others)) is None
        )
        assert bool(mask[i]) == expected, (n.name, free, n.max_pods - len(others))
        assert (snapshot.why_not(candidate, n.name, leaving=leaving) is None) == expected
    assert (snapshot.refusal(candidate, leaving=leaving) == "it fits") == bool(mask.any())


def _term(draw: st.DrawFn) -> rules.PodAffinityTerm:
    return rules.PodAffinityTerm(
        rules.LabelSelector((("app", draw(st.sampled_from(APPS))),)),
        draw(st.sampled_from([("default",), ("other",), None])),
        draw(st.sampled_from([rules.HOSTNAME_KEY, "zone", "rack"])),
    )


def _with_terms(draw: st.DrawFn, name: str, on: str | None) -> Pod:
    """A pod of a random app and namespace with zero to two required anti-affinity terms."""
    made = pod(
        name,
        on,
        namespace=draw(st.sampled_from(["default", "other"])),
        labels={"app": draw(st.sampled_from(APPS))},
    )
    terms = tuple(_term(draw) for _ in range(draw(st.integers(0, 2))))
    return replace(made, constraints=rules.Constraints(anti_affinity=terms))


@st.composite
def repelling(draw: st.DrawFn) -> tuple[Cluster, Pod]:
    """Roomy nodes in zones (some without a zone label) holding pods with required
    anti-affinity, placed regardless of it, and a new pod with its own terms."""
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        labels = {"zone": draw(st.sampled_from(ZONES))} if draw(st.booleans()) else {}
        nodes.append(node(f"n{i}", *ROOMY, labels=labels))
    pods = [
        _with_terms(draw, f"p{i}-0", f"n{draw(st.integers(0, len(nodes) - 1))}")
        for i in range(draw(st.integers(0, 6)))
    ]
    return cluster(nodes, pods), _with_terms(draw, "new-0", None)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(repelling())
def test_the_anti_affinity_masks_are_the_census_rule(case: tuple[Cluster, Pod]) -> None:
    """Both directions of required pod anti-affinity (the pod's terms against the pods in a
    node's domain, and every placed pod's terms against the pod) decide a node batched, and
    asked alone, exactly as the census decides it one node at a time."""
    c, candidate = case
    snapshot = Snapshot(c, arriving=[candidate])
    census = Census(c.node_by_name, c.pods_by_node)  # type: ignore[arg-type]
    mask = snapshot.fit_mask(candidate)
    for i, n in enumerate(c.nodes):
        why = census.why_not(candidate, n.name)
        assert bool(mask[i]) == (why is None), (n.name, why)
        assert (snapshot.why_not(candidate, n.name) is None) == (why is None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 2**32))
def test_the_refusal_names_a_rule_exactly_when_no_allowed_node_fits(c: Cluster, seed: int) -> None:
    """``refusal`` (the rules applied one after another over the nodes) says "it fits" exactly
    when ``fit_mask`` admits one of the allowed nodes, for every pod leaving its node and every
    random set of allowed nodes."""
    rng = random.Random(seed)
    snapshot = Snapshot(c)
    for n in c.nodes:
        if rng.random() < 0.2:
            snapshot.close(n.name)
    for candidate in c.pods:
        leaving = candidate.node
        allowed = np.array([rng.random() < 0.7 for _ in c.nodes], dtype=np.bool_)
        for among in (None, allowed):
            mask = snapshot.fit_mask(candidate, leaving=leaving)
            if among is not None:
                mask &= among
            refusal = snapshot.refusal(candidate, among, leaving=leaving)
            assert (refusal == "it fits") == bool(mask.any()), (candidate.key, refusal)


@st.composite
def spreading(draw: st.DrawFn) -> tuple[Cluster, Pod, dict[int, bool]]:
    """Roomy nodes in zones, some tainted, some closed (being removed or only kept out of),
    holding pods of one app placed
    regardless of its spread constraints (hard or soft, either node inclusion policy), and one
    more of them to place."""
    nodes = []
    for i in range(draw(st.integers(2, 6))):
        labels = {"zone": draw(st.sampled_from([*ZONES, "w"]))} if draw(st.integers(0, 4)) else {}
        taints = (rules.Taint("dedicated", "gpu"),) if draw(st.integers(0, 3)) == 0 else ()
        nodes.append(node(f"n{i}", *ROOMY, labels=labels, taints=taints))
    spread = tuple(
        rules.SpreadConstraint(
            max_skew=draw(st.integers(1, 2)),
            topology_key=draw(st.sampled_from([rules.HOSTNAME_KEY, "zone"])),
            selector=rules.LabelSelector((("app", "a"),)),
            hard=draw(st.booleans()),
            min_domains=draw(st.integers(1, 3)),
            honor_node_affinity=draw(st.booleans()),
            honor_taints=draw(st.booleans()),
        )
        for _ in range(draw(st.integers(1, 2)))
    )
    selector = (("zone", draw(st.sampled_from(ZONES))),) if draw(st.booleans()) else ()
    constraints = rules.Constraints(node_selector=selector, spread=spread)
    pods = [
        replace(pod(f"a-{i}", f"n{draw(st.integers(0, len(nodes) - 1))}"), constraints=constraints)
        for i in range(draw(st.integers(0, 8)))
    ]
    closed = draw(
        st.dictionaries(st.integers(0, len(nodes) - 1), st.booleans(), min_size=1, max_size=3)
    )
    new = replace(pod("a-new", None), constraints=constraints)
    return cluster(nodes, pods), new, closed


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spreading())
def test_the_spread_masks_are_the_census_rule_with_closed_nodes(
    case: tuple[Cluster, Pod, dict[int, bool]],
) -> None:
    """Topology spread, hard and soft, with tainted and closed nodes under both node inclusion
    policies, decides a node batched exactly as static fit and the census do one node at a
    time: a node being removed is cordoned for the scheduler, a node a plan only keeps out of
    is not (its pods count as they did)."""
    c, candidate, closed = case
    snapshot = Snapshot(c, arriving=[candidate])
    census = Census(c.node_by_name, c.pods_by_node)  # type: ignore[arg-type]
    for i, removed in closed.items():
        snapshot.close(c.nodes[i].name, removed=removed)
        if removed:
            census.cordon(c.nodes[i].name)
    mask = snapshot.fit_mask(candidate)
    for i, n in enumerate(c.nodes):
        why = scheduling.static_fit(candidate.constraints, n) or census.why_not(
            candidate, n.name, soft=True
        )
        assert bool(mask[i]) == (i not in closed and why is None), (n.name, why)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.integers(0, 2**32))
def test_nodes_added_in_a_fork_obey_every_rule_and_leave_with_it(c: Cluster, seed: int) -> None:
    """Nodes added inside a fork (as replace and the previous-deployment option add a pool's
    new nodes) are asked like the cluster's own: every pod's batched mask equals static fit,
    resources and the census node by node, new nodes included, after pods moved onto them; when
    the fork ends every mask is what it was before."""
    rng = random.Random(seed)
    snapshot = Snapshot(c)
    census = Census(dict(c.node_by_name), c.pods_by_node)  # type: ignore[arg-type]
    before = [snapshot.fit_mask(p, leaving=p.node).tolist() for p in c.pods]
    where = {p.key: p.node or "" for p in c.pods}
    new = [
        replace(c.nodes[rng.randrange(len(c.nodes))], name=f"new+{i}", unschedulable=False)
        for i in range(rng.randint(1, 3))
    ]
    with snapshot.forked():
        snapshot.add_nodes(new)
        for n in new:
            census.add_node(n.name, n)
        movers = [p for p in c.pods if not p.follows_node]
        for pod in rng.sample(movers, min(len(movers), 4)):
            source = where[pod.key]
            fits = snapshot.names_of(snapshot.fit_mask(pod, leaving=source))
            targets = [n for n in fits if n.startswith("new+")]
            move_in_both(snapshot, census, where, pod, targets, rng)
        nodes = [*c.nodes, *new]
        for pod in c.pods:
            source = where[pod.key]
            mask = snapshot.fit_mask(pod, leaving=source)
            census.remove(source, pod)
            for i, n in enumerate(nodes):
                expected = fits_alone(pod, n, census)
                assert bool(mask[i]) == expected, (pod.key, n.name)
            census.add(source, pod)
    assert [snapshot.fit_mask(p, leaving=p.node).tolist() for p in c.pods] == before
