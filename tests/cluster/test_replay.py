"""The replay chain on a real control plane (a few minutes): the load driver's usage reaches
the real HPA through KWOK's resource-usage simulation and metrics-server, the HPA scales a
Deployment up and down, Karpenter's KWOK provider adds a node for the pods that do not fit and
consolidates it away when they are gone, and the recorder sees all of it; the executor reads
the utilisation the real HPA measured (what spares its replicas in a wave).

The load is a switch the test flips when it has seen the scale-up (no timed phases): high until
the HPA has scaled up and Karpenter's node runs the pods that did not fit, then low until the
HPA has scaled down and a node has been consolidated. The HPA's scale-down stabilisation is
shortened to 15 s (the default 300 s would only make the test longer)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client, config

from testkit.cluster_fixture import TUNER_NAMESPACE, ClusterHarness, require_cluster
from testkit.replay.drive import Recording
from testkit.replay.run import install_deploy_objects, replay
from tuner.execute.kube import Kube
from tuner.settings import Execute
from tuner.sim.autoscaler import AutoscalerConfig
from tuner.sim.engine import Scenario
from tuner.sim.pools import NodeGroup
from tuner.sim.prices import NODE_TYPES
from tuner.sim.workloads import MIB, HpaSpec, Service

pytestmark = pytest.mark.cluster

WEB = Service("web", 500, 128 * MIB, hpa=HpaSpec(1, 6, 0.5), cpu_per_load=100.0, namespace="shop")
"""500m pods, 50 % target: 100m at load 1 is one pod, 1200m at load 12 five (a +4 step), of
which an e2-standard-2 (1930m allocatable) holds three."""
TIMEOUT_S = 600.0


@dataclass
class Switch:
    """A load the test flips from high to low."""

    high: float = 12.0
    low: float = 1.0
    up: bool = False

    def __call__(self, t: float) -> float:
        return self.high if self.up and t >= 0 else self.low


@dataclass
class HpaReader:
    """The executor's read of the utilisation the HPA over shop/web measured, each time asked,
    beside the HPA's own status read just before and just after it (an HPA sync may come
    between), on the replay's private control plane (found by its kubeconfig under
    ``workdir``)."""

    workdir: Path
    read: list[tuple[float | None, set[float]]] = field(default_factory=list)
    kube: Kube | None = None

    def __call__(self) -> None:
        if self.kube is None:
            (kubeconfig,) = self.workdir.glob("**/kubeconfig.yaml")
            configuration = client.Configuration()
            config.load_kube_config(str(kubeconfig), client_configuration=configuration)
            self.kube = Kube(client.ApiClient(configuration), Execute(), threading.Event())
        before = self._status()
        read = self.kube.hpa_utilisation("shop", "Deployment", "web")
        self.read.append((read, {before, self._status()}))

    def _status(self) -> float:
        assert self.kube is not None
        (hpa,) = self.kube.autoscaling.list_namespaced_horizontal_pod_autoscaler("shop").items
        (metric,) = hpa.status.current_metrics
        return float(metric.resource.current.average_utilization) / 100


def test_replayed_load_scales_the_real_hpa_and_karpenter_adds_then_consolidates_a_node(
    tmp_path: Path,
) -> None:
    require_cluster()
    load = Switch(up=True)
    scenario = Scenario(
        name="smoke",
        title="replay smoke test",
        services=(WEB,),
        daemonsets=(),
        loads={"shop": load},
        pools=(NodeGroup("small", NODE_TYPES["e2-standard-2"], 0, 3, 1),),
        duration=TIMEOUT_S,
        autoscaler=AutoscalerConfig(provisioning_delay=5.0),
        warmup=15.0,
    )
    stop = threading.Event()
    seen: list[str] = []
    hpa = HpaReader(tmp_path)

    def watch(t: float, recording: Recording) -> None:
        s = recording.series
        if not s.time:
            return
        replicas = recording.replicas["shop.web"][-1]
        if not seen and replicas >= 5 and s.nodes[-1] == 2 and s.pending[-1] == 0:
            seen.append(f"scaled up to {replicas} on 2 nodes at t={t:.0f} s")
            hpa()
            load.up = False
        elif len(seen) == 1 and replicas == 1 and s.nodes[-1] == 1:
            seen.append(f"scaled down to 1 on 1 node at t={t:.0f} s")
            hpa()
            stop.set()

    result = replay(scenario, "karpenter", tmp_path, progress=watch, stop=stop, downscale_s=15.0)
    s = result.recording.series
    replicas = result.recording.replicas["shop.web"]
    summary = (
        f"seen {seen}; nodes {s.nodes[::6]}; pending {s.pending[::6]}; replicas {replicas[::6]}"
    )
    assert len(seen) == 2, summary
    assert max(s.pending) > 0, summary  # the two pods Karpenter's node was added for
    assert s.cost[-1] == pytest.approx(NODE_TYPES["e2-standard-2"].price), summary
    assert result.patches > 0, summary
    # The executor reads what the HPA measured: once scaled up, and once scaled down.
    assert len(hpa.read) == 2, (hpa.read, summary)
    for read, status in hpa.read:
        assert read in status, (hpa.read, summary)


def test_the_daemons_deploy_objects_go_onto_a_control_plane_that_has_the_tuners_namespace(
    kube: ClusterHarness,
) -> None:
    """The karpenter-tuner replay installs deploy/'s Namespace and PriorityClass beside the
    Namespace the cluster harness made (a 409 on it once stopped the replay before its start),
    and again over both."""
    install_deploy_objects(kube)
    install_deploy_objects(kube)
    assert kube.core.read_namespace(TUNER_NAMESPACE).metadata.name == TUNER_NAMESPACE
    scheduling = client.SchedulingV1Api(kube.api)
    assert scheduling.read_priority_class("deployment-tuner-placeholder").value < 0
