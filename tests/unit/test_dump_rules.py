"""The scheduling rules read from API objects: spread, inter-pod affinity, host ports, extended
resources, volume topology; and the pruned objects the live reader keeps parse the same."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tuner.errors import InputError
from tuner.model import constraints as rules
from tuner.model.cluster import Pod
from tuner.monitor.dump import cluster_from_objects
from tuner.monitor.prune import pruned

ZONE = rules.ZONE_KEY
GPU = "nvidia.com/gpu"


def _node(name: str, zone: str = "a", gpus: int = 0) -> dict[str, Any]:
    allocatable: dict[str, Any] = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    if gpus:
        allocatable[GPU] = str(gpus)
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": {ZONE: zone, rules.HOSTNAME_KEY: name}},
        "status": {"capacity": dict(allocatable), "allocatable": allocatable},
    }


def _pod(name: str = "web-1", node: str | None = "n1", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
        **spec,
    }
    if node:
        body["nodeName"] = node
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"app": "web", "pod-template-hash": "abc"},
        },
        "spec": body,
        "status": {"phase": "Running" if node else "Pending"},
    }


def _one_pod(*items: dict[str, Any], strict: bool = True) -> Pod:
    cluster = cluster_from_objects([_node("n1"), *items], strict=strict)
    return cluster.pods[0]


def test_spread_constraints_with_their_defaults_and_match_label_keys() -> None:
    spec = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["pod-template-hash", "absent"],
                "minDomains": 3,
            },
            {
                "maxSkew": 2,
                "topologyKey": rules.HOSTNAME_KEY,
                "whenUnsatisfiable": "ScheduleAnyway",
                "nodeAffinityPolicy": "Ignore",
                "nodeTaintsPolicy": "Honor",
            },
        ]
    }
    zone, host = _one_pod(_pod(**spec)).constraints.spread
    assert zone == rules.SpreadConstraint(
        1,
        ZONE,
        rules.LabelSelector((("app", "web"), ("pod-template-hash", "abc"))),
        hard=True,
        min_domains=3,
        honor_node_affinity=True,
        honor_taints=False,
    )
    assert (host.hard, host.honor_node_affinity, host.honor_taints) == (False, False, True)
    assert host.selector == rules.NOTHING  # no labelSelector: it counts no pod
    assert not host.selector.matches({"app": "web"})


def test_pod_affinity_on_any_key_with_namespaces_as_the_data_allows() -> None:
    def term(**extra: Any) -> dict[str, Any]:
        return {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ZONE, **extra}

    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                term(),
                term(namespaceSelector={}),
                term(namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "data"}}),
                term(namespaceSelector={"matchLabels": {"team": "x"}}, namespaces=["ops"]),
            ],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 30, "podAffinityTerm": term()}
            ],
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                term(namespaceSelector={"matchLabels": {"team": "x"}})
            ]
        },
    }
    c = _one_pod(_pod(affinity=affinity)).constraints
    own, every, by_name, unknown = c.affinity
    assert own.namespaces == ("shop",) and own.topology_key == ZONE
    assert every.namespaces is None
    assert by_name.selects("data", {"app": "db"}) and not by_name.selects("shop", {"app": "db"})
    assert unknown.namespaces == ("ops",)  # affinity: a selector on other labels attracts none
    assert c.anti_affinity[0].namespaces is None  # anti-affinity: it repels every namespace
    assert c.preferred[0].weight == 30


def test_host_ports_of_containers_and_sidecars() -> None:
    spec = {
        "containers": [
            {"name": "c", "ports": [{"containerPort": 80}, {"containerPort": 80, "hostPort": 8080}]}
        ],
        "initContainers": [
            {"name": "once", "ports": [{"containerPort": 9, "hostPort": 9}]},
            {
                "name": "side",
                "restartPolicy": "Always",
                "ports": [{"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}],
            },
        ],
    }
    ports = _one_pod(_pod(**spec)).constraints.host_ports
    assert ports == (rules.HostPort(53, "UDP", "10.0.0.1"), rules.HostPort(8080))


def test_extended_resources_of_pods_and_nodes() -> None:
    def requests(gpus: str, **more: str) -> dict[str, Any]:
        return {"resources": {"requests": {"cpu": "1", GPU: gpus, **more}}}

    spec = {
        "containers": [requests("1"), requests("1")],
        "initContainers": [requests("3", **{"ephemeral-storage": "1Gi"})],
    }
    cluster = cluster_from_objects([_node("n1", gpus=4), _pod(**spec)])
    assert cluster.pods[0].constraints.extended == (("ephemeral-storage", 2**30), (GPU, 3))
    assert dict(cluster.nodes[0].extended) == {GPU: 4}


def _claim(name: str, volume: str = "") -> dict[str, Any]:
    return {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"volumeName": volume} if volume else {},
    }


def _volume(name: str, zone: str | None = None, label_zone: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if zone:
        terms = [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    labels = {ZONE: label_zone} if label_zone else {}
    return {"kind": "PersistentVolume", "metadata": {"name": name, "labels": labels}, "spec": spec}


def _mounting(*claims: str, ephemeral: str = "", node: str | None = "n1") -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [
        {"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims
    ]
    volumes.append({"name": "token", "projected": {"sources": []}})
    if ephemeral:
        volumes.append({"name": ephemeral, "ephemeral": {"volumeClaimTemplate": {}}})
    return _pod(node=node, volumes=volumes)


def test_a_bound_zonal_volume_holds_its_pod_to_the_zone() -> None:
    items = [
        _mounting("data", "cache", ephemeral="scratch"),
        _claim("data", "pv-data"),
        _claim("cache", "pv-any"),
        _claim("web-1-scratch", "pv-scratch"),
        _volume("pv-data", zone="a"),
        _volume("pv-any"),
        _volume("pv-scratch", label_zone="a__b"),
    ]
    volumes = _one_pod(*items).constraints.volumes
    assert [v.volume for v in volumes] == [
        "PersistentVolume pv-data (claim shop/data)",
        "PersistentVolume pv-scratch (claim shop/web-1-scratch)",
    ]
    on_b = {ZONE: "b"}
    assert not rules.selects_node(volumes[0].terms, on_b)
    assert rules.selects_node(volumes[1].terms, on_b)


def test_an_unbound_claim_gives_no_rule_and_an_unknown_one_keeps_its_pod_in_place(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pending = _one_pod(_mounting("new", node=None), _claim("new"))
    assert pending.constraints.volumes == ()
    with caplog.at_level(logging.WARNING):
        pinned = _one_pod(_mounting("lost"))
    (rule,) = pinned.constraints.volumes
    assert rule.volume == "claim shop/lost (volume not in the input)"
    assert rules.selects_node(rule.terms, {rules.HOSTNAME_KEY: "n1"})
    assert not rules.selects_node(rule.terms, {rules.HOSTNAME_KEY: "n2"})
    assert "1 PersistentVolumeClaim(s) or their volumes are not in the input" in caplog.text


def test_pruned_objects_parse_to_the_same_values() -> None:
    spec = {
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "labelSelector": {"matchLabels": {"app": "web"}}}
        ],
        "containers": [
            {
                "name": "c",
                "image": "x",
                "ports": [{"containerPort": 80}, {"containerPort": 80, "hostPort": 80}],
                "resources": {"requests": {"cpu": "1", GPU: "1"}},
            }
        ],
        "volumes": [
            {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {}}]}},
        ],
    }
    items = [
        _node("n1", gpus=1),
        _pod(**spec),
        _claim("data", "pv-data"),
        _volume("pv-data", zone="a", label_zone="a"),
    ]
    kept = [pruned(i["kind"], i) for i in items]
    assert cluster_from_objects(kept) == cluster_from_objects(items)
    pod = next(i for i in kept if i["kind"] == "Pod")
    assert pod["spec"]["volumes"] == [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
    assert pod["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "hostPort": 80}]


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        (
            {"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": ZONE}]},
            "spec.topologySpreadConstraints\\[0\\].maxSkew is 0",
        ),
        (
            {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ""}]},
            "spec.topologySpreadConstraints\\[0\\].topologyKey is ''",
        ),
        (
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Maybe"}
                ]
            },
            "whenUnsatisfiable is 'Maybe'",
        ),
        (
            {
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "nodeTaintsPolicy": "Sometimes"}
                ]
            },
            "nodeTaintsPolicy is 'Sometimes'",
        ),
        ({"topologySpreadConstraints": "x"}, "spec.topologySpreadConstraints is not a list"),
        (
            {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}}},
            "podAffinity.requiredDuringSchedulingIgnoredDuringExecution\\[0\\].topologyKey",
        ),
        (
            {"containers": [{"ports": [{"hostPort": 70000}]}]},
            "spec.containers\\[0\\].ports\\[0\\].hostPort is 70000",
        ),
        (
            {"containers": [{"resources": {"requests": {GPU: "many"}}}]},
            "invalid quantity",
        ),
        (
            {"containers": [{"resources": {"requests": {GPU: True}}}]},
            "gpu is True, not a quantity",
        ),
        (
            {"volumes": [{"name": "d", "persistentVolumeClaim": {}}]},
            "spec.volumes\\[0\\].persistentVolumeClaim.claimName is not a name",
        ),
    ],
)
def test_a_malformed_rule_fails_a_dump_naming_the_field(
    spec: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(InputError, match=f"pod 'shop/web-1': .*{fragment}"):
        cluster_from_objects([_node("n1"), _pod(**spec)])


def test_a_malformed_live_rule_skips_its_pod_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = _pod("bad", topologySpreadConstraints=[{"maxSkew": -1, "topologyKey": ZONE}])
    with caplog.at_level(logging.WARNING):
        cluster = cluster_from_objects([_node("n1"), bad, _pod("good")], strict=False)
    assert [p.name for p in cluster.pods] == ["good"]
    assert "skipping pod 'shop/bad'" in caplog.text and "maxSkew" in caplog.text


def test_a_malformed_volume_fails_a_dump() -> None:
    bad = {"kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {"volumeName": 5}}
    with pytest.raises(InputError, match=r"persistentvolumeclaim 'c': spec\.volumeName is 5"):
        cluster_from_objects([bad])
