"""The replay harness' pure parts (testkit/replay): a scenario as API objects, Karpenter's
instance types matched to the simulator's allocatable, evictions by actor from an audit log,
and the comparison's figures. The chain itself runs on the real control plane in
tests/cluster/test_replay.py."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testkit.replay import compare, objects
from testkit.replay.drive import (
    AuditTail,
    LoadDriver,
    PodView,
    Recording,
    actor,
    unschedulable,
)
from tuner.model.conventions import Keys
from tuner.model.quantity import cpu_millis, memory_bytes
from tuner.sim.controls import REREGISTER_DELAY
from tuner.sim.karpenter_disruption import WHEN_EMPTY, KarpenterConfig
from tuner.sim.load import Phase, Phases
from tuner.sim.metrics import TickSeries
from tuner.sim.scenario_file import build, read
from tuner.sim.workloads import MIB, HpaSpec, Service

SCENARIO = build(
    {
        "name": "tiny",
        "hours": 1,
        "speedup": 4,
        "system": "eks",
        "pools": [
            {"name": "small", "node_type": "m5.large", "min": 1, "max": 5, "initial": 2},
            {"name": "big", "node_type": "m5.xlarge", "max": 3, "initial": 1},
        ],
        "services": [
            {
                "name": "web",
                "namespace": "shop",
                "cpu": "250m",
                "memory": "256Mi",
                "hpa": {"min": 2, "max": 9, "target": 0.6},
                "cpu_per_load": 10,
                "pdb_max_unavailable": 1,
            },
            {"name": "db", "namespace": "shop", "kind": "StatefulSet", "cpu": "1", "memory": "1Gi"},
        ],
        "loads": {"shop": {"constant": 5}},
    }
)


def by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        out.setdefault(str(doc["kind"]), []).append(doc)
    return out


def test_workloads_hpas_budgets_and_daemonsets_carry_the_simulators_numbers() -> None:
    docs = by_kind(objects.workload_objects(SCENARIO))
    assert [d["metadata"] for d in docs["Namespace"]] == [{"name": "shop"}]
    web = next(d for d in docs["Deployment"] if d["metadata"]["name"] == "web")
    container = web["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": str(256 * MIB)}
    assert web["spec"]["template"]["metadata"]["labels"][objects.SERVICE_LABEL] == "shop.web"
    (hpa,) = docs["HorizontalPodAutoscaler"]
    spec = hpa["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 9)
    assert spec["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    assert "behavior" not in spec  # the controller's defaults, as the simulator models them
    (budget,) = [b for b in docs["PodDisruptionBudget"] if b["metadata"]["namespace"] == "shop"]
    assert budget["spec"]["maxUnavailable"] == 1
    assert docs["StatefulSet"][0]["metadata"]["name"] == "db"
    daemons = docs["DaemonSet"]
    assert {d["metadata"]["name"] for d in daemons} == {"kube-proxy", "aws-node"}
    assert all(
        d["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}] for d in daemons
    )
    shortened = by_kind(objects.workload_objects(SCENARIO, downscale_s=15))
    behavior = shortened["HorizontalPodAutoscaler"][0]["spec"]["behavior"]
    assert behavior == {"scaleDown": {"stabilizationWindowSeconds": 15}}


def test_a_request_the_simulator_leaves_at_zero_is_not_set() -> None:
    """The simulator reads a 0 request as none set and scores such pods at kube-scheduler's
    non-zero defaults, as the real scheduler scores a pod without requests; an explicit 0 it
    would score as 0 (and pile such pods onto one node until its pod limit)."""
    cache = Service("cache", 0, 0, namespace="shop")
    proxy = Service("kube-proxy", 100, 0, kind="DaemonSet", namespace="kube-system")
    requests = [
        objects.workload(s)["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        for s in (cache, proxy)
    ]
    assert requests == [{}, {"cpu": "100m"}]


def test_fixed_nodes_have_the_simulators_names_labels_and_allocatable() -> None:
    nodes = objects.fixed_nodes(SCENARIO)
    assert [n["metadata"]["name"] for n in nodes] == ["small-0001", "small-0002", "big-0003"]
    small = SCENARIO.pools[0].node_type
    node = nodes[0]
    assert node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] == "small"
    assert node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"
    assert cpu_millis(node["status"]["allocatable"]["cpu"]) == small.allocatable.cpu
    assert memory_bytes(node["status"]["allocatable"]["memory"]) == small.allocatable.memory
    assert node["status"]["allocatable"]["pods"] == "29"


def test_karpenter_instance_types_leave_the_simulators_allocatable() -> None:
    types = {t["name"]: t for t in objects.instance_types(SCENARIO)}
    assert set(types) == {"m5.large", "m5.xlarge"}
    for pool in SCENARIO.pools:
        kind = pool.node_type
        entry = types[kind.name]
        # the KWOK provider subtracts its kube-reserved 100m / 10Mi from these
        assert cpu_millis(entry["resources"]["cpu"]) - 100 == kind.allocatable.cpu
        assert memory_bytes(entry["resources"]["memory"]) - 10 * MIB == kind.allocatable.memory
        assert entry["offerings"][0]["Price"] == kind.price
    pool = objects.node_pool(SCENARIO)
    assert pool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "10%"}],
    }
    claims = objects.node_claims(SCENARIO)
    assert len(claims) == 3
    assert objects.node_class(120.0)["spec"]["nodeRegistrationDelay"] == "120s"


def test_the_node_pool_takes_the_scenarios_consolidation_policy_and_consolidate_after() -> None:
    when_empty = replace(
        SCENARIO, karpenter=KarpenterConfig(consolidation_policy=WHEN_EMPTY, consolidate_after=90)
    )
    disruption = objects.node_pool(when_empty)["spec"]["disruption"]
    assert disruption["consolidationPolicy"] == "WhenEmpty"
    assert disruption["consolidateAfter"] == "90s"


def test_evictions_are_counted_by_actor_from_the_audit_log(tmp_path: Path) -> None:
    def event(agent: str, code: int, subresource: str = "eviction") -> str:
        return json.dumps(
            {
                "stage": "ResponseComplete",
                "verb": "create",
                "userAgent": agent,
                "objectRef": {"resource": "pods", "subresource": subresource},
                "responseStatus": {"code": code},
            }
        )

    log = tmp_path / "audit.log"
    log.write_text(event("karpenter/v1.14.1", 201) + "\n")
    tail = AuditTail(log)
    tail.start_here()
    lines = [
        event("karpenter/v1.14.1", 201),
        event("OpenAPI-Generator/31.0.0/python", 201),
        event("OpenAPI-Generator/31.0.0/python", 429),  # refused by a PDB: no eviction
        event("kubectl/v1.33.13", 201, "status"),
    ]
    with log.open("a") as out:
        out.write("\n".join(lines) + "\n" + event("karpenter/v1", 201))  # last line unfinished
    assert tail.evictions() == {"karpenter": 1, "tuner": 1}
    with log.open("a") as out:
        out.write("\n")
    assert tail.evictions() == {"karpenter": 1}
    assert actor("kube-controller-manager/v1.33.13 (linux/amd64)") == "kube-controller-manager"


def test_the_replica_curve_difference_is_the_mean_absolute_difference_over_the_mean() -> None:
    sim = Recording(replicas={"a.x": [2, 2, 4, 4], "a.y": [1, 1, 1, 1]})
    real = Recording(replicas={"a.x": [2, 3, 3, 4], "a.y": [1, 1, 1]})
    # differences 0,1,1,0 and 0,0,0 over 7 samples; mean of both curves (12+3 + 12+3) / 14
    assert compare.replica_curve_difference(sim, real) == pytest.approx(round(2 / 7 / (30 / 14), 4))
    assert compare.replica_curve_difference(Recording(), Recording()) is None


def test_the_hpa_comparison_pins_the_pools_and_runs_no_autoscaler() -> None:
    played = compare.played(SCENARIO, "hpa")
    assert [(p.min_nodes, p.max_nodes) for p in played.pools] == [(2, 2), (1, 1)]
    recording = compare.simulate(SCENARIO, "hpa", seed=1)
    assert set(recording.series.nodes) == {3}
    assert len(recording.replicas["shop.web"]) == len(recording.series.time)
    assert recording.series.time[0] == 0 and recording.series.time[-1] < SCENARIO.duration
    # demand 50m at load 5 over 250m pods at a 60 % target: the HPA's minimum, 2
    assert set(recording.replicas["shop.web"]) == {2}


def test_a_service_without_hpa_has_no_replica_curve() -> None:
    fixed = Service("db", 100, 0, namespace="x")
    scaled = Service("web", 100, 0, hpa=HpaSpec(1, 3, 0.5), namespace="x")
    assert objects.hpa(fixed) is None and objects.hpa(scaled) is not None


def test_a_pods_usage_is_rewritten_on_every_whole_millicore_that_matters() -> None:
    from testkit.replay.drive import _moved

    assert _moved(None, 55.0)
    assert _moved("54m", 55.0)  # 54 % against 55 %: the HPA's tolerance boundary
    assert not _moved("55m", 55.3)
    assert not _moved("1000m", 1004.0) and _moved("1000m", 1005.0)


def test_a_pods_usage_is_the_demand_averaged_over_the_metric_resolution() -> None:
    # KWOK's counter grows by the annotation's value at each scrape, a kubelet's by what the
    # pod used over the window: the annotation carries the window's average
    stepped = replace(SCENARIO, loads={"shop": Phases(0, (Phase(100, 5), Phase(100, 8)))})
    driver = LoadDriver(stepped, client.CoreV1Api(client.ApiClient()))
    web = next(s for s in stepped.services if s.name == "web")
    assert driver.demand(web, 100) == 80.0  # 10m per load unit
    assert [driver.reported(web, t) for t in (95, 100, 105, 110)] == [50.0, 60.0, 70.0, 80.0]


def test_a_shortened_warmup_is_its_own_comparison_with_its_own_files() -> None:
    """A run played with ``--warmup`` neither joins nor overwrites the entry and curves of the
    same scenario played with its own warm-up; its entry gives the warm-up back to --resimulate."""
    own = compare.Key("karpenter-tuner", "shops", 1.0, 2.0, 1, "shops.json")
    short = compare.Key("karpenter-tuner", "shops", 1.0, 2.0, 1, "shops.json", 600.0)
    entry = {
        "comparison": "karpenter-tuner",
        "scenario": "shops",
        "source": "shops.json",
        "speedup": 1.0,
        "hours": 2.0,
        "seed": 1,
    }
    assert own.matches(entry) and not short.matches(entry)
    assert short.matches(entry | {"warmup": 600.0}) and not own.matches(entry | {"warmup": 600.0})
    assert compare.Key.of(entry | {"warmup": 600.0}) == short
    assert compare.Key.of(entry) == own
    assert own.stem == "karpenter-tuner-shops-x1-2h"
    assert short.stem == "karpenter-tuner-shops-x1-2h-w600s"


def test_pending_pods_are_counted_with_the_schedulers_reason() -> None:
    """Why real pods were pending (the scheduler's message) goes into the run's entry, so that
    a pending gap names its cause."""
    full = client.V1PodCondition(
        type="PodScheduled",
        status="False",
        reason="Unschedulable",
        message="0/4 nodes are available: 4 Insufficient cpu.",
    )
    assert unschedulable([client.V1PodCondition(type="Ready", status="False"), full]) == (
        "0/4 nodes are available: 4 Insufficient cpu."
    )
    assert unschedulable([client.V1PodCondition(type="PodScheduled", status="True")]) == ""

    def view(name: str, node: str | None, why: str = "") -> PodView:
        return PodView("shop", name, "shop.web", node, False, False, 100, 0, None, why)

    recording = Recording()
    for _ in range(3):
        pods = [view("a", None, full.message), view("b", None), view("c", "n1")]
        assert recording.count_pending(pods) == 2
    assert recording.pending_reasons == {
        "shop.web: 0/4 nodes are available: 4 Insufficient cpu.": 3,
        "shop.web: not scheduled yet": 3,
    }


def test_the_replays_own_pod_label_is_no_leftover_of_the_tuners() -> None:
    """Every replayed pod carries the replay's service label, whose key ends in ``tuner.dev``
    too: the cluster harness's leftover check counts only the tuner's own keys."""
    assert not Keys().owns(objects.SERVICE_LABEL)
    assert Keys().owns(f"{Keys().prefix}/shop.web")


def test_a_withdrawn_real_run_counts_in_no_median_and_is_listed_under_the_table() -> None:
    def run(pending: float, **more: Any) -> dict[str, Any]:
        figures = dict.fromkeys(compare.FIGURES, 1.0) | {"pending_pod_seconds": pending}
        return figures | {"replica_curve_difference": 0.02, "load_average_median": 3.0} | more

    entry: dict[str, Any] = {
        "comparison": "hpa",
        "scenario": "shops",
        "speedup": 4,
        "hours": 2.5,
        "real": [run(2985.0, withdrawn="explicit zero requests"), run(100.0)],
    }
    sim = dict.fromkeys(compare.FIGURES, 1.0) | {"pending_pod_seconds": 110.0}
    compare.summarise(entry, sim)
    assert entry["difference"]["pending_pod_seconds"] == pytest.approx(0.1)
    table = compare.table([entry])
    assert "2985" not in table.split("Withdrawn")[0]
    assert "hpa on shops (speedup 4), real run 1: explicit zero requests" in table
    entry["real"][1]["withdrawn"] = "also"
    compare.summarise(entry, sim)
    assert set(entry["difference"].values()) == {None}
    assert "| hpa |" not in compare.table([entry])


def test_a_run_with_another_node_removal_is_its_own_comparison_with_its_own_files() -> None:
    """Runs of the daemon at ``execute.node_removal: delete-node`` never join the entry of the
    default (``autoscaler``, recorded without the key), and the entry gives the setting back to
    --resimulate."""
    left = compare.Key("karpenter-tuner", "pools", 2.0, 1.25, 1, "pools.json")
    deleted = compare.Key(
        "karpenter-tuner", "pools", 2.0, 1.25, 1, "pools.json", None, "delete-node"
    )
    entry = {
        "comparison": "karpenter-tuner",
        "scenario": "pools",
        "source": "pools.json",
        "speedup": 2.0,
        "hours": 1.25,
        "seed": 1,
    }
    assert left.matches(entry) and not deleted.matches(entry)
    tagged = entry | {"node_removal": "delete-node"}
    assert deleted.matches(tagged) and not left.matches(tagged)
    assert compare.Key.of(tagged) == deleted
    assert deleted.stem == "karpenter-tuner-pools-x2-1.25h-delete-node"
    assert left.stem == "karpenter-tuner-pools-x2-1.25h"
    run = dict.fromkeys(compare.FIGURES, 1.0) | {"replica_curve_difference": None}
    entries = [e | {"real": [run | {"load_average_median": 2.0}]} for e in (entry, tagged)]
    for e in entries:
        compare.summarise(e, dict.fromkeys(compare.FIGURES, 1.0))
    rows = compare.table(entries).splitlines()[2:]
    assert [r.split(" | ")[0] for r in rows] == [
        "| karpenter-tuner",
        "| karpenter-tuner (delete-node)",
    ]


def test_the_simulated_karpenter_tuner_deleting_the_node_removes_it_at_once() -> None:
    """``delete-node`` beside Karpenter: the Node's termination finalizer deletes its NodeClaim
    and instance, so the drained node goes when the daemon removes it (not after Karpenter's
    consolidateAfter, as a node left for it does) and no kubelet registers it again."""
    root = Path(__file__).resolve().parents[2]
    scenario = read(root / "bench/scenarios/fidelity-pools-whenempty.json").compressed(2)
    left = compare.simulate(scenario, "karpenter-tuner", 1).series
    deleted = compare.simulate(scenario, "karpenter-tuner", 1, node_removal="delete-node").series

    def first_drop(series: Any) -> int:
        return next(k for k, n in enumerate(series.nodes) if n < series.nodes[0])

    k = first_drop(deleted)
    assert deleted.time[k] < left.time[first_drop(left)]
    after = [n for t, n in zip(deleted.time, deleted.nodes, strict=True) if t >= deleted.time[k]]
    assert max(after[: round(2 * REREGISTER_DELAY / 5)]) == deleted.nodes[k]
    assert compare.figures(deleted, 5.0)["node_hours"] < compare.figures(left, 5.0)["node_hours"]


def test_the_bench_refuses_a_node_removal_where_no_daemon_runs() -> None:
    """``--node-removal`` is the daemon's setting: with another comparison it is a usage error
    (exit 2, one line naming it), before any cluster starts."""
    root = Path(__file__).resolve().parents[2]
    argv = ["--scenario", "shops", "--comparison", "karpenter", "--node-removal", "delete-node"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.replay", *argv],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith(
        "--node-removal delete-node: only with --comparison karpenter-tuner"
    )


def test_each_real_runs_curves_are_numbered_by_its_place_in_the_entry(tmp_path: Path) -> None:
    """Two replays of one comparison (say, started side by side) each keep their own curves:
    run ``n`` of the entry is ``runs/<stem>-real-<n>.json``, numbered when it is added."""
    key = compare.Key("karpenter-tuner", "pools", 2.0, 1.25, 1, "pools.json", None, "delete-node")
    results = tmp_path / "results.json"

    def recording(cost: float) -> Recording:
        series = TickSeries(time=[0.0], load=[1.0], cost=[cost], nodes=[1], pending=[0])
        return Recording(series=replace(series, short=[0], evictions=[0]))

    sim = recording(0.5)
    for cost in (0.43, 0.44):
        curves = recording(cost)
        real = dict.fromkeys(compare.FIGURES, cost) | {
            "replica_curve_difference": None,
            "load_average_median": 2.0,
        }
        entry = compare.add_run(results, key, sim, 5.0, real, curves)
    assert [r["cost"] for r in entry["real"]] == [0.43, 0.44]
    for n, cost in enumerate((0.43, 0.44), 1):
        saved = json.loads((tmp_path / "runs" / f"{key.stem}-real-{n}.json").read_text())
        assert saved["cost"] == [cost]


def test_a_run_whose_curves_were_lost_still_counts_but_is_not_drawn() -> None:
    """A real run whose curves file is missing keeps its figures in the medians; the plot draws
    the others (withdrawn runs neither)."""
    run = dict.fromkeys(compare.FIGURES, 1.0) | {
        "replica_curve_difference": 0.05,
        "load_average_median": 2.0,
    }
    entry: dict[str, Any] = {
        "real": [run | {compare.CURVES_LOST: "overwritten"}, run, run | {"withdrawn": "fault"}]
    }
    compare.summarise(entry, dict.fromkeys(compare.FIGURES, 1.0))
    assert len(compare.counted(entry)) == 2
    assert compare.drawn(entry) == [2]


def test_the_simulated_daemon_starts_with_the_warm_up_as_the_replays_does() -> None:
    """The replay starts ``tuner run`` before it plays the warm-up, so its first stable window
    and its candidate delay can end in the warm-up: on fidelity-pools-whenempty at speedup 2 the
    real daemons removed their node(s) at 300-375 s, not after a first window counted from 0
    (600 s)."""
    root = Path(__file__).resolve().parents[2]
    scenario = read(root / "bench/scenarios/fidelity-pools-whenempty.json").compressed(2)
    series = compare.simulate(scenario, "karpenter-tuner", 1, node_removal="delete-node").series
    first = next(t for t, n in zip(series.time, series.nodes, strict=True) if n < series.nodes[0])
    assert 300 <= first < 600
