"""Does pod P fit on node N: static rules, resources, pod count and anti-affinity."""

from dataclasses import replace

import pytest

from testkit.builders import cluster, node, pod
from tuner.model.constraints import (
    Constraints,
    LabelSelector,
    PodAffinityTerm,
    PreferredTerm,
    Requirement,
    SpreadConstraint,
    Taint,
    Toleration,
)
from tuner.model.scheduling import static_fit
from tuner.model.snapshot import Snapshot


@pytest.mark.parametrize(
    ("operator", "values", "labels", "expected"),
    [
        ("In", ("a", "b"), {"k": "a"}, True),
        ("In", ("a",), {"k": "c"}, False),
        ("In", ("a",), {}, False),
        ("NotIn", ("a",), {"k": "c"}, True),
        ("NotIn", ("a",), {}, True),
        ("NotIn", ("a",), {"k": "a"}, False),
        ("Exists", (), {"k": ""}, True),
        ("Exists", (), {}, False),
        ("DoesNotExist", (), {}, True),
        ("DoesNotExist", (), {"k": "x"}, False),
        ("Gt", ("5",), {"k": "6"}, True),
        ("Gt", ("5",), {"k": "5"}, False),
        ("Lt", ("5",), {"k": "4"}, True),
        ("Lt", ("5",), {"k": "x"}, False),
        ("Lt", ("5",), {}, False),
    ],
)
def test_node_selector_operators(
    operator: str, values: tuple[str, ...], labels: dict[str, str], expected: bool
) -> None:
    assert Requirement("k", operator, values).matches(labels) is expected


def test_taints_need_tolerations() -> None:
    tainted = node("n", taints=(Taint("dedicated", "db", "NoSchedule"),))
    assert "not tolerated" in (static_fit(Constraints(), tainted) or "")
    exact = Constraints(tolerations=(Toleration("dedicated", "Equal", "db", "NoSchedule"),))
    assert static_fit(exact, tainted) is None
    wrong_value = Constraints(tolerations=(Toleration("dedicated", "Equal", "web", "NoSchedule"),))
    assert static_fit(wrong_value, tainted) is not None
    exists_any = Constraints(tolerations=(Toleration(operator="Exists"),))
    assert static_fit(exists_any, tainted) is None
    soft = node("s", taints=(Taint("x", "", "PreferNoSchedule"),))
    assert static_fit(Constraints(), soft) is None
    hard = node("h", taints=(Taint("x", "", "NoExecute"),))
    wrong_effect = Constraints(tolerations=(Toleration("x", "Exists", "", "NoSchedule"),))
    assert static_fit(wrong_effect, hard) is not None


def test_cordon_selector_and_affinity() -> None:
    assert static_fit(Constraints(), node("c", unschedulable=True)) == "node is cordoned"
    selecting = Constraints(node_selector=(("pool", "a"),))
    assert static_fit(selecting, node("a", labels={"pool": "a"})) is None
    assert static_fit(selecting, node("b", labels={"pool": "b"})) is not None
    # required node affinity: terms are ORed, requirements ANDed
    affinity = Constraints(
        node_affinity=(
            (Requirement("zone", "In", ("x",)), Requirement("gpu", "DoesNotExist")),
            (Requirement("pool", "In", ("special",)),),
        )
    )
    assert static_fit(affinity, node("1", labels={"zone": "x"})) is None
    assert static_fit(affinity, node("2", labels={"zone": "x", "gpu": "1"})) is not None
    assert static_fit(affinity, node("3", labels={"pool": "special"})) is None


def _mask(nodes: list, pods: list, candidate) -> list[str]:  # type: ignore[no-untyped-def,type-arg]
    snapshot = Snapshot(cluster(nodes, pods))
    return [n.name for n, ok in zip(nodes, snapshot.fit_mask(candidate), strict=True) if ok]


def test_resources_and_pod_count_limit_the_fit() -> None:
    nodes = [
        node("big", "4", "8Gi"),
        node("small", "1", "1Gi"),
        node("full", "4", "8Gi", max_pods=1),
    ]
    pods = [pod("x-1", "small", "900m", "512Mi"), pod("y-1", "full", "10m", "1Mi")]
    assert _mask(nodes, pods, pod("w-1", None, "200m", "256Mi")) == ["big"]
    assert _mask(nodes, pods, pod("w-1", None, "100m", "512Mi")) == ["big", "small"]


