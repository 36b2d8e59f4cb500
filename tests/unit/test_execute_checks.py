"""The executor's re-validation of a fresh pod or node gives the analysis's answer
(hypothesis): a pod it may evict is one :func:`~tuner.model.movability.assess` calls movable in
the cluster the monitor parses from the same objects, a node it may touch is one ``assess``
would let a plan remove, its pods and the window's policy aside."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tuner.execute.checks import destination_refusal, new_pod_on, node_refusal, not_movable
from tuner.model.movability import DO_NOT_DISRUPT, SAFE_TO_EVICT, Policy, assess
from tuner.monitor.dump import cluster_from_objects

OWNERS = ["ReplicaSet", "StatefulSet", "DaemonSet", "Job", "Node", "Deployment"]
NONE = Policy(excluded_namespaces=frozenset())


def _node(annotations: dict[str, str], taints: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": "n1", "annotations": annotations, "labels": {}},
        "spec": {"taints": taints},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    """A running pod: any owner (controller or not, or none), the annotations that forbid
    moving, in any namespace."""
    refs = [
        {"kind": kind, "name": "w", "controller": draw(st.booleans()), "apiVersion": "v1"}
        for kind in draw(st.lists(st.sampled_from(OWNERS), max_size=2))
    ]
    annotations = {
        key: draw(st.sampled_from(["true", "false"]))
        for key in draw(st.sets(st.sampled_from([SAFE_TO_EVICT, DO_NOT_DISRUPT])))
    }
    if draw(st.integers(0, 5)) == 0:
        annotations["kubernetes.io/config.mirror"] = "x"
    return {
        "kind": "Pod",
        "metadata": {
            "name": "w-1",
            "namespace": draw(st.sampled_from(["default", "kube-system"])),
            "ownerReferences": refs,
            "annotations": annotations,
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


@given(pods())
def test_the_executor_evicts_a_pod_only_when_the_analysis_calls_it_movable(
    doc: dict[str, Any],
) -> None:
    """With no operator policy (the executor's own view), both agree on every owner (a pod
    whose owners are none of them its controller is a bare pod to both) and annotation."""
    cluster = cluster_from_objects([_node({}, []), doc])
    (pod,) = cluster.pods
    expected = assess(cluster, NONE).movable(pod)
    assert (not_movable(doc) is None) == expected, not_movable(doc)
    if not any(r["controller"] for r in doc["metadata"]["ownerReferences"]):
        assert not_movable(doc) is not None


TAINTS = [
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
    "karpenter.sh/disrupted",
    "dedicated",
]


@given(
    st.dictionaries(st.sampled_from([DO_NOT_DISRUPT, "other"]), st.sampled_from(["true", "x"])),
    st.lists(st.sampled_from(TAINTS), max_size=2, unique=True),
)
def test_the_executor_touches_a_node_only_when_the_analysis_would_remove_it(
    annotations: dict[str, str], taint_keys: list[str]
) -> None:
    """A node without pods, cordon or control-plane role: the executor refuses it exactly when
    the analysis would not remove it."""
    doc = _node(annotations, [{"key": k, "effect": "NoSchedule"} for k in taint_keys])
    cluster = cluster_from_objects([doc])
    removable = "n1" not in assess(cluster, NONE).node_reasons
    assert (node_refusal(doc) is None) == removable, node_refusal(doc)


def test_a_deletion_candidate_may_be_emptied_but_receives_no_pod() -> None:
    doc = _node({}, [{"key": "DeletionCandidateOfClusterAutoscaler", "effect": "PreferNoSchedule"}])
    assert node_refusal(doc) is None
    refusal = destination_refusal(doc)
    assert refusal is not None and "DeletionCandidateOfClusterAutoscaler" in refusal
    deleting = _node({}, [{"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoSchedule"}])
    assert node_refusal(deleting) is not None and destination_refusal(deleting) is not None


def _new_pod(node: str | None, ready: bool) -> SimpleNamespace:
    condition = SimpleNamespace(type="Ready", status="True" if ready else "False")
    return SimpleNamespace(
        metadata=SimpleNamespace(uid="new", name="web-2", deletion_timestamp=None),
        spec=SimpleNamespace(node_name=node),
        status=SimpleNamespace(conditions=[condition], phase="Running"),
    )


def test_a_replacement_scaled_in_before_it_was_ready_leaves_nothing_to_wait_for() -> None:
    """The HPA scales the workload in while the replacement starts: the ReplicaSet deletes the
    unready pod first, and the move is done (not a wait until the verification timeout)."""
    check = new_pod_on(frozenset({"old"}), {"n1": "its source"})
    assert check({}) is None  # evicted, no replacement yet: wait
    assert check({"new": _new_pod("n2", ready=False)}) is None  # starting: wait
    verdict = check({})
    assert verdict is not None and verdict.ok and verdict.node is None


def test_a_ready_replacement_off_its_source_is_verified_where_it_is() -> None:
    check = new_pod_on(frozenset({"old"}), {"n1": "its source"})
    verdict = check({"new": _new_pod("n2", ready=True)})
    assert verdict is not None and verdict.ok and verdict.node == "n2"
