"""The replay chain on a real control plane (a few minutes): the load driver's usage reaches
the real HPA through KWOK's resource-usage simulation and metrics-server, the HPA scales a
Deployment up and down, Karpenter's KWOK provider adds a node for the pods that do not fit and
consolidates it away when they are gone, and the recorder sees all of it.

The load is a switch the test flips when it has seen the scale-up (no timed phases): high until
the HPA has scaled up and Karpenter's node runs the pods that did not fit, then low until the
HPA has scaled down and a node has been consolidated. The HPA's scale-down stabilisation is
shortened to 15 s (the default 300 s would only make the test longer)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from testkit.cluster_fixture import TUNER_NAMESPACE, ClusterHarness, require_cluster
from testkit.replay.drive import Recording
from testkit.replay.run import install_deploy_objects, replay
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

    def watch(t: float, recording: Recording) -> None:
        s = recording.series
        if not s.time:
            return
        replicas = recording.replicas["shop.web"][-1]
        if not seen and replicas >= 5 and s.nodes[-1] == 2 and s.pending[-1] == 0:
            seen.append(f"scaled up to {replicas} on 2 nodes at t={t:.0f} s")
            load.up = False
        elif len(seen) == 1 and replicas == 1 and s.nodes[-1] == 1:
            seen.append(f"scaled down to 1 on 1 node at t={t:.0f} s")
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