def test_required_anti_affinity_on_hostname_both_ways() -> None:
    term = PodAffinityTerm(LabelSelector((("app", "web"),)), ("default",))
    web = Constraints(anti_affinity=(term,))
    nodes = [node("a"), node("b"), node("c")]
    pods = [pod("web-1", "a", constraints=web), pod("db-1", "b", workload="db")]
    # a second web replica repels, and is repelled by, the first
    assert _mask(nodes, pods, pod("web-2", None, constraints=web)) == ["b", "c"]
    # a plain pod labelled app=web is repelled by the resident's term (symmetry)
    assert _mask(nodes, pods, pod("web-9", None, workload="web")) == ["b", "c"]
    # other namespaces are not selected by the term
    assert _mask(nodes, pods, pod("web-3", None, namespace="other")) == ["a", "b", "c"]


def test_a_fork_reverts_unless_committed_and_forks_nest() -> None:
    nodes = [node("a", "1", "1Gi"), node("b", "1", "1Gi")]
    p = pod("w-1", "a", "600m", "100Mi")
    snapshot = Snapshot(cluster(nodes, [p]))

    def state() -> tuple[object, ...]:
        return tuple((snapshot.requested(n), snapshot.is_open(n)) for n in ("a", "b"))

    before = state()
    with snapshot.forked():
        snapshot.close("a")
        snapshot.move(p, "a", "b")
        assert snapshot.requested("b").cpu == 600 and not snapshot.is_open("a")
    assert state() == before

    def fail() -> None:
        with snapshot.forked():
            snapshot.close("b")
            raise RuntimeError

    with pytest.raises(RuntimeError):
        fail()
    assert state() == before  # an exception reverts too
    with snapshot.forked() as outer:
        with snapshot.forked() as inner:
            snapshot.move(p, "a", "b")
            inner.commit()
        moved = state()
        assert snapshot.requested("a").cpu == 0
        with snapshot.forked():
            snapshot.close("b")
        assert state() == moved
        outer.commit()
    assert state() == moved
    with snapshot.forked():
        snapshot.add_nodes([node("c", "1", "1Gi")])
        snapshot.move(p, "b", "c")
        assert snapshot.names_of(snapshot.fit_mask(pod("x", None, "500m"))) == ["a", "b"]
    assert state() == moved
    assert snapshot.names_of(snapshot.fit_mask(pod("x", None, "500m"))) == ["a"]


def test_preferred_anti_affinity_steers_the_destination_before_the_tightest_fit() -> None:
    away = PodAffinityTerm(LabelSelector((("app", "web"),)), ("default",))
    web = pod(
        "web-2", None, "500m", constraints=Constraints(preferred_anti=(PreferredTerm(50, away),))
    )
    tight = node("tight", "1", "1Gi")
    roomy = node("roomy", "8", "32Gi")
    snapshot = Snapshot(cluster([tight, roomy], [pod("web-1", "tight", "100m")]), arriving=[web])
    mask = snapshot.fit_mask(web)
    assert mask.all()
    assert list(snapshot.honoured(web)) == [0, 50]
    assert snapshot.best_fit(web, mask) == "roomy"  # roomy: it holds no web pod
    plain = replace(web, constraints=Constraints())
    assert Snapshot(cluster([tight, roomy], [])).best_fit(plain, mask) == "tight"


def test_the_refusal_names_the_rule_that_closes_the_last_node() -> None:
    zone = "topology.kubernetes.io/zone"
    spread = Constraints(spread=(SpreadConstraint(1, zone, LabelSelector((("app", "web"),))),))
    nodes = [node("a1", labels={zone: "a"}), node("b1", labels={zone: "b"})]
    pods = [pod("web-1", "a1", constraints=spread), pod("web-2", "b1", constraints=spread)]
    snapshot = Snapshot(cluster(nodes, pods))
    snapshot.close("a1")
    assert not snapshot.fit_mask(pods[0], leaving="a1").any()
    assert snapshot.refusal(pods[0], leaving="a1") == (
        f"topology spread on {zone} (maxSkew 1) would be broken on the 1 node(s) the rules "
        "before it admit"
    )
    assert snapshot.why_not(pods[0], "b1", leaving="a1") == (
        f"topology spread on {zone} (maxSkew 1) would be broken"
    )
