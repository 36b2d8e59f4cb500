"""Self-test of the Prometheus test harness: a real Prometheus scraping the test exporter."""

from __future__ import annotations

import time

import pytest

from testkit.exporter import ExportedDeployment, ExportedNode, ExportedPod
from testkit.prometheus_fixture import PrometheusHarness

pytestmark = pytest.mark.prometheus

NS = "shop"


def _two_nodes_three_pods(prometheus: PrometheusHarness) -> None:
    prometheus.exporter.set_cluster(
        nodes=["node-a", ExportedNode("node-b", cpu_cores=4, memory_bytes=16e9)],
        pods=[
            ExportedPod(NS, "web-5f7d8-aaaaa", "node-a", "ReplicaSet", "web-5f7d8"),
            ExportedPod(NS, "web-5f7d8-bbbbb", "node-b", "ReplicaSet", "web-5f7d8"),
            ExportedPod(
                NS,
                "web-5f7d8-ccccc",
                "node-b",
                "ReplicaSet",
                "web-5f7d8",
                phase="Pending",
                ready=False,
            ),
        ],
        deployments=[ExportedDeployment(NS, "web", spec=3, available=2, generation=4)],
    )


def test_cluster_state_is_queryable(prometheus: PrometheusHarness) -> None:
    t_set = time.time()
    _two_nodes_three_pods(prometheus)
    prometheus.wait_for_scrapes(3)

    # Instant queries see exactly the served state.
    assert prometheus.query_value("count(kube_node_info)") == 2
    ready_nodes = 'sum(kube_node_status_condition{condition="Ready",status="true"})'
    assert prometheus.query_value(ready_nodes) == 2
    assert prometheus.query_value("count(kube_pod_info)") == 3
    pods_per_node = {
        s["metric"]["node"]: float(s["value"][1])
        for s in prometheus.query("count by (node) (kube_pod_info)")
    }
    assert pods_per_node == {"node-a": 1.0, "node-b": 2.0}
    phase = 'sum(kube_pod_status_phase{{namespace="{ns}",phase="{phase}"}})'
    assert prometheus.query_value(phase.format(ns=NS, phase="Running")) == 2
    assert prometheus.query_value(phase.format(ns=NS, phase="Pending")) == 1
    assert prometheus.query_value('sum(kube_pod_status_ready{condition="true"})') == 2
    sel = f'{{namespace="{NS}",deployment="web"}}'
    assert prometheus.query_value(f"kube_deployment_spec_replicas{sel}") == 3
    assert prometheus.query_value(f"kube_deployment_status_replicas{sel}") == 3
    assert prometheus.query_value(f"kube_deployment_status_replicas_available{sel}") == 2
    assert prometheus.query_value(f"kube_deployment_metadata_generation{sel}") == 4
    assert prometheus.query_value(f"kube_deployment_status_observed_generation{sel}") == 4
    # pod -> replicaset -> deployment join, as tuner queries do it
    joined = prometheus.query(
        f'count by (owner_name) (kube_pod_owner{{namespace="{NS}"}} '
        "* on (namespace, owner_name) group_left() "
        'label_replace(kube_replicaset_owner{owner_kind="Deployment"}, '
        '"owner_name", "$1", "replicaset", "(.*)"))'
    )
    assert [s["metric"]["owner_name"] for s in joined] == ["web-5f7d8"]

    # A range query returns the value at every step since the state was set.
    end = time.time()
    series = prometheus.query_range("count(kube_pod_info)", start=t_set + 1, end=end, step=0.5)
    assert len(series) == 1
    values = [float(v) for _, v in series[0]["values"]]
    assert values
    assert set(values) == {3.0}

    # A state change is visible after the next ingested scrape (stale series disappear).
    prometheus.exporter.set_cluster(nodes=["node-a"], pods=[], deployments=[])
    prometheus.wait_for_scrapes(1)
    assert prometheus.query_value("count(kube_node_info)") == 1
    assert prometheus.query("kube_pod_info") == []


def test_counter_rate(prometheus: PrometheusHarness) -> None:
    labels = {"namespace": NS, "service": "web"}
    prometheus.exporter.set_rate("http_requests_total", labels, 1000.0)
    prometheus.exporter.set_network_receive_rate(NS, "web-5f7d8-aaaaa", 2.5e6)
    prometheus.exporter.set_cpu_rate(NS, "web-5f7d8-aaaaa", "app", 0.25)
    # rate(...[10s]) needs 10 s of samples taken at the new rate.
    prometheus.wait_for_scrapes(12)

    req = prometheus.query_value(f'rate(http_requests_total{{namespace="{NS}"}}[10s])')
    assert req == pytest.approx(1000.0, rel=0.10)
    net = prometheus.query_value("sum(rate(container_network_receive_bytes_total[10s]))")
    assert net == pytest.approx(2.5e6, rel=0.10)
    cpu = prometheus.query_value("sum(rate(container_cpu_usage_seconds_total[10s]))")
    assert cpu == pytest.approx(0.25, rel=0.10)


def test_stop_and_restart_prometheus(prometheus: PrometheusHarness) -> None:
    prometheus.exporter.set_gauge("tuner_test_marker", {}, 42)
    prometheus.wait_for_scrapes(1)
    prometheus.stop_prometheus(keep_data=True)
    assert not prometheus.is_running()
    prometheus.start_prometheus()
    assert prometheus.is_running()
    assert prometheus.query_value("tuner_test_marker") == 42


def test_exporter_down_sets_up_to_zero(prometheus: PrometheusHarness) -> None:
    prometheus.exporter.set_available(False)
    prometheus.wait_for_target_health(up=False)
    prometheus.exporter.set_available(True)
    prometheus.wait_for_target_health(up=True)
