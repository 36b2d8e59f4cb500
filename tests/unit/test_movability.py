"""What the tuner may move and which nodes it may remove."""

from dataclasses import replace

import pytest

from testkit.builders import cluster, node, pod
from tuner.model.cluster import Pdb
from tuner.model.constraints import LabelSelector, Taint
from tuner.model.movability import Policy, assess

POLICY = Policy(excluded_namespaces=frozenset({"kube-system"}))


@pytest.mark.parametrize(
    ("kind", "movable"),
    [
        ("Deployment", True),
        ("ReplicaSet", True),
        ("StatefulSet", False),
        ("Job", False),
        ("", False),
    ],
)
def test_only_deployment_and_replicaset_pods_move(kind: str, movable: bool) -> None:
    p = pod("w-1", "n1", kind=kind)
    assert assess(cluster([node("n1")], [p]), POLICY).movable(p) is movable


def test_daemonset_pods_follow_their_node_and_do_not_block_removal() -> None:
    ds = pod("proxy-1", "n1", kind="DaemonSet")
    result = assess(cluster([node("n1")], [ds]), POLICY)
    assert not result.movable(ds)
    assert "n1" not in result.node_reasons


@pytest.mark.parametrize(
    ("annotations", "reason"),
    [
        ({"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}, "safe-to-evict=false"),
        ({"karpenter.sh/do-not-disrupt": "true"}, "do-not-disrupt=true"),
    ],
)
def test_opt_out_annotations_pin_pods(annotations: dict[str, str], reason: str) -> None:
    p = pod("w-1", "n1", annotations=annotations)
    result = assess(cluster([node("n1")], [p]), POLICY)
    assert reason in result.pod_reasons[p.key]
    assert "holds unmovable pod default/w-1" in result.node_reasons["n1"]


def test_excluded_namespaces_are_not_touched() -> None:
    p = pod("coredns-1", "n1", namespace="kube-system")
    assert not assess(cluster([node("n1")], [p]), POLICY).movable(p)
    assert assess(cluster([node("n1")], [p]), Policy(frozenset())).movable(p)


def test_exhausted_pdb_pins_its_pods_only() -> None:
    web, api = pod("web-1", "n1"), pod("api-1", "n1")
    pdb = Pdb("default", "web", LabelSelector((("app", "web"),)), disruptions_allowed=0)
    result = assess(cluster([node("n1")], [web, api], (pdb,)), POLICY)
    assert "PodDisruptionBudget default/web" in result.pod_reasons[web.key]
    assert result.movable(api)
    roomy = Pdb("default", "web", LabelSelector((("app", "web"),)), disruptions_allowed=1)
    assert assess(cluster([node("n1")], [web], (roomy,)), POLICY).movable(web)


def test_a_kube_system_pod_a_pdb_covers_moves_as_the_cluster_autoscaler_lets_it() -> None:
    dns = pod("coredns-1", "n1", namespace="kube-system", labels={"app": "coredns"})
    heapster = pod("heapster-1", "n1", namespace="kube-system", labels={"app": "heapster"})
    select = LabelSelector((("app", "coredns"),))
    allows = Pdb("kube-system", "coredns", select, disruptions_allowed=1)
    result = assess(cluster([node("n1")], [dns, heapster], (allows,)), POLICY)
    assert result.movable(dns)
    assert "namespace kube-system is excluded" in result.pod_reasons[heapster.key]
    assert "holds unmovable pod kube-system/heapster-1" in result.node_reasons["n1"]
    assert "n1" not in assess(cluster([node("n1")], [dns], (allows,)), POLICY).node_reasons
    spent = replace(allows, disruptions_allowed=0)
    pinned = assess(cluster([node("n1")], [dns], (spent,)), POLICY)
    assert "PodDisruptionBudget kube-system/coredns" in pinned.pod_reasons[dns.key]


def test_a_pdb_frees_no_pod_of_another_excluded_namespace() -> None:
    tuner = pod("tuner-1", "n1", namespace="tuner", labels={"app": "tuner"})
    pdb = Pdb("tuner", "tuner", LabelSelector((("app", "tuner"),)), disruptions_allowed=1)
    policy = Policy(excluded_namespaces=frozenset({"kube-system", "tuner"}))
    result = assess(cluster([node("n1")], [tuner], (pdb,)), policy)
    assert "namespace tuner is excluded" in result.pod_reasons[tuner.key]


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"labels": {"node-role.kubernetes.io/control-plane": ""}}, "control-plane"),
        (
            {"annotations": {"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"}},
            "scale-down-disabled",
        ),
        ({"annotations": {"karpenter.sh/do-not-disrupt": "true"}}, "do-not-disrupt"),
        (
            {"taints": (Taint("ToBeDeletedByClusterAutoscaler", "1", "NoSchedule"),)},
            "another autoscaler",
        ),
        ({"taints": (Taint("karpenter.sh/disrupted", "", "NoSchedule"),)}, "another autoscaler"),
    ],
)
def test_protected_nodes_are_not_removable(kwargs: dict, reason: str) -> None:  # type: ignore[type-arg]
    result = assess(cluster([node("n1", **kwargs)], []), POLICY)
    assert reason in result.node_reasons["n1"]


def test_a_deletion_candidate_of_the_cluster_autoscaler_is_removable() -> None:
    taint = Taint("DeletionCandidateOfClusterAutoscaler", "1", "PreferNoSchedule")
    result = assess(cluster([node("n1", taints=(taint,))], []), POLICY)
    assert "n1" not in result.node_reasons


def test_the_2019_tuners_policy_keeps_off_every_node_an_autoscaler_marked() -> None:
    taint = Taint("DeletionCandidateOfClusterAutoscaler", "1", "PreferNoSchedule")
    strict = replace(POLICY, deletion_candidates=False)
    result = assess(cluster([node("n1", taints=(taint,))], []), strict)
    assert "another autoscaler" in result.node_reasons["n1"]
